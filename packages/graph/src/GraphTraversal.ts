import { PileError, type PilePointer } from '@pile/core';
import { capacityOf } from './AdjacencyTable';
import { PointerDeque } from './PointerDeque';
import { PointerSet } from './PointerSet';
import { A_SLOTS, IN_WIDTH, N_IN, N_OUT, OUT_WIDTH } from './RawLayout';
import type { RawStructure } from './RawStructure';
import { checkOptions } from './ValueStore';

/** Which edges of a node: those leaving it, those reaching it, or both. */
export type Direction = 'out' | 'in' | 'both';

/** Options of {@link PileGraph.traverse}. */
export interface TraverseOptions {
  /** Breadth-first (default; depth is the shortest distance) or depth-first (depth along the search tree). */
  order?: 'bfs' | 'dfs';
  /** Follow edges out of a node (default), into it, or both ways. */
  direction?: Direction;
  /** Do not expand nodes at this depth; default: no limit. 0 yields the start node only. */
  maxDepth?: number;
}

/** One node reached by {@link PileGraph.traverse}. */
export interface TraversalStep {
  node: PilePointer;
  depth: number;
}

/** @throws PILE_INVALID_OPTION naming option direction */
export function checkDirection(direction: unknown): asserts direction is Direction {
  if (direction !== 'out' && direction !== 'in' && direction !== 'both') {
    throw new PileError('PILE_INVALID_OPTION', `option direction: expected 'out', 'in' or 'both', got ${String(direction)}`);
  }
}

/**
 * The options of a traversal with their defaults.
 * @throws PILE_INVALID_OPTION for an unknown option or a bad order, direction or maxDepth, naming it
 */
export function traverseOptions(options: TraverseOptions): Required<TraverseOptions> {
  checkOptions(options, ['order', 'direction', 'maxDepth']);
  const { order = 'bfs', direction = 'out', maxDepth = Infinity } = options;
  if (order !== 'bfs' && order !== 'dfs') throw new PileError('PILE_INVALID_OPTION', `option order: expected 'bfs' or 'dfs', got ${String(order)}`);
  checkDirection(direction);
  if (typeof maxDepth !== 'number' || !(maxDepth >= 0) || (maxDepth !== Infinity && !Number.isInteger(maxDepth))) {
    throw new PileError('PILE_INVALID_OPTION', `option maxDepth: expected a non-negative integer or Infinity, got ${String(maxDepth)}`);
  }
  return { order, direction, maxDepth };
}

/**
 * The one traversal behind {@link PileGraph.traverse}, lazily from `start` (checked by the
 * caller). bfs takes the frontier's front and marks a node visited when it is pushed, so each
 * depth is the shortest distance; dfs takes the back and marks a node when it is taken, so the
 * depth is along the search tree. Both yield every reachable node once, skip nodes removed
 * while the walk was paused, and read a node's edges when it is expanded, right after its yield.
 */
export function* traverseGraph(raw: RawStructure, start: PilePointer, order: 'bfs' | 'dfs', direction: Direction, maxDepth: number): IterableIterator<TraversalStep> {
  const bfs = order === 'bfs';
  const epoch = raw.state.epoch;
  const visited = new PointerSet();
  const frontier = new PointerDeque();
  if (bfs) visited.add(start);
  frontier.push(start, 0);
  while (frontier.length > 0) {
    raw.open();
    let p: PilePointer;
    let depth: number;
    if (bfs) {
      p = frontier.front() as PilePointer;
      depth = frontier.frontDepth();
      frontier.shift();
    } else {
      p = frontier.back() as PilePointer;
      depth = frontier.backDepth();
      frontier.pop();
      if (visited.has(p)) continue;
    }
    if (raw.state.epoch !== epoch && !raw.pile.has(p)) continue;
    if (!bfs) visited.add(p);
    yield { node: p, depth };
    if (depth >= maxDepth) continue;
    raw.open();
    if (raw.state.epoch !== epoch && !raw.pile.has(p)) continue;
    expand(raw, p, direction, depth + 1, visited, frontier, bfs);
  }
}

/** Pushes the unvisited neighbors of `p`; `mark` adds them to `visited` at once (bfs). */
function expand(raw: RawStructure, p: PilePointer, direction: Direction, depth: number, visited: PointerSet, frontier: PointerDeque, mark: boolean): void {
  const m = raw.mem;
  const n = raw.node(p);
  const out = m.f64[n + N_OUT]!;
  const inn = m.f64[n + N_IN]!;
  if (direction !== 'in' && out !== 0) pushSlots(raw, out as PilePointer, OUT_WIDTH, depth, visited, frontier, mark);
  if (direction !== 'out' && inn !== 0) pushSlots(raw, inn as PilePointer, IN_WIDTH, depth, visited, frontier, mark);
  m.release();
}

function pushSlots(raw: RawStructure, block: PilePointer, width: number, depth: number, visited: PointerSet, frontier: PointerDeque, mark: boolean): void {
  const m = raw.mem;
  const b = m.at(raw.pile, block, A_SLOTS);
  const f = m.f64;
  const cap = capacityOf(m.words, width);
  for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += width) {
    const k = f[at]!;
    if (k <= 0) continue;
    if (mark) {
      if (visited.add(k)) frontier.push(k, depth);
    } else if (!visited.has(k)) {
      frontier.push(k, depth);
    }
  }
}
