/** The named points of {@link faultPoints}. */
export type FaultPoint =
  /** A recovery starts, or one of its walks over the segments does. */
  'recovery-walk';

/**
 * Named points in the core where tests step in (count how often a step runs, or kill the process
 * there) instead of patching private methods by name. Nothing is set outside tests: a point
 * costs one load and one comparison, and none lies on a per-record path.
 */
export const faultPoints: { hit: ((point: FaultPoint) => void) | undefined } = { hit: undefined };
