export { PileList, openList } from './PileList';
export type { PileListOptions } from './PileList';
export { PileGraph, openGraph } from './PileGraph';
export type { PileGraphOptions, Direction, TraverseOptions, TraversalStep } from './PileGraph';
