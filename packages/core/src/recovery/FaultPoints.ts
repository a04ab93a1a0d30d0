/** The named points of {@link faultPoints}. */
export type FaultPoint =
  /** A recovery starts, or one of its walks over the segments does. */
  | 'recovery-walk'
  /** The allocator starts a walk over its segments: a rebuild of its free lists (whole or of regions), or a count. */
  | 'allocator-walk'
  /** A rebuild of the allocator's free lists walked one whole segment and merged its free runs. */
  | 'segment-walked'
  /** A rebuild of the allocator's free lists from a checkpoint walked one region (see rebuildRegions) and merged its free runs. */
  | 'region-walked'
  /** Recovery is about to replay a committed journal record. */
  | 'recovery-replay'
  /** trim() splits a block: the rest is to become a block of its own; nothing of the block is changed yet. */
  | 'trim-split'
  /** trim() gave the rest a RESERVED header and shrank the block; the rest is not freed yet. */
  | 'trim-shrunk'
  /** A segment's dirty mark is about to be written to pile.meta; the write it announces waits for it. */
  | 'mark-writing'
  /** A segment's dirty mark is written to pile.meta; the write it announces is not done yet. */
  | 'mark-written'
  /** A set's journal record is written (and a grown value's new body committed); the journal is not committed yet. */
  | 'journal-written'
  /** A set's journal record is committed; the record it changes is not touched yet. */
  | 'journal-committed'
  /** A new catalog record is committed; no meta file slot names it yet. */
  | 'catalog-written'
  /** A meta file slot names the new catalog record; the old record is not freed yet. */
  | 'catalog-named'
  /** The meta file counts a new segment; the allocator has not made it its tail yet. */
  | 'segment-counted'
  /** A checkpoint saved the rows of the segments written since the last one; its state (which names them) is not saved yet. */
  | 'rows-written'
  /** A checkpoint's allocator state is saved; the dirty marks are not cleared yet. */
  | 'checkpoint-saved'
  /** A checkpoint cleared the dirty marks; the allocator does not know yet. */
  | 'checkpoint-cleared'
  /** The tail's fold (SegmentRows' foldTail) moved foldAt on; the pending counters are not in the row yet. */
  | 'tail-folding'
  /** A write logged the old bytes of a store it is about to make (UndoLog.ts); the store is not made yet. */
  | 'undo-logged'
  /** A repair is about to put back one entry of a dead write's undo log. */
  | 'undo-restoring';

/**
 * Named points in the core where tests step in (count how often a step runs, or kill the process
 * there) instead of patching private methods by name. Nothing is set outside tests: a point
 * costs one load and one comparison. None lies on the put or get paths but 'undo-logged', passed once
 * per word a delete, an in-place set or a put into a free block logs (a few to a few dozen per
 * such write; a put at the tail logs none); the two of set's
 * journal are passed once per set whose journal also allocates, writes and frees a block, and the
 * allocator's walk points once per walk and per segment it walks (a put runs one only to merge the
 * free runs of a whole pile, before it grows). The trim points are passed only by a put that
 * splits its block, which then also frees the rest; the mark points once per segment and mark
 * level per checkpoint, with a write to pile.meta.
 */
export const faultPoints: { hit: ((point: FaultPoint) => void) | undefined } = { hit: undefined };
