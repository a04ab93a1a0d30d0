import { PileError, type PilePointer } from '@pile/core';
import { forEachSlot } from './NodeTables';
import { PointerDeque } from './PointerDeque';
import { PointerSet } from './PointerSet';
import { IN_WIDTH, N_IN, N_OUT, OUT_WIDTH } from './RawLayout';
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
  if (order !== 'bfs' && order !== 'dfs')
    throw new PileError('PILE_INVALID_OPTION', `option order: expected 'bfs' or 'dfs', got ${String(order)}`);
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
export function* traverseGraph(
  raw: RawStructure,
  start: PilePointer,
  order: 'bfs' | 'dfs',
  direction: Direction,
  maxDepth: number,
): IterableIterator<TraversalStep> {
  const bfs = order === 'bfs';
  const epoch = raw.state.epoch;
  const walk = new Frontier(raw, bfs, direction);
  const { visited, pending } = walk;
  if (bfs) visited.add(start);
  pending.push(start, 0);
  while (pending.length > 0) {
    raw.open();
    let p: PilePointer;
    let depth: number;
    if (bfs) {
      p = pending.front() as PilePointer;
      depth = pending.frontDepth();
      pending.shift();
    } else {
      p = pending.back() as PilePointer;
      depth = pending.backDepth();
      pending.pop();
      if (visited.has(p)) continue;
    }
    if (raw.changedSince(epoch) && !raw.pile.has(p)) continue;
    if (!bfs) visited.add(p);
    yield { node: p, depth };
    if (depth >= maxDepth) continue;
    raw.open();
    if (raw.changedSince(epoch) && !raw.pile.has(p)) continue;
    walk.expand(p, depth + 1);
  }
}

/** The visited set and the pending nodes (with their depths) of one traversal. */
class Frontier {
  readonly visited = new PointerSet();
  readonly pending = new PointerDeque();

  constructor(
    private readonly raw: RawStructure,
    /** bfs marks a node visited when it is pushed, dfs when it is taken. */
    private readonly markOnPush: boolean,
    private readonly direction: Direction,
  ) {}

  /** Pushes the unvisited neighbors of `p` at `depth`. */
  expand(p: PilePointer, depth: number): void {
    if (this.raw.checked) {
      // Read at one moment (RawStructure.reread), pushed after: a read made again pushes nothing twice.
      const got: number[] = [];
      this.raw.reread(() => {
        got.length = 0;
        // Removed by the writer since it was checked: it has no edges to follow.
        if (this.raw.pile.has(p)) this.read(p, (k) => got.push(k));
      });
      for (const k of got) this.push(k, depth);
      return;
    }
    this.read(p, (k) => this.push(k, depth));
  }

  /** Calls `visit` with each neighbor of `p` in the direction (a node both ways: once a table). */
  private read(p: PilePointer, visit: (k: number) => void): void {
    const m = this.raw.mem;
    const n = this.raw.node(p);
    const out = m.f64[n + N_OUT]!;
    const inn = m.f64[n + N_IN]!;
    if (this.direction !== 'in' && out !== 0) this.readTable(out as PilePointer, OUT_WIDTH, visit);
    if (this.direction !== 'out' && inn !== 0) this.readTable(inn as PilePointer, IN_WIDTH, visit);
    m.release();
  }

  private readTable(block: PilePointer, width: number, visit: (k: number) => void): void {
    forEachSlot(this.raw, block, width, visit);
  }

  /** Pushes neighbor `k` at `depth` unless visited. */
  private push(k: number, depth: number): void {
    if (this.markOnPush) {
      if (this.visited.add(k)) this.pending.push(k, depth);
    } else if (!this.visited.has(k)) {
      this.pending.push(k, depth);
    }
  }
}
