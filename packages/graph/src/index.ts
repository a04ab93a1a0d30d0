export { PileList } from './PileList';
export type { PileListOptions } from './PileList';
export { PileGraph } from './PileGraph';
export type { PileGraphOptions, Direction, TraverseOptions, TraversalStep } from './PileGraph';
