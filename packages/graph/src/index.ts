export { PileList, openList } from './PileList';
export type { PileListOptions } from './PileList';
export { PileGraph, openGraph } from './PileGraph';
export type { PileGraphOptions } from './PileGraph';
export type { Direction, TraverseOptions, TraversalStep } from './GraphTraversal';
