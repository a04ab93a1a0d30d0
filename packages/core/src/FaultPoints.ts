/** The named points of {@link faultPoints}. */
export type FaultPoint =
  /** A recovery starts, or one of its walks over the segments does. */
  | 'recovery-walk'
  /** Recovery is about to replay a committed journal record. */
  | 'recovery-replay'
  /** A set's journal record is written (and a grown value's new body committed); the journal is not committed yet. */
  | 'journal-written'
  /** A set's journal record is committed; the record it changes is not touched yet. */
  | 'journal-committed'
  /** A new catalog record is committed; no meta file slot names it yet. */
  | 'catalog-written'
  /** The meta file counts a new segment; the allocator has not made it its tail yet. */
  | 'segment-counted'
  /** A checkpoint's allocator state is saved; the dirty marks are not cleared yet. */
  | 'checkpoint-saved'
  /** A checkpoint cleared the dirty marks; the allocator does not know yet. */
  | 'checkpoint-cleared';

/**
 * Named points in the core where tests step in (count how often a step runs, or kill the process
 * there) instead of patching private methods by name. Nothing is set outside tests: a point
 * costs one load and one comparison. None lies on the put, get or delete paths; the two of set's
 * journal are passed once per set whose journal also allocates, writes and frees a block.
 */
export const faultPoints: { hit: ((point: FaultPoint) => void) | undefined } = { hit: undefined };
