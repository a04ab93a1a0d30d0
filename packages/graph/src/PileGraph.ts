import type { ZodType } from 'zod';
import { inReadSession, isPileError, type Pile, type PilePointer } from '@pile/core';
import { capacityOf, findSlot, insertKey, removeSlot, slotIndex } from './AdjacencyTable';
import { repairGraph } from './GraphRepair';
import { checkDirection, traverseGraph, traverseOptions, type Direction, type TraversalStep, type TraverseOptions } from './GraphTraversal';
import { NodeTables } from './NodeTables';
import {
  A_SLOTS,
  G_EDGES,
  G_FIRST,
  G_NODES,
  G_WORDS,
  IN_WIDTH,
  N_DATA,
  N_GRAPH,
  N_IN,
  N_MAGIC,
  N_NEXT,
  N_OUT,
  N_PREV,
  N_WORDS,
  OP_ADD_NODE,
  OP_EDGE,
  OP_REMOVE_NODE,
  OUT_WIDTH,
  TAG_GRAPH,
  TAG_NODE,
} from './RawLayout';
import { RawStructure, asPointer, openHeader, type RawKind } from './RawStructure';
import { ValueStore, checkName, checkOptions, checkSchemaOption } from './ValueStore';

/** Options of {@link PileGraph.open}. */
export interface PileGraphOptions<N, E> {
  /** Store node data as typed records of this zod object schema (compiled codec); default: the generic codec. */
  nodeSchema?: ZodType<N>;
  /** Store edge data as typed records of this zod object schema; default: the generic codec. */
  edgeSchema?: ZodType<E>;
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
  private readonly raw: RawStructure;
  private readonly tables: NodeTables;

  private constructor(
    /** The pile this graph lives in. */
    readonly pile: Pile,
    /** The graph's name (its root is `graph:<name>`). */
    readonly name: string,
    header: PilePointer,
    private readonly nodeValues: ValueStore<N>,
    private readonly edgeValues: ValueStore<E>,
  ) {
    this.raw = RawStructure.named(pile, 'graph', name, header, GRAPH, () => repairGraph(this.raw, this.tables));
    this.tables = new NodeTables(this.raw);
  }

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
    const header = openHeader(pile, name, GRAPH);
    const nodeValues = new ValueStore<N>(pile, `graph:${name}:node`, options.nodeSchema);
    const edgeValues = new ValueStore<E>(pile, `graph:${name}:edge`, options.edgeSchema);
    const graph = new PileGraph<N, E>(pile, name, header, nodeValues, edgeValues);
    graph.raw.recoverIfNeeded();
    return graph;
  }

  // ------------------------------------------------------------------ counters

  /** Nodes in the graph. @throws PILE_CLOSED */
  get nodeCount(): number {
    return this.raw.readHeaderWord(G_NODES);
  }

  /** Edges in the graph. @throws PILE_CLOSED */
  get edgeCount(): number {
    return this.raw.readHeaderWord(G_EDGES);
  }

  // ------------------------------------------------------------------ nodes

  /**
   * Stores `data` and adds a node holding it; returns the node's id (stable for its life and across restarts).
   * @throws PILE_SCHEMA_VIOLATION when `data` does not match `nodeSchema`; nothing is written
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  addNode(data: N): PilePointer {
    this.raw.writable();
    const pile = this.pile;
    const m = this.raw.mem;
    // Header resolved before the put: no pile call between the put and the intent naming its record.
    const g = this.raw.hdr();
    const gf = m.f64;
    const dataPtr = this.nodeValues.put(data);
    this.raw.beginAt(gf, g, OP_ADD_NODE, 0, 0, dataPtr);
    const node = this.raw.allocNode(dataPtr);
    const first = gf[g + G_FIRST]!;
    const n = m.at(pile, node, N_WORDS);
    const f = m.f64;
    f[n + N_MAGIC] = TAG_NODE;
    f[n + N_GRAPH] = this.raw.header;
    f[n + N_DATA] = dataPtr;
    f[n + N_NEXT] = first;
    if (first !== 0) {
      const p = m.at(pile, first as PilePointer, N_WORDS);
      m.f64[p + N_PREV] = node;
    }
    gf[g + G_FIRST] = node;
    gf[g + G_NODES] = gf[g + G_NODES]! + 1;
    this.raw.endAt(gf, g);
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
    return this.raw.checked ? this.raw.reread(() => this.getNodeOnce(id)) : this.getNodeOnce(id);
  }

  private getNodeOnce(id: PilePointer): N {
    const n = this.raw.node(id);
    const dataPtr = this.raw.mem.f64[n + N_DATA]! as PilePointer;
    this.raw.mem.release();
    return this.nodeValues.get(dataPtr);
  }

  /**
   * Replaces the data of node `id` in place (through a link when it grew); crash-atomic. Its id and edges stay.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link getNode}
   * @throws PILE_SCHEMA_VIOLATION, PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  setNode(id: PilePointer, data: N): void {
    this.raw.writable();
    const n = this.raw.node(id);
    const dataPtr = this.raw.mem.f64[n + N_DATA]! as PilePointer;
    this.raw.mem.release();
    this.nodeValues.set(dataPtr, data);
  }

  /**
   * True when `id` is a live node of this graph (false for a removed one or any other pointer).
   * @throws PILE_CLOSED
   */
  hasNode(id: PilePointer): boolean {
    return this.raw.checked ? this.raw.reread(() => this.hasNodeOnce(id)) : this.hasNodeOnce(id);
  }

  private hasNodeOnce(id: PilePointer): boolean {
    this.raw.open();
    if (typeof id !== 'number' || !this.pile.has(id)) return false;
    try {
      this.raw.node(id);
      return true;
    } catch (err) {
      if (isPileError(err, 'PILE_INVALID_POINTER')) return false;
      throw err;
    } finally {
      this.raw.mem.release();
    }
  }

  /**
   * Removes node `id`, its edges (both ways) and their data; frees their pile space. Later use
   * of `id` throws PILE_STALE_POINTER.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link getNode}
   * @throws PILE_READONLY, PILE_CLOSED
   */
  deleteNode(id: PilePointer): void {
    this.raw.writable();
    this.raw.node(id);
    this.raw.begin(OP_REMOVE_NODE, id, 0, 0);
    this.removeNodeBody(id);
    this.raw.end();
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
    this.raw.open();
    return inReadSession(this.raw.pile, this.raw.walk(G_FIRST, N_NEXT, -1, asPointer));
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
    this.raw.writable();
    const pile = this.pile;
    const m = this.raw.mem;
    // Node headers never move, and blocks stay where they are until deleted: the views and
    // bases captured here stay valid across the allocations below.
    const tn = this.raw.node(to);
    const tf = m.f64;
    const fn = this.raw.node(from);
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
    const g = this.raw.hdr();
    const gf = m.f64;
    const dataPtr = data === undefined ? 0 : this.edgeValues.put(data);
    this.raw.beginAt(gf, g, OP_EDGE, from, to, dataPtr);
    try {
      this.tables.ensureRoom(from, N_OUT);
      this.tables.ensureRoom(to, N_IN);
    } catch (err) {
      // allocRaw refused a table (out of space, too large): nothing changed but a table that grew,
      // which is consistent. Anything else leaves the mark so that the next write or open repairs.
      if (isPileError(err, 'PILE_OUT_OF_SPACE') || isPileError(err, 'PILE_TOO_LARGE')) {
        if (dataPtr !== 0) pile.delete(dataPtr as PilePointer);
        this.raw.end();
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
    this.raw.endAt(gf, g);
    m.release();
  }

  /**
   * Removes the edge `from` → `to` and frees its data; false when there was none.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER when either end is not a live node of this graph
   * @throws PILE_READONLY, PILE_CLOSED
   */
  deleteEdge(from: PilePointer, to: PilePointer): boolean {
    this.raw.writable();
    const m = this.raw.mem;
    this.raw.node(to);
    const n = this.raw.node(from);
    const out = m.f64[n + N_OUT]!;
    if (out === 0) return this.raw.done(false);
    const b = m.at(this.pile, out as PilePointer, A_SLOTS);
    const f = m.f64;
    const slot = findSlot(f, b, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, to);
    if (slot < 0) return this.raw.done(false);
    const dataPtr = f[slotIndex(b, OUT_WIDTH, slot) + 1]!;
    this.raw.begin(OP_EDGE, from, to, dataPtr);
    removeSlot(f, b, OUT_WIDTH, slot);
    this.tables.remove(to, N_IN, from);
    const g = this.raw.hdr();
    m.f64[g + G_EDGES] = m.f64[g + G_EDGES]! - 1;
    if (dataPtr !== 0) this.pile.delete(dataPtr as PilePointer);
    this.tables.compact(from, N_OUT);
    this.tables.compact(to, N_IN);
    this.raw.end();
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
    if (this.raw.checked) return this.raw.reread(() => this.edgeSlot(from, to) >= 0);
    return this.edgeSlot(from, to) >= 0 ? this.raw.done(true) : this.raw.done(false);
  }

  /**
   * The data of the edge `from` → `to`; undefined when the edge does not exist or has no data.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER when either end is not a live node of this graph
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT, PILE_CLOSED
   */
  edge(from: PilePointer, to: PilePointer): E | undefined {
    return this.raw.checked ? this.raw.reread(() => this.edgeOnce(from, to)) : this.edgeOnce(from, to);
  }

  private edgeOnce(from: PilePointer, to: PilePointer): E | undefined {
    const at = this.edgeSlot(from, to);
    if (at < 0) return this.raw.done(undefined);
    const dataPtr = this.raw.mem.f64[at + 1]!;
    this.raw.mem.release();
    return dataPtr === 0 ? undefined : this.edgeValues.get(dataPtr as PilePointer);
  }

  /**
   * Number of edges of node `id` in `direction` (default 'out'); 'both' is out + in (a self-loop counts twice).
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link getNode}
   * @throws PILE_INVALID_OPTION for a bad direction, PILE_CLOSED
   */
  degree(id: PilePointer, direction: Direction = 'out'): number {
    checkDirection(direction);
    return this.raw.checked ? this.raw.reread(() => this.degreeOnce(id, direction)) : this.degreeOnce(id, direction);
  }

  private degreeOnce(id: PilePointer, direction: Direction): number {
    const n = this.raw.node(id);
    const f = this.raw.mem.f64;
    const out = f[n + N_OUT]!;
    const inn = f[n + N_IN]!;
    let d = 0;
    if (direction !== 'in' && out !== 0) d += this.tables.liveOf(out as PilePointer);
    if (direction !== 'out' && inn !== 0) d += this.tables.liveOf(inn as PilePointer);
    return this.raw.done(d);
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
    const [list, count] = this.raw.checked ? this.raw.reread(() => this.adjacency(id, direction)) : this.adjacency(id, direction);
    return this.iterateList(list, count);
  }

  /** Node `id`'s neighbors in `direction`, each once, copied: the list and how many it holds. */
  private adjacency(id: PilePointer, direction: Direction): [Float64Array, number] {
    const n = this.raw.node(id);
    const f = this.raw.mem.f64;
    const out = f[n + N_OUT]!;
    const inn = f[n + N_IN]!;
    const outLive = direction !== 'in' && out !== 0 ? this.tables.liveOf(out as PilePointer) : 0;
    const inLive = direction !== 'out' && inn !== 0 ? this.tables.liveOf(inn as PilePointer) : 0;
    const list = new Float64Array(outLive + inLive);
    let count = 0;
    const m = this.raw.mem;
    if (outLive > 0) {
      this.tables.forEachNeighbor(out as PilePointer, OUT_WIDTH, (k) => {
        list[count++] = k;
      });
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
      this.tables.forEachNeighbor(inn as PilePointer, IN_WIDTH, (k) => {
        if (outF === undefined || findSlot(outF, outB, outCap, OUT_WIDTH, k) < 0) list[count++] = k;
      });
    }
    m.release();
    return [list, count];
  }

  private *iterateList(list: Float64Array, count: number): IterableIterator<PilePointer> {
    const epoch = this.raw.state.epoch;
    for (let i = 0; i < count; i++) {
      const p = list[i]! as PilePointer;
      if (this.raw.changedSince(epoch) && !this.pile.has(p)) continue;
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
    const { order, direction, maxDepth } = traverseOptions(options);
    if (this.raw.checked) this.raw.reread(() => this.raw.node(start));
    else this.raw.done(this.raw.node(start));
    return inReadSession(this.raw.pile, traverseGraph(this.raw, start, order, direction, maxDepth));
  }

  // ------------------------------------------------------------------ internals

  /** Float64 index of the out-slot of edge from → to (in this.raw.mem.f64), or -1. */
  private edgeSlot(from: PilePointer, to: PilePointer): number {
    const raw = this.raw;
    const m = raw.mem;
    raw.node(to);
    const n = raw.node(from);
    const out = m.f64[n + N_OUT]!;
    if (out === 0) return -1;
    const b = m.at(this.pile, out as PilePointer, A_SLOTS);
    const slot = findSlot(m.f64, b, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, to);
    return slot < 0 ? -1 : slotIndex(b, OUT_WIDTH, slot);
  }

  /** Changes the data of an existing edge (its slot is `slot` of out-block `out`). */
  private replaceEdgeData(from: PilePointer, to: PilePointer, out: PilePointer, slot: number, data: E | undefined): void {
    const raw = this.raw;
    const m = raw.mem;
    let b = m.at(this.pile, out, A_SLOTS);
    const old = m.f64[slotIndex(b, OUT_WIDTH, slot) + 1]!;
    m.release();
    if (data !== undefined && old !== 0) {
      this.edgeValues.set(old as PilePointer, data);
      return;
    }
    if (data === undefined && old === 0) return;
    const g = raw.hdr();
    const gf = m.f64;
    const dataPtr = data === undefined ? 0 : this.edgeValues.put(data);
    // The intent names the record that may end up unreferenced: the new one until the slot holds it, else the old one.
    raw.beginAt(gf, g, OP_EDGE, from, to, dataPtr === 0 ? old : dataPtr);
    b = m.at(this.pile, out, A_SLOTS);
    m.f64[slotIndex(b, OUT_WIDTH, slot) + 1] = dataPtr;
    if (old !== 0) this.pile.delete(old as PilePointer);
    raw.end();
  }

  /** Removes node `id` with its edges; run between begin(OP_REMOVE_NODE) and end(). */
  private removeNodeBody(id: PilePointer): void {
    const m = this.raw.mem;
    let n = this.raw.node(id);
    const out = m.f64[n + N_OUT]! as PilePointer;
    const inn = m.f64[n + N_IN]! as PilePointer;
    let removed = 0;
    const tables = this.tables;
    if (out !== 0) {
      tables.forEachNeighbor(out, OUT_WIDTH, (w, f, at) => {
        const d = f[at + 1]!;
        if (w !== id) {
          tables.remove(w as PilePointer, N_IN, id);
          tables.compact(w as PilePointer, N_IN);
        }
        if (d !== 0) this.pile.delete(d as PilePointer);
        removed++;
      });
    }
    if (inn !== 0) {
      tables.forEachNeighbor(inn, IN_WIDTH, (u) => {
        if (u === id) return;
        const un = this.raw.node(u as PilePointer);
        const uOut = m.f64[un + N_OUT]!;
        if (uOut === 0) return;
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
        tables.compact(u as PilePointer, N_OUT);
      });
    }
    // Unlink from the node list, then free the node's blocks and records.
    n = this.raw.node(id);
    const prev = m.f64[n + N_PREV]!;
    const next = m.f64[n + N_NEXT]!;
    const dataPtr = m.f64[n + N_DATA]!;
    if (prev !== 0) {
      const p = this.raw.node(prev as PilePointer);
      m.f64[p + N_NEXT] = next;
    } else {
      const g = this.raw.hdr();
      m.f64[g + G_FIRST] = next;
    }
    if (next !== 0) {
      const x = this.raw.node(next as PilePointer);
      m.f64[x + N_PREV] = prev;
    }
    const g = this.raw.hdr();
    m.f64[g + G_NODES] = m.f64[g + G_NODES]! - 1;
    m.f64[g + G_EDGES] = m.f64[g + G_EDGES]! - removed;
    if (out !== 0) this.pile.delete(out);
    if (inn !== 0) this.pile.delete(inn);
    this.pile.delete(dataPtr as PilePointer);
    this.pile.delete(id);
  }
}

/** What a graph is to the code it shares with the list. */
const GRAPH: RawKind = {
  noun: 'graph',
  headerTag: TAG_GRAPH,
  headerWords: G_WORDS,
  nodeTag: TAG_NODE,
  nodeWords: N_WORDS,
  nodeNoun: 'a node',
  nodesNoun: 'nodes',
  intentWords: 3,
};

/**
 * Opens the graph named `name` in `pile`, creating it when missing: the entry point, as `openPile`
 * and `openCache` are (the same as {@link PileGraph.open}).
 * @throws as {@link PileGraph.open}
 */
export function openGraph<N, E = undefined>(pile: Pile, name: string, options: PileGraphOptions<N, E> = {}): PileGraph<N, E> {
  return PileGraph.open(pile, name, options);
}
