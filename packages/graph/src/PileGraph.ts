import type { ZodType } from 'zod';
import { PileError, isPileError, type Pile, type PilePointer, encodeGuard, reentrantError } from '@pile/core';
import {
  TOMBSTONE, capacityFor, capacityOf, findSlot, hasRoom, insertKey, removeSlot, slotIndex, wordsFor,
} from './AdjacencyTable';
import { PointerDeque } from './PointerDeque';
import { PointerSet } from './PointerSet';
import { RawMemory } from './RawMemory';
import {
  A_GRAPH, A_LIVE, A_MAGIC, A_SLOTS, A_USED, G_A, G_B, G_D, G_DIRTY, G_EDGES, G_FIRST, G_MAGIC, G_NODES, G_OP,
  G_VERSION, G_WORDS, IN_WIDTH, LAYOUT_VERSION, N_DATA, N_GRAPH, N_IN, N_MAGIC, N_NEXT, N_OUT, N_PREV, N_WORDS,
  OP_ADD_NODE, OP_EDGE, OP_NONE, OP_REMOVE_NODE, OUT_WIDTH, TAG_GRAPH, TAG_IN, TAG_NODE, TAG_OUT,
} from './RawLayout';
import { sharedState, type SharedState } from './Shared';
import { safeDelete, safeHas } from './SafeOps';
import { ValueStore, checkName, checkOptions, checkSchemaOption } from './ValueStore';

/** Which edges of a node: those leaving it, those reaching it, or both. */
export type Direction = 'out' | 'in' | 'both';

/** Options of {@link PileGraph.open}. */
export interface PileGraphOptions<N, E> {
  /** Store node data as typed records of this zod object schema (compiled codec); default: the generic codec. */
  nodeSchema?: ZodType<N>;
  /** Store edge data as typed records of this zod object schema; default: the generic codec. */
  edgeSchema?: ZodType<E>;
}

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

const OPTIONS = ['nodeSchema', 'edgeSchema'] as const;

/**
 * A persistent directed graph whose nodes and adjacency live in a pile. A node's identity is
 * the pointer of its node record (a small raw header holding the data pointer and the
 * pointers of its out- and in-adjacency tables); adjacency tables are hash sets in raw pile
 * blocks, so an idle graph holds no per-node or per-edge JS objects and `hasEdge` is O(1)
 * at any degree. At most one edge per ordered pair (adding it again replaces its data);
 * self-loops are allowed. Found again after a restart by name (root `graph:<name>`).
 * See docs/graph.md for the layout and the crash behaviour.
 */
export class PileGraph<N, E = undefined> {
  private readonly mem = new RawMemory();

  private constructor(
    /** The pile this graph lives in. */
    readonly pile: Pile,
    /** The graph's name (its root is `graph:<name>`). */
    readonly name: string,
    private readonly header: PilePointer,
    private readonly nodeValues: ValueStore<N>,
    private readonly edgeValues: ValueStore<E>,
    private readonly state: SharedState,
  ) {}

  /**
   * Opens the graph named `name` in `pile`, creating it when missing. After an unclean
   * shutdown (or an operation interrupted by a kill), the first open in a process repairs
   * the graph (see docs/graph.md) before returning.
   * @throws PILE_INVALID_OPTION for a bad name or option, naming it
   * @throws PILE_READONLY when the graph does not exist and the pile is read-only
   * @throws PILE_CORRUPT when the root `graph:<name>` does not name a graph header
   * @throws PILE_FORMAT_VERSION when the graph was written by a newer layout
   * @throws PILE_SCHEMA_MISMATCH when a schema differs from the one the graph was created with
   * @throws PILE_CLOSED, PILE_OUT_OF_SPACE
   */
  static open<N, E = undefined>(pile: Pile, name: string, options: PileGraphOptions<N, E> = {}): PileGraph<N, E> {
    checkName(name);
    checkOptions(options, OPTIONS);
    checkSchemaOption('nodeSchema', options.nodeSchema);
    checkSchemaOption('edgeSchema', options.edgeSchema);
    const root = `graph:${name}`;
    let header = pile.getRoot(root);
    const mem = new RawMemory();
    if (header === undefined) {
      if (pile.readonly) throw new PileError('PILE_READONLY', `graph '${name}' does not exist and the pile is open read-only`);
      header = pile.allocRaw(G_WORDS * 8, TAG_GRAPH);
      const g = mem.at(pile, header, G_WORDS);
      mem.f64[g + G_VERSION] = LAYOUT_VERSION;
      mem.f64[g + G_MAGIC] = TAG_GRAPH;
      pile.setRoot(root, header);
    } else {
      let g: number;
      try {
        g = mem.at(pile, header, G_WORDS);
      } catch (err) {
        if (isPileError(err, 'PILE_INVALID_POINTER') || isPileError(err, 'PILE_STALE_POINTER')) {
          throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${header}) does not name a graph header: ${err.message}`);
        }
        throw err;
      }
      if (mem.f64[g + G_MAGIC] !== TAG_GRAPH) throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${header}) does not name a graph header`);
      const version = mem.f64[g + G_VERSION]!;
      if (version > LAYOUT_VERSION) {
        throw new PileError('PILE_FORMAT_VERSION', `graph '${name}' has layout version ${version}; this @pile/graph reads up to ${LAYOUT_VERSION}`);
      }
    }
    mem.release();
    const nodeValues = new ValueStore<N>(pile, `graph:${name}:node`, options.nodeSchema);
    const edgeValues = new ValueStore<E>(pile, `graph:${name}:edge`, options.edgeSchema);
    const graph = new PileGraph<N, E>(pile, name, header, nodeValues, edgeValues, sharedState(pile, root));
    graph.recoverIfNeeded();
    return graph;
  }

  // ------------------------------------------------------------------ counters

  /** Nodes in the graph. @throws PILE_CLOSED */
  get nodeCount(): number {
    return this.headerWord(G_NODES);
  }

  /** Edges in the graph. @throws PILE_CLOSED */
  get edgeCount(): number {
    return this.headerWord(G_EDGES);
  }

  // ------------------------------------------------------------------ nodes

  /**
   * Stores `data` and adds a node holding it; returns the node's id (stable for its life and across restarts).
   * @throws PILE_SCHEMA_VIOLATION when `data` does not match `nodeSchema`; nothing is written
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  addNode(data: N): PilePointer {
    this.writable();
    const pile = this.pile;
    const m = this.mem;
    // Header resolved before the put: no pile call between the put and the intent naming its record.
    const g = this.hdr();
    const gf = m.f64;
    const dataPtr = this.nodeValues.put(data);
    this.beginAt(gf, g, OP_ADD_NODE, 0, 0, dataPtr);
    let node: PilePointer;
    try {
      node = pile.allocRaw(N_WORDS * 8, TAG_NODE);
    } catch (err) {
      // Out of space (nothing allocated): undo the put. Anything else leaves the mark for repair.
      if (isPileError(err)) {
        pile.delete(dataPtr);
        this.end();
      }
      throw err;
    }
    const first = gf[g + G_FIRST]!;
    const n = m.at(pile, node, N_WORDS);
    const f = m.f64;
    f[n + N_MAGIC] = TAG_NODE;
    f[n + N_GRAPH] = this.header;
    f[n + N_DATA] = dataPtr;
    f[n + N_NEXT] = first;
    if (first !== 0) {
      const p = m.at(pile, first as PilePointer, N_WORDS);
      m.f64[p + N_PREV] = node;
    }
    gf[g + G_FIRST] = node;
    gf[g + G_NODES] = gf[g + G_NODES]! + 1;
    gf[g + G_OP] = OP_NONE;
    gf[g + G_DIRTY] = 0;
    m.release();
    return node;
  }

  /**
   * The data of node `id`.
   * @throws PILE_STALE_POINTER when the node was removed
   * @throws PILE_INVALID_POINTER when `id` is not a node of this graph
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT, PILE_CLOSED
   */
  getNode(id: PilePointer): N {
    const n = this.node(id);
    const dataPtr = this.mem.f64[n + N_DATA]! as PilePointer;
    this.mem.release();
    return this.nodeValues.get(dataPtr);
  }

  /**
   * Replaces the data of node `id` in place (through a link when it grew); crash-atomic. Its id and edges stay.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link getNode}
   * @throws PILE_SCHEMA_VIOLATION, PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  setNode(id: PilePointer, data: N): void {
    this.writable();
    const n = this.node(id);
    const dataPtr = this.mem.f64[n + N_DATA]! as PilePointer;
    this.mem.release();
    this.nodeValues.set(dataPtr, data);
  }

  /**
   * True when `id` is a live node of this graph (false for a removed one or any other pointer).
   * @throws PILE_CLOSED
   */
  hasNode(id: PilePointer): boolean {
    this.open();
    if (typeof id !== 'number' || !this.pile.has(id)) return false;
    try {
      this.node(id);
      return true;
    } catch (err) {
      if (isPileError(err, 'PILE_INVALID_POINTER')) return false;
      throw err;
    } finally {
      this.mem.release();
    }
  }

  /**
   * Removes node `id`, its edges (both ways) and their data; frees their pile space. Later use
   * of `id` throws PILE_STALE_POINTER.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link getNode}
   * @throws PILE_READONLY, PILE_CLOSED
   */
  deleteNode(id: PilePointer): void {
    this.writable();
    this.node(id);
    this.begin(OP_REMOVE_NODE, id, 0, 0);
    this.removeNodeBody(id);
    this.end();
  }


  /**
   * @deprecated Use {@link deleteNode}, the name every Pile package uses; this stays as its alias.
   * @throws as {@link deleteNode}
   */
  removeNode(id: PilePointer): void {
    this.deleteNode(id);
  }
  /**
   * Every node id once, newest first. Lazy; nodes added during the iteration are not seen;
   * removing the node just yielded (or the one after it) is safe.
   * @throws PILE_CLOSED; PILE_STALE_POINTER when both the node just yielded and its successor were removed meanwhile
   */
  nodes(): IterableIterator<PilePointer> {
    this.open();
    return this.iterateNodes();
  }

  private *iterateNodes(): IterableIterator<PilePointer> {
    let cur = this.headerWord(G_FIRST);
    while (cur !== 0) {
      let n = this.node(cur as PilePointer);
      let next = this.mem.f64[n + N_NEXT]!;
      this.mem.release();
      const epoch = this.state.epoch;
      yield cur as PilePointer;
      if (this.state.epoch !== epoch) {
        this.open();
        if (this.pile.has(cur as PilePointer)) {
          n = this.node(cur as PilePointer);
          next = this.mem.f64[n + N_NEXT]!;
          this.mem.release();
        } else if (next !== 0 && !this.pile.has(next as PilePointer)) {
          throw new PileError('PILE_STALE_POINTER', `graph '${this.name}': nodes ${cur} and ${next}, where the iteration stood, were both removed during it`);
        }
      }
      cur = next;
    }
  }

  // ------------------------------------------------------------------ edges

  /**
   * Adds the edge `from` → `to` with optional data; when it exists, replaces its data
   * (`undefined` clears it). A self-loop (`from === to`) is allowed.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER when either end is not a live node of this graph
   * @throws PILE_SCHEMA_VIOLATION when `data` does not match `edgeSchema`; nothing is written
   * @throws PILE_TOO_LARGE when a node's adjacency table would not fit in one segment (segmentSize / 16 edges each way)
   * @throws PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  addEdge(from: PilePointer, to: PilePointer, data?: E): void {
    this.writable();
    const pile = this.pile;
    const m = this.mem;
    // Node headers never move, and blocks stay where they are until deleted: the views and
    // bases captured here stay valid across the allocations below.
    const tn = this.node(to);
    const tf = m.f64;
    const fn = this.node(from);
    const ff = m.f64;
    const out = ff[fn + N_OUT]! as PilePointer;
    if (out !== 0) {
      const b = m.at(pile, out, A_SLOTS);
      const slot = findSlot(m.f64, b, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, to);
      if (slot >= 0) {
        m.release();
        this.replaceEdgeData(from, to, out, slot, data);
        return;
      }
    }
    const g = this.hdr();
    const gf = m.f64;
    const dataPtr = data === undefined ? 0 : this.edgeValues.put(data);
    this.beginAt(gf, g, OP_EDGE, from, to, dataPtr);
    try {
      this.ensureRoom(from, N_OUT);
      this.ensureRoom(to, N_IN);
    } catch (err) {
      // allocRaw refused a table (out of space, too large): nothing changed but a table that grew,
      // which is consistent. Anything else leaves the mark so that the next write or open repairs.
      if (isPileError(err, 'PILE_OUT_OF_SPACE') || isPileError(err, 'PILE_TOO_LARGE')) {
        if (dataPtr !== 0) pile.delete(dataPtr as PilePointer);
        this.end();
      }
      throw err;
    }
    // The tables may have moved while growing: locate both again.
    const ob = m.at(pile, ff[fn + N_OUT]! as PilePointer, A_SLOTS);
    const of = m.f64;
    insertKey(of, ob, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, to, dataPtr);
    const ib = m.at(pile, tf[tn + N_IN]! as PilePointer, A_SLOTS);
    insertKey(m.f64, ib, capacityOf(m.words, IN_WIDTH), IN_WIDTH, from, 0);
    gf[g + G_EDGES] = gf[g + G_EDGES]! + 1;
    gf[g + G_OP] = OP_NONE;
    gf[g + G_DIRTY] = 0;
    m.release();
  }

  /**
   * Removes the edge `from` → `to` and frees its data; false when there was none.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER when either end is not a live node of this graph
   * @throws PILE_READONLY, PILE_CLOSED
   */
  deleteEdge(from: PilePointer, to: PilePointer): boolean {
    this.writable();
    const m = this.mem;
    this.node(to);
    const n = this.node(from);
    const out = m.f64[n + N_OUT]!;
    if (out === 0) return this.done(false);
    const b = m.at(this.pile, out as PilePointer, A_SLOTS);
    const f = m.f64;
    const slot = findSlot(f, b, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, to);
    if (slot < 0) return this.done(false);
    const dataPtr = f[slotIndex(b, OUT_WIDTH, slot) + 1]!;
    this.begin(OP_EDGE, from, to, dataPtr);
    removeSlot(f, b, OUT_WIDTH, slot);
    this.removeNeighbor(to, N_IN, from);
    const g = this.hdr();
    m.f64[g + G_EDGES] = m.f64[g + G_EDGES]! - 1;
    if (dataPtr !== 0) this.pile.delete(dataPtr as PilePointer);
    this.compact(from, N_OUT);
    this.compact(to, N_IN);
    this.end();
    return true;
  }


  /**
   * @deprecated Use {@link deleteEdge}, the name every Pile package uses; this stays as its alias.
   * @throws as {@link deleteEdge}
   */
  removeEdge(from: PilePointer, to: PilePointer): boolean {
    return this.deleteEdge(from, to);
  }
  /**
   * True when the edge `from` → `to` exists. O(1) expected at any degree.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER when either end is not a live node of this graph
   * @throws PILE_CLOSED
   */
  hasEdge(from: PilePointer, to: PilePointer): boolean {
    return this.edgeSlot(from, to) >= 0 ? this.done(true) : this.done(false);
  }

  /**
   * The data of the edge `from` → `to`; undefined when the edge does not exist or has no data.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER when either end is not a live node of this graph
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT, PILE_CLOSED
   */
  edge(from: PilePointer, to: PilePointer): E | undefined {
    const at = this.edgeSlot(from, to);
    if (at < 0) return this.done(undefined);
    const dataPtr = this.mem.f64[at + 1]!;
    this.mem.release();
    return dataPtr === 0 ? undefined : this.edgeValues.get(dataPtr as PilePointer);
  }

  /**
   * Number of edges of node `id` in `direction` (default 'out'); 'both' is out + in (a self-loop counts twice).
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link getNode}
   * @throws PILE_INVALID_OPTION for a bad direction, PILE_CLOSED
   */
  degree(id: PilePointer, direction: Direction = 'out'): number {
    checkDirection(direction);
    const n = this.node(id);
    const f = this.mem.f64;
    const out = f[n + N_OUT]!;
    const inn = f[n + N_IN]!;
    let d = 0;
    if (direction !== 'in' && out !== 0) d += this.liveOf(out as PilePointer);
    if (direction !== 'out' && inn !== 0) d += this.liveOf(inn as PilePointer);
    return this.done(d);
  }

  /**
   * The nodes adjacent to `id` in `direction` (default 'out'), each once ('both' yields a node
   * that is both a successor and a predecessor once). The adjacency is read when the call is
   * made, into a typed array; nodes removed before they are reached are skipped.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link getNode}
   * @throws PILE_INVALID_OPTION for a bad direction, PILE_CLOSED
   */
  neighbors(id: PilePointer, direction: Direction = 'out'): IterableIterator<PilePointer> {
    checkDirection(direction);
    const n = this.node(id);
    const f = this.mem.f64;
    const out = f[n + N_OUT]!;
    const inn = f[n + N_IN]!;
    const outLive = direction !== 'in' && out !== 0 ? this.liveOf(out as PilePointer) : 0;
    const inLive = direction !== 'out' && inn !== 0 ? this.liveOf(inn as PilePointer) : 0;
    const list = new Float64Array(outLive + inLive);
    let count = 0;
    const m = this.mem;
    if (outLive > 0) {
      const b = m.at(this.pile, out as PilePointer, A_SLOTS);
      const of = m.f64;
      const cap = capacityOf(m.words, OUT_WIDTH);
      for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += OUT_WIDTH) {
        const k = of[at]!;
        if (k > 0) list[count++] = k;
      }
    }
    if (inLive > 0) {
      let outF: Float64Array | undefined;
      let outB = 0;
      let outCap = 0;
      if (outLive > 0) {
        outB = m.at(this.pile, out as PilePointer, A_SLOTS);
        outF = m.f64;
        outCap = capacityOf(m.words, OUT_WIDTH);
      }
      const b = m.at(this.pile, inn as PilePointer, A_SLOTS);
      const inF = m.f64;
      const cap = capacityOf(m.words, IN_WIDTH);
      for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += IN_WIDTH) {
        const k = inF[at]!;
        if (k > 0 && (outF === undefined || findSlot(outF, outB, outCap, OUT_WIDTH, k) < 0)) list[count++] = k;
      }
    }
    m.release();
    return this.iterateList(list, count);
  }

  private *iterateList(list: Float64Array, count: number): IterableIterator<PilePointer> {
    const epoch = this.state.epoch;
    for (let i = 0; i < count; i++) {
      const p = list[i]! as PilePointer;
      if (this.state.epoch !== epoch && !this.pile.has(p)) continue;
      yield p;
    }
  }

  // ------------------------------------------------------------------ traversal

  /**
   * Walks the graph from `start`, lazily: each step reads one node's adjacency from the pile.
   * Every reachable node is yielded once, with its depth (bfs: shortest distance from start).
   * The visited set and the frontier are typed arrays, not per-node JS objects. The graph
   * may change between steps: removed nodes are skipped, and a node's edges are read when
   * it is expanded (right after it is yielded).
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER when `start` is not a live node of this graph
   * @throws PILE_INVALID_OPTION for a bad order, direction or maxDepth, PILE_CLOSED
   */
  traverse(start: PilePointer, options: TraverseOptions = {}): IterableIterator<TraversalStep> {
    checkOptions(options, ['order', 'direction', 'maxDepth']);
    const { order = 'bfs', direction = 'out', maxDepth = Infinity } = options;
    if (order !== 'bfs' && order !== 'dfs') throw new PileError('PILE_INVALID_OPTION', `option order: expected 'bfs' or 'dfs', got ${String(order)}`);
    checkDirection(direction);
    if (typeof maxDepth !== 'number' || !(maxDepth >= 0) || (maxDepth !== Infinity && !Number.isInteger(maxDepth))) {
      throw new PileError('PILE_INVALID_OPTION', `option maxDepth: expected a non-negative integer or Infinity, got ${String(maxDepth)}`);
    }
    this.node(start);
    this.mem.release();
    return order === 'bfs' ? this.bfs(start, direction, maxDepth) : this.dfs(start, direction, maxDepth);
  }

  private *bfs(start: PilePointer, direction: Direction, maxDepth: number): IterableIterator<TraversalStep> {
    const epoch = this.state.epoch;
    const visited = new PointerSet();
    const queue = new PointerDeque();
    visited.add(start);
    queue.push(start, 0);
    while (queue.length > 0) {
      this.open();
      const p = queue.front() as PilePointer;
      const depth = queue.frontDepth();
      queue.shift();
      if (this.state.epoch !== epoch && !this.pile.has(p)) continue;
      yield { node: p, depth };
      if (depth >= maxDepth) continue;
      this.open();
      if (this.state.epoch !== epoch && !this.pile.has(p)) continue;
      this.expand(p, direction, depth + 1, visited, queue, true);
    }
  }

  private *dfs(start: PilePointer, direction: Direction, maxDepth: number): IterableIterator<TraversalStep> {
    const epoch = this.state.epoch;
    const visited = new PointerSet();
    const stack = new PointerDeque();
    stack.push(start, 0);
    while (stack.length > 0) {
      this.open();
      const p = stack.back() as PilePointer;
      const depth = stack.backDepth();
      stack.pop();
      if (visited.has(p)) continue;
      if (this.state.epoch !== epoch && !this.pile.has(p)) continue;
      visited.add(p);
      yield { node: p, depth };
      if (depth >= maxDepth) continue;
      this.open();
      if (this.state.epoch !== epoch && !this.pile.has(p)) continue;
      this.expand(p, direction, depth + 1, visited, stack, false);
    }
  }

  /** Pushes the unvisited neighbors of `p`; `mark` adds them to `visited` at once (bfs). */
  private expand(p: PilePointer, direction: Direction, depth: number, visited: PointerSet, frontier: PointerDeque, mark: boolean): void {
    const m = this.mem;
    const n = this.node(p);
    const out = m.f64[n + N_OUT]!;
    const inn = m.f64[n + N_IN]!;
    if (direction !== 'in' && out !== 0) this.pushSlots(out as PilePointer, OUT_WIDTH, depth, visited, frontier, mark);
    if (direction !== 'out' && inn !== 0) this.pushSlots(inn as PilePointer, IN_WIDTH, depth, visited, frontier, mark);
    m.release();
  }

  private pushSlots(block: PilePointer, width: number, depth: number, visited: PointerSet, frontier: PointerDeque, mark: boolean): void {
    const m = this.mem;
    const b = m.at(this.pile, block, A_SLOTS);
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

  // ------------------------------------------------------------------ internals: access

  private open(): void {
    if (this.pile.isClosed) throw new PileError('PILE_CLOSED', 'the pile is closed');
  }

  /** Checks that the graph may be changed; repairs it first when an earlier operation failed half-way. */
  private writable(): void {
    this.open();
    if (this.pile.readonly) throw new PileError('PILE_READONLY', `graph '${this.name}': the pile is open read-only`);
    // A write from a value's getter while the pile stores a value: refused before any raw block
    // is touched (the pile refuses its own writes the same way).
    if (encodeGuard.depth !== 0) throw reentrantError();
    if (this.headerWord(G_DIRTY) !== 0) this.repair();
  }

  private done<T>(value: T): T {
    this.mem.release();
    return value;
  }

  /** Resolves the graph header; returns its base (this.mem.f64). */
  private hdr(): number {
    return this.mem.at(this.pile, this.header, G_WORDS);
  }

  private headerWord(word: number): number {
    const g = this.hdr();
    const v = this.mem.f64[g + word]!;
    this.mem.release();
    return v;
  }

  /**
   * Resolves node `id` of this graph into this.mem and returns its base.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED
   */
  private node(id: PilePointer): number {
    if (typeof id !== 'number') throw new PileError('PILE_INVALID_POINTER', `${String(id)} is not a pile pointer`);
    const m = this.mem;
    let n: number;
    try {
      n = m.at(this.pile, id, N_WORDS);
    } catch (err) {
      if (isPileError(err, 'PILE_INVALID_POINTER')) {
        throw new PileError('PILE_INVALID_POINTER', `pointer ${id} is not a node of graph '${this.name}' (${err.message})`);
      }
      throw err;
    }
    const f = m.f64;
    if (f[n + N_MAGIC] !== TAG_NODE || f[n + N_GRAPH] !== this.header) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${id} is not a node of graph '${this.name}'`);
    }
    return n;
  }

  /** Float64 index of the out-slot of edge from → to (in this.mem.f64), or -1. */
  private edgeSlot(from: PilePointer, to: PilePointer): number {
    const m = this.mem;
    this.node(to);
    const n = this.node(from);
    const out = m.f64[n + N_OUT]!;
    if (out === 0) return -1;
    const b = m.at(this.pile, out as PilePointer, A_SLOTS);
    const slot = findSlot(m.f64, b, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, to);
    return slot < 0 ? -1 : slotIndex(b, OUT_WIDTH, slot);
  }

  private liveOf(block: PilePointer): number {
    const b = this.mem.at(this.pile, block, A_SLOTS);
    return this.mem.f64[b + A_LIVE]!;
  }

  // ------------------------------------------------------------------ internals: writes

  /**
   * Marks the graph as being changed and records what recovery needs to finish or undo the
   * operation. The mark stays when the operation fails half-way, so that the next write (or
   * the next open) repairs the graph.
   */
  private begin(op: number, a: number, b: number, d: number): void {
    const g = this.hdr();
    this.beginAt(this.mem.f64, g, op, a, b, d);
  }

  /** {@link begin} with the header already resolved (`f`, `g`). */
  private beginAt(f: Float64Array, g: number, op: number, a: number, b: number, d: number): void {
    f[g + G_DIRTY] = 1;
    f[g + G_A] = a;
    f[g + G_B] = b;
    f[g + G_D] = d;
    f[g + G_OP] = op;
    this.state.epoch++;
  }

  private end(): void {
    const g = this.hdr();
    const f = this.mem.f64;
    f[g + G_OP] = OP_NONE;
    f[g + G_DIRTY] = 0;
    this.mem.release();
  }

  /** Changes the data of an existing edge (its slot is `slot` of out-block `out`). */
  private replaceEdgeData(from: PilePointer, to: PilePointer, out: PilePointer, slot: number, data: E | undefined): void {
    const m = this.mem;
    let b = m.at(this.pile, out, A_SLOTS);
    const old = m.f64[slotIndex(b, OUT_WIDTH, slot) + 1]!;
    m.release();
    if (data !== undefined && old !== 0) {
      this.edgeValues.set(old as PilePointer, data);
      return;
    }
    if (data === undefined && old === 0) return;
    const g = this.hdr();
    const gf = m.f64;
    const dataPtr = data === undefined ? 0 : this.edgeValues.put(data);
    // The intent names the record that may end up unreferenced: the new one until the slot holds it, else the old one.
    this.beginAt(gf, g, OP_EDGE, from, to, dataPtr === 0 ? old : dataPtr);
    b = m.at(this.pile, out, A_SLOTS);
    m.f64[slotIndex(b, OUT_WIDTH, slot) + 1] = dataPtr;
    if (old !== 0) this.pile.delete(old as PilePointer);
    this.end();
  }

  /** Makes sure node `id`'s table `field` (N_OUT / N_IN) exists and takes one more neighbor without growing. */
  private ensureRoom(id: PilePointer, field: number): void {
    const m = this.mem;
    const n = this.node(id);
    const block = m.f64[n + field]!;
    const width = field === N_OUT ? OUT_WIDTH : IN_WIDTH;
    if (block === 0) {
      this.rebuildTable(id, field, 0 as PilePointer, capacityFor(1));
      return;
    }
    const b = m.at(this.pile, block as PilePointer, A_SLOTS);
    const cap = capacityOf(m.words, width);
    if (hasRoom(m.f64, b, cap)) return;
    this.rebuildTable(id, field, block as PilePointer, capacityFor(m.f64[b + A_LIVE]! + 1));
  }

  /**
   * Copies node `id`'s table `field` into a new block of `capacity` slots, then swings the node's
   * pointer to it (one word: a kill before it leaves the old table in use, after it the new one)
   * and frees the old block.
   */
  private rebuildTable(id: PilePointer, field: number, old: PilePointer, capacity: number): void {
    const m = this.mem;
    const width = field === N_OUT ? OUT_WIDTH : IN_WIDTH;
    const tag = field === N_OUT ? TAG_OUT : TAG_IN;
    let block: PilePointer;
    try {
      block = this.pile.allocRaw(wordsFor(capacity, width) * 8, tag);
    } catch (err) {
      if (isPileError(err, 'PILE_TOO_LARGE')) {
        throw new PileError('PILE_TOO_LARGE', `graph '${this.name}': node ${id} can not hold ${Math.floor(capacity / 2)} ${field === N_OUT ? 'out' : 'in'}-edges in one segment (${err.message})`);
      }
      throw err;
    }
    const nb = m.at(this.pile, block, A_SLOTS);
    const nf = m.f64;
    nf[nb + A_GRAPH] = this.header;
    nf[nb + A_MAGIC] = tag;
    if (old !== 0) {
      const ob = m.at(this.pile, old, A_SLOTS);
      const of = m.f64;
      const oldCap = capacityOf(m.words, width);
      for (let i = 0, at = ob + A_SLOTS; i < oldCap; i++, at += width) {
        const k = of[at]!;
        if (k > 0) insertKey(nf, nb, capacity, width, k, width > 1 ? of[at + 1]! : 0);
      }
    }
    const n = this.node(id);
    m.f64[n + field] = block;
    if (old !== 0) this.pile.delete(old);
  }

  /** Inserts `key` into node `id`'s table `field` (room made by {@link ensureRoom}). */
  private insertNeighbor(id: PilePointer, field: number, key: number, data: number): void {
    const m = this.mem;
    const n = this.node(id);
    const block = m.f64[n + field]! as PilePointer;
    const width = field === N_OUT ? OUT_WIDTH : IN_WIDTH;
    const b = m.at(this.pile, block, A_SLOTS);
    insertKey(m.f64, b, capacityOf(m.words, width), width, key, data);
  }

  /** Removes `key` from node `id`'s table `field` if present. */
  private removeNeighbor(id: PilePointer, field: number, key: number): void {
    const m = this.mem;
    const n = this.node(id);
    const block = m.f64[n + field]!;
    if (block === 0) return;
    const width = field === N_OUT ? OUT_WIDTH : IN_WIDTH;
    const b = m.at(this.pile, block as PilePointer, A_SLOTS);
    const slot = findSlot(m.f64, b, capacityOf(m.words, width), width, key);
    if (slot >= 0) removeSlot(m.f64, b, width, slot);
  }

  /** Frees an emptied table, or moves a mostly empty one into a smaller block (best effort: skipped when out of space). */
  private compact(id: PilePointer, field: number): void {
    const m = this.mem;
    const n = this.node(id);
    const block = m.f64[n + field]!;
    if (block === 0) return;
    const width = field === N_OUT ? OUT_WIDTH : IN_WIDTH;
    const b = m.at(this.pile, block as PilePointer, A_SLOTS);
    const live = m.f64[b + A_LIVE]!;
    const cap = capacityOf(m.words, width);
    if (live === 0) {
      const n2 = this.node(id);
      m.f64[n2 + field] = 0;
      this.pile.delete(block as PilePointer);
    } else if (cap > 16 && live * 8 < cap) {
      try {
        this.rebuildTable(id, field, block as PilePointer, capacityFor(live));
      } catch (err) {
        if (!isPileError(err, 'PILE_OUT_OF_SPACE')) throw err;
      }
    }
  }

  /** Removes node `id` with its edges; run between begin(OP_REMOVE_NODE) and end(). */
  private removeNodeBody(id: PilePointer): void {
    const m = this.mem;
    let n = this.node(id);
    const out = m.f64[n + N_OUT]! as PilePointer;
    const inn = m.f64[n + N_IN]! as PilePointer;
    let removed = 0;
    if (out !== 0) {
      const b = m.at(this.pile, out, A_SLOTS);
      const f = m.f64;
      const cap = capacityOf(m.words, OUT_WIDTH);
      for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += OUT_WIDTH) {
        const w = f[at]!;
        if (w <= 0) continue;
        const d = f[at + 1]!;
        if (w !== id) {
          this.removeNeighbor(w as PilePointer, N_IN, id);
          this.compact(w as PilePointer, N_IN);
        }
        if (d !== 0) this.pile.delete(d as PilePointer);
        removed++;
      }
    }
    if (inn !== 0) {
      const b = m.at(this.pile, inn, A_SLOTS);
      const f = m.f64;
      const cap = capacityOf(m.words, IN_WIDTH);
      for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += IN_WIDTH) {
        const u = f[at]!;
        if (u <= 0 || u === id) continue;
        const un = this.node(u as PilePointer);
        const uOut = m.f64[un + N_OUT]!;
        if (uOut !== 0) {
          const ub = m.at(this.pile, uOut as PilePointer, A_SLOTS);
          const uf = m.f64;
          const slot = findSlot(uf, ub, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, id);
          if (slot >= 0) {
            const d = uf[slotIndex(ub, OUT_WIDTH, slot) + 1]!;
            // Data first: while the slot still names the removed node, recovery finds (and frees) what is left.
            if (d !== 0) this.pile.delete(d as PilePointer);
            removeSlot(uf, ub, OUT_WIDTH, slot);
            removed++;
          }
          this.compact(u as PilePointer, N_OUT);
        }
      }
    }
    // Unlink from the node list, then free the node's blocks and records.
    n = this.node(id);
    const prev = m.f64[n + N_PREV]!;
    const next = m.f64[n + N_NEXT]!;
    const dataPtr = m.f64[n + N_DATA]!;
    if (prev !== 0) {
      const p = this.node(prev as PilePointer);
      m.f64[p + N_NEXT] = next;
    } else {
      const g = this.hdr();
      m.f64[g + G_FIRST] = next;
    }
    if (next !== 0) {
      const x = this.node(next as PilePointer);
      m.f64[x + N_PREV] = prev;
    }
    const g = this.hdr();
    m.f64[g + G_NODES] = m.f64[g + G_NODES]! - 1;
    m.f64[g + G_EDGES] = m.f64[g + G_EDGES]! - removed;
    if (out !== 0) this.pile.delete(out);
    if (inn !== 0) this.pile.delete(inn);
    this.pile.delete(dataPtr as PilePointer);
    this.pile.delete(id);
  }

  // ------------------------------------------------------------------ recovery

  private recoverIfNeeded(): void {
    if (this.pile.readonly) return;
    const dirty = this.headerWord(G_DIRTY) !== 0;
    if (dirty || (this.pile.lastRecovery.ran && !this.state.repaired)) this.repair();
    this.state.repaired = true;
  }

  /**
   * Rebuilds everything derivable from the node headers and out-tables, found by a scan of
   * the pile: finishes an interrupted removeNode, drops edges to nodes that are gone, rebuilds
   * every in-table, the node list and the counters, and frees blocks no node references.
   */
  private repair(): void {
    const pile = this.pile;
    const m = this.mem;
    const header = this.header;
    let g = this.hdr();
    const op = m.f64[g + G_OP]!;
    const removing = op === OP_REMOVE_NODE ? m.f64[g + G_A]! : 0;
    const intentA = m.f64[g + G_A]!;
    const intentB = m.f64[g + G_B]!;
    const intentD = m.f64[g + G_D]!;
    m.release();
    this.state.epoch++;

    // 1. Find this graph's blocks. A node or table block whose graph word is still 0 was allocated
    //    by an operation killed before it wrote anything into it: garbage, whichever graph it was for.
    const headers: number[] = [];
    const tables = new PointerSet();
    const tableList: number[] = [];
    const garbage: number[] = [];
    for (const e of pile.entries()) {
      if (e.kind !== 'raw' || e.size < A_SLOTS * 8) continue;
      const tag = pile.rawTag(e.pointer);
      if (tag !== TAG_NODE && tag !== TAG_OUT && tag !== TAG_IN) continue;
      const b = m.at(pile, e.pointer, A_SLOTS);
      const owner = m.f64[b + N_GRAPH]!; // N_GRAPH === A_GRAPH
      if (owner === 0) garbage.push(e.pointer);
      else if (owner !== header || m.f64[b + N_MAGIC] !== tag) continue;
      else if (tag === TAG_NODE) headers.push(e.pointer);
      else {
        tables.add(e.pointer);
        tableList.push(e.pointer);
      }
    }
    for (const p of garbage) pile.delete(p as PilePointer);

    // 2. Decide which nodes live: complete header, live data record, not the node being removed.
    const live = new PointerSet(headers.length);
    const liveList: number[] = [];
    for (const h of headers) {
      const n = m.at(pile, h as PilePointer, N_WORDS);
      const f = m.f64;
      const dataPtr = f[n + N_DATA]!;
      if (dataPtr > 0 && h !== removing && safeHas(pile, dataPtr)) {
        live.add(h);
        liveList.push(h);
      } else if (h === removing) {
        // Finish the interrupted removeNode: its data and the data of the edges it still holds.
        const out = f[n + N_OUT]!;
        if (dataPtr > 0) safeDelete(pile, dataPtr);
        if (out !== 0 && tables.has(out)) {
          const b = m.at(pile, out as PilePointer, A_SLOTS);
          const of = m.f64;
          const cap = capacityOf(m.words, OUT_WIDTH);
          for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += OUT_WIDTH) {
            if (of[at]! > 0 && of[at + 1]! > 0) safeDelete(pile, of[at + 1]!);
          }
        }
      }
    }
    if (op === OP_ADD_NODE && intentD > 0) {
      let referenced = false;
      for (const h of liveList) {
        const n = m.at(pile, h as PilePointer, N_WORDS);
        if (m.f64[n + N_DATA] === intentD) referenced = true;
      }
      if (!referenced) safeDelete(pile, intentD);
    }

    // 3. Clean out-tables: drop edges to dead nodes (freeing their data); count edges.
    const kept = new PointerSet(liveList.length * 2);
    let edges = 0;
    for (const h of liveList) {
      const n = m.at(pile, h as PilePointer, N_WORDS);
      const nf = m.f64;
      for (const field of [N_OUT, N_IN]) {
        const t = nf[n + field]!;
        if (t === 0) continue;
        if (!tables.has(t) || pile.rawTag(t as PilePointer) !== (field === N_OUT ? TAG_OUT : TAG_IN)) nf[n + field] = 0;
        else kept.add(t);
      }
      const out = nf[n + N_OUT]!;
      if (out === 0) continue;
      const b = m.at(pile, out as PilePointer, A_SLOTS);
      const f = m.f64;
      const cap = capacityOf(m.words, OUT_WIDTH);
      let liveSlots = 0;
      let used = 0;
      for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += OUT_WIDTH) {
        const k = f[at]!;
        if (k === 0) continue;
        used++;
        if (k === TOMBSTONE) continue;
        if (!live.has(k)) {
          const d = f[at + 1]!;
          f[at] = TOMBSTONE;
          if (d > 0) safeDelete(pile, d);
          continue;
        }
        const d = f[at + 1]!;
        if (d !== 0 && !safeHas(pile, d)) f[at + 1] = 0;
        liveSlots++;
      }
      f[b + A_LIVE] = liveSlots;
      f[b + A_USED] = used;
      edges += liveSlots;
    }
    if (op === OP_EDGE && intentD > 0) {
      let holds = false;
      if (live.has(intentA)) {
        const n = m.at(pile, intentA as PilePointer, N_WORDS);
        const out = m.f64[n + N_OUT]!;
        if (out !== 0) {
          const b = m.at(pile, out as PilePointer, A_SLOTS);
          const slot = findSlot(m.f64, b, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, intentB);
          holds = slot >= 0 && m.f64[slotIndex(b, OUT_WIDTH, slot) + 1] === intentD;
        }
      }
      if (!holds) safeDelete(pile, intentD);
    }

    // 4. Free what no live node references: orphaned tables, dropped headers.
    for (const t of tableList) if (!kept.has(t)) pile.delete(t as PilePointer);
    for (const h of headers) if (!live.has(h)) pile.delete(h as PilePointer);

    // 5. Rebuild in-tables from the out-tables.
    for (const h of liveList) {
      const n = m.at(pile, h as PilePointer, N_WORDS);
      const inn = m.f64[n + N_IN]!;
      if (inn === 0) continue;
      const b = m.at(pile, inn as PilePointer, A_SLOTS);
      m.f64.fill(0, b + A_LIVE, b + m.words);
    }
    for (const h of liveList) {
      const n = m.at(pile, h as PilePointer, N_WORDS);
      const out = m.f64[n + N_OUT]! as PilePointer;
      if (out === 0) continue;
      m.at(pile, out, A_SLOTS);
      const cap = capacityOf(m.words, OUT_WIDTH);
      for (let i = 0; i < cap; i++) {
        // Re-resolved each time: growing an in-table in between moves this.mem to other blocks.
        const b = m.at(pile, out, A_SLOTS);
        const k = m.f64[b + A_SLOTS + i * OUT_WIDTH]!;
        if (k <= 0) continue;
        this.ensureRoom(k as PilePointer, N_IN);
        this.insertNeighbor(k as PilePointer, N_IN, h, 0);
      }
    }
    for (const h of liveList) {
      this.compact(h as PilePointer, N_IN);
      this.compact(h as PilePointer, N_OUT);
    }

    // 6. Relink the node list and write the counters; clear the mark last.
    let prev = 0;
    for (const h of liveList) {
      const n = m.at(pile, h as PilePointer, N_WORDS);
      m.f64[n + N_PREV] = prev;
      m.f64[n + N_NEXT] = 0;
      if (prev !== 0) {
        const p = m.at(pile, prev as PilePointer, N_WORDS);
        m.f64[p + N_NEXT] = h;
      }
      prev = h;
    }
    g = this.hdr();
    const f = m.f64;
    f[g + G_FIRST] = liveList.length > 0 ? liveList[0]! : 0;
    f[g + G_NODES] = liveList.length;
    f[g + G_EDGES] = edges;
    f[g + G_OP] = OP_NONE;
    f[g + G_DIRTY] = 0;
    m.release();
  }
}

function checkDirection(direction: unknown): void {
  if (direction !== 'out' && direction !== 'in' && direction !== 'both') {
    throw new PileError('PILE_INVALID_OPTION', `option direction: expected 'out', 'in' or 'both', got ${String(direction)}`);
  }
}

/**
 * Opens the graph named `name` in `pile`, creating it when missing: the entry point, as `openPile`
 * and `openCache` are (the same as {@link PileGraph.open}).
 * @throws as {@link PileGraph.open}
 */
export function openGraph<N, E = undefined>(pile: Pile, name: string, options: PileGraphOptions<N, E> = {}): PileGraph<N, E> {
  return PileGraph.open(pile, name, options);
}
