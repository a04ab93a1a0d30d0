import type { ZodType } from 'zod';
import { PileError, isPileError, type Pile, type PilePointer, encodeGuard, reentrantError } from '@pile/core';
import { PointerSet } from './PointerSet';
import { RawMemory } from './RawMemory';
import {
  LAYOUT_VERSION, LN_LIST, LN_MAGIC, LN_NEXT, LN_PREV, LN_VALUE, LN_WORDS, L_DIRTY, L_FIRST, L_LAST, L_LENGTH,
  L_MAGIC, L_NODE, L_OP, L_VALUE, L_VERSION, L_WORDS, OP_LIST_INSERT, OP_LIST_REMOVE, OP_NONE, TAG_LIST, TAG_LIST_NODE,
} from './RawLayout';
import { sharedState, type SharedState } from './Shared';
import { safeDelete, safeHas } from './SafeOps';
import { ValueStore, checkName, checkOptions, checkSchemaOption } from './ValueStore';

/** Options of {@link PileList.open}. */
export interface PileListOptions<T> {
  /** Store values as typed records of this zod object schema (compiled codec); default: the generic codec. */
  schema?: ZodType<T>;
}

/**
 * A persistent doubly linked list whose elements are pile records. Each element is a small
 * raw node (prev, next, value pointer) plus its value record; the node's pointer identifies
 * the element for its whole life and across restarts. Found again by name (root `list:<name>`).
 * Nothing of the list is held on the V8 heap beyond this handle. See docs/graph.md.
 */
export class PileList<T> implements Iterable<T> {
  private readonly mem = new RawMemory();

  private constructor(
    /** The pile this list lives in. */
    readonly pile: Pile,
    /** The list's name (its root is `list:<name>`). */
    readonly name: string,
    private readonly header: PilePointer,
    private readonly values_: ValueStore<T>,
    private readonly state: SharedState,
  ) {}

  /**
   * Opens the list named `name` in `pile`, creating it when missing. After an unclean shutdown
   * (or an operation interrupted by a kill) the first open in a process repairs it.
   * @throws PILE_INVALID_OPTION for a bad name or option, naming it
   * @throws PILE_READONLY when the list does not exist and the pile is read-only
   * @throws PILE_CORRUPT when the root `list:<name>` does not name a list header
   * @throws PILE_FORMAT_VERSION when the list was written by a newer layout
   * @throws PILE_SCHEMA_MISMATCH when `schema` differs from the one the list was created with
   * @throws PILE_CLOSED, PILE_OUT_OF_SPACE
   */
  static open<T>(pile: Pile, name: string, options: PileListOptions<T> = {}): PileList<T> {
    checkName(name);
    checkOptions(options, ['schema']);
    checkSchemaOption('schema', options.schema);
    const root = `list:${name}`;
    let header = pile.getRoot(root);
    const mem = new RawMemory();
    if (header === undefined) {
      if (pile.readonly) throw new PileError('PILE_READONLY', `list '${name}' does not exist and the pile is open read-only`);
      header = pile.allocRaw(L_WORDS * 8, TAG_LIST);
      const h = mem.at(pile, header, L_WORDS);
      mem.f64[h + L_VERSION] = LAYOUT_VERSION;
      mem.f64[h + L_MAGIC] = TAG_LIST;
      pile.setRoot(root, header);
    } else {
      let h: number;
      try {
        h = mem.at(pile, header, L_WORDS);
      } catch (err) {
        if (isPileError(err, 'PILE_INVALID_POINTER') || isPileError(err, 'PILE_STALE_POINTER')) {
          throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${header}) does not name a list header: ${err.message}`);
        }
        throw err;
      }
      if (mem.f64[h + L_MAGIC] !== TAG_LIST) throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${header}) does not name a list header`);
      const version = mem.f64[h + L_VERSION]!;
      if (version > LAYOUT_VERSION) {
        throw new PileError('PILE_FORMAT_VERSION', `list '${name}' has layout version ${version}; this @pile/graph reads up to ${LAYOUT_VERSION}`);
      }
    }
    mem.release();
    const list = new PileList<T>(pile, name, header, new ValueStore<T>(pile, root, options.schema), sharedState(pile, root));
    if (!pile.readonly) {
      if (list.headerWord(L_DIRTY) !== 0 || (pile.lastRecovery.ran && !list.state.repaired)) list.repair();
      list.state.repaired = true;
    }
    return list;
  }

  /** Elements in the list. @throws PILE_CLOSED */
  get length(): number {
    return this.headerWord(L_LENGTH);
  }

  /** The first element's node, or undefined when the list is empty. @throws PILE_CLOSED */
  get first(): PilePointer | undefined {
    return orUndefined(this.headerWord(L_FIRST));
  }

  /** The last element's node, or undefined when the list is empty. @throws PILE_CLOSED */
  get last(): PilePointer | undefined {
    return orUndefined(this.headerWord(L_LAST));
  }

  /**
   * Adds `value` at the end; returns its node.
   * @throws PILE_SCHEMA_VIOLATION when `value` does not match the schema; nothing is written
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  append(value: T): PilePointer {
    this.writable();
    return this.insert(this.headerWord(L_LAST), value);
  }

  /**
   * Adds `value` at the front; returns its node.
   * @throws PILE_SCHEMA_VIOLATION when `value` does not match the schema; nothing is written
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  prepend(value: T): PilePointer {
    this.writable();
    return this.insert(0, value);
  }

  /**
   * Adds `value` right after the element `node`; returns the new node.
   * @throws PILE_STALE_POINTER when `node` was removed
   * @throws PILE_INVALID_POINTER when `node` is not an element of this list
   * @throws PILE_SCHEMA_VIOLATION, PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  insertAfter(node: PilePointer, value: T): PilePointer {
    this.writable();
    this.node(node);
    this.mem.release();
    return this.insert(node, value);
  }

  /**
   * Deletes the element `node` and frees its space; later use of `node` throws PILE_STALE_POINTER.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}
   * @throws PILE_READONLY, PILE_CLOSED
   */
  delete(node: PilePointer): void {
    this.writable();
    const m = this.mem;
    const n = this.node(node);
    const prev = m.f64[n + LN_PREV]!;
    const next = m.f64[n + LN_NEXT]!;
    const value = m.f64[n + LN_VALUE]!;
    this.begin(OP_LIST_REMOVE, node, value);
    // The forward chain is what recovery trusts: unlinking from it is the commit point.
    if (prev !== 0) this.setNodeWord(prev, LN_NEXT, next);
    else this.setHeaderWord(L_FIRST, next);
    if (next !== 0) this.setNodeWord(next, LN_PREV, prev);
    else this.setHeaderWord(L_LAST, prev);
    const h = this.hdr();
    m.f64[h + L_LENGTH] = m.f64[h + L_LENGTH]! - 1;
    this.pile.delete(value as PilePointer);
    this.pile.delete(node);
    this.end();
  }


  /**
   * @deprecated Use {@link delete}, the name every Pile package uses; `remove` stays as its alias.
   * @throws as {@link delete}
   */
  remove(node: PilePointer): void {
    this.delete(node);
  }
  /**
   * The value of element `node`.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT, PILE_CLOSED
   */
  get(node: PilePointer): T {
    const n = this.node(node);
    const value = this.mem.f64[n + LN_VALUE]!;
    this.mem.release();
    return this.values_.get(value as PilePointer);
  }

  /**
   * Replaces the value of element `node` in place; when the new value does not fit, its record
   * becomes a link to a larger block. Crash-atomic; `node` stays valid.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}
   * @throws PILE_SCHEMA_VIOLATION, PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  set(node: PilePointer, value: T): void {
    this.writable();
    const n = this.node(node);
    const ptr = this.mem.f64[n + LN_VALUE]!;
    this.mem.release();
    this.values_.set(ptr as PilePointer, value);
  }

  /**
   * The node after `node`, or undefined at the end.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}; PILE_CLOSED
   */
  next(node: PilePointer): PilePointer | undefined {
    const n = this.node(node);
    const v = this.mem.f64[n + LN_NEXT]!;
    this.mem.release();
    return orUndefined(v);
  }

  /**
   * The node before `node`, or undefined at the start.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}; PILE_CLOSED
   */
  prev(node: PilePointer): PilePointer | undefined {
    const n = this.node(node);
    const v = this.mem.f64[n + LN_PREV]!;
    this.mem.release();
    return orUndefined(v);
  }

  /**
   * The values, first to last, read lazily from the pile. Removing the element just yielded
   * (or the next one) during the iteration is safe; elements inserted after the current one are seen.
   * @throws PILE_CLOSED; PILE_STALE_POINTER when both the current element and its successor were removed meanwhile
   */
  values(): IterableIterator<T> {
    this.open();
    return this.walk(L_FIRST, LN_NEXT, true) as IterableIterator<T>;
  }

  /** The values, last to first; as {@link values}. @throws PILE_CLOSED, PILE_STALE_POINTER */
  reversed(): IterableIterator<T> {
    this.open();
    return this.walk(L_LAST, LN_PREV, true) as IterableIterator<T>;
  }

  /** The element nodes, first to last; as {@link values}. @throws PILE_CLOSED, PILE_STALE_POINTER */
  nodes(): IterableIterator<PilePointer> {
    this.open();
    return this.walk(L_FIRST, LN_NEXT, false) as IterableIterator<PilePointer>;
  }

  [Symbol.iterator](): IterableIterator<T> {
    return this.values();
  }

  private *walk(start: number, step: number, decode: boolean): IterableIterator<T | PilePointer> {
    const m = this.mem;
    let cur = this.headerWord(start);
    while (cur !== 0) {
      let n = this.node(cur as PilePointer);
      let following = m.f64[n + step]!;
      const value = m.f64[n + LN_VALUE]!;
      m.release();
      const epoch = this.state.epoch;
      yield decode ? this.values_.get(value as PilePointer) : (cur as PilePointer);
      if (this.state.epoch !== epoch) {
        this.open();
        if (this.pile.has(cur as PilePointer)) {
          n = this.node(cur as PilePointer);
          following = m.f64[n + step]!;
          m.release();
        } else if (following !== 0 && !this.pile.has(following as PilePointer)) {
          throw new PileError('PILE_STALE_POINTER', `list '${this.name}': elements ${cur} and ${following}, where the iteration stood, were both removed during it`);
        }
      }
      cur = following;
    }
  }

  // ------------------------------------------------------------------ internals

  /** Inserts after `after` (0: at the front). */
  private insert(after: number, value: T): PilePointer {
    const pile = this.pile;
    const m = this.mem;
    // Header resolved before the put: no pile call between the put and the intent naming its record.
    const h0 = this.hdr();
    const hf = m.f64;
    const valuePtr = this.values_.put(value);
    this.beginAt(hf, h0, OP_LIST_INSERT, 0, valuePtr);
    let node: PilePointer;
    try {
      node = pile.allocRaw(LN_WORDS * 8, TAG_LIST_NODE);
    } catch (err) {
      // Out of space (nothing allocated): undo the put. Anything else leaves the mark for repair.
      if (isPileError(err)) {
        pile.delete(valuePtr);
        this.end();
      }
      throw err;
    }
    let next: number;
    if (after === 0) next = this.headerWord(L_FIRST);
    else {
      const a = this.node(after as PilePointer);
      next = m.f64[a + LN_NEXT]!;
    }
    const n = m.at(pile, node, LN_WORDS);
    const f = m.f64;
    f[n + LN_MAGIC] = TAG_LIST_NODE;
    f[n + LN_LIST] = this.header;
    f[n + LN_PREV] = after;
    f[n + LN_NEXT] = next;
    f[n + LN_VALUE] = valuePtr;
    if (next !== 0) this.setNodeWord(next, LN_PREV, node);
    else this.setHeaderWord(L_LAST, node);
    // Linking into the forward chain is the commit point (see repair).
    if (after !== 0) this.setNodeWord(after, LN_NEXT, node);
    else this.setHeaderWord(L_FIRST, node);
    const h = this.hdr();
    m.f64[h + L_LENGTH] = m.f64[h + L_LENGTH]! + 1;
    this.end();
    return node;
  }

  private open(): void {
    if (this.pile.isClosed) throw new PileError('PILE_CLOSED', 'the pile is closed');
  }

  /** Checks that the list may be changed; repairs it first when an earlier operation failed half-way. */
  private writable(): void {
    this.open();
    if (this.pile.readonly) throw new PileError('PILE_READONLY', `list '${this.name}': the pile is open read-only`);
    // A write from a value's getter while the pile stores a value: refused before any raw block
    // is touched (the pile refuses its own writes the same way).
    if (encodeGuard.depth !== 0) throw reentrantError();
    if (this.headerWord(L_DIRTY) !== 0) this.repair();
  }

  private hdr(): number {
    return this.mem.at(this.pile, this.header, L_WORDS);
  }

  private headerWord(word: number): number {
    const h = this.hdr();
    const v = this.mem.f64[h + word]!;
    this.mem.release();
    return v;
  }

  /** Resolves element `node` of this list into this.mem; returns its base. */
  private node(node: PilePointer): number {
    if (typeof node !== 'number') throw new PileError('PILE_INVALID_POINTER', `${String(node)} is not a pile pointer`);
    let n: number;
    try {
      n = this.mem.at(this.pile, node, LN_WORDS);
    } catch (err) {
      if (isPileError(err, 'PILE_INVALID_POINTER')) {
        throw new PileError('PILE_INVALID_POINTER', `pointer ${node} is not an element of list '${this.name}' (${err.message})`);
      }
      throw err;
    }
    const f = this.mem.f64;
    if (f[n + LN_MAGIC] !== TAG_LIST_NODE || f[n + LN_LIST] !== this.header) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${node} is not an element of list '${this.name}'`);
    }
    return n;
  }

  private setNodeWord(node: number, word: number, value: number): void {
    const n = this.node(node as PilePointer);
    this.mem.f64[n + word] = value;
  }

  private setHeaderWord(word: number, value: number): void {
    const h = this.hdr();
    this.mem.f64[h + word] = value;
  }

  private begin(op: number, node: number, value: number): void {
    const h = this.hdr();
    this.beginAt(this.mem.f64, h, op, node, value);
  }

  private beginAt(f: Float64Array, h: number, op: number, node: number, value: number): void {
    f[h + L_DIRTY] = 1;
    f[h + L_NODE] = node;
    f[h + L_VALUE] = value;
    f[h + L_OP] = op;
    this.state.epoch++;
  }

  private end(): void {
    const h = this.hdr();
    const f = this.mem.f64;
    f[h + L_OP] = OP_NONE;
    f[h + L_DIRTY] = 0;
    this.mem.release();
  }

  /**
   * Rebuilds the list from its forward chain (first → next → ...), which every operation
   * changes in a single word: back links, last, length; then frees element nodes the chain
   * does not reach (an insert killed before it linked, a remove killed after it unlinked) with
   * their values, and the value of an insert killed before its node existed.
   */
  private repair(): void {
    const pile = this.pile;
    const m = this.mem;
    let h = this.hdr();
    const op = m.f64[h + L_OP]!;
    const intentValue = m.f64[h + L_VALUE]!;
    let cur = m.f64[h + L_FIRST]!;
    m.release();
    this.state.epoch++;
    const nodes: number[] = [];
    const garbage: number[] = [];
    for (const e of pile.entries()) {
      if (e.kind !== 'raw' || e.size < LN_WORDS * 8 || pile.rawTag(e.pointer) !== TAG_LIST_NODE) continue;
      const n = m.at(pile, e.pointer, LN_WORDS);
      const owner = m.f64[n + LN_LIST]!;
      if (owner === this.header) nodes.push(e.pointer);
      else if (owner === 0) garbage.push(e.pointer);
    }
    const chain = new PointerSet(nodes.length);
    const mine = new PointerSet(nodes.length);
    for (const p of nodes) mine.add(p);
    let prev = 0;
    let length = 0;
    let intentLinked = false;
    // Walk forward; a pointer that is not a live element of this list (or a loop) ends the chain there.
    while (cur !== 0 && mine.has(cur) && !chain.has(cur) && safeHas(pile, cur)) {
      chain.add(cur);
      const n = m.at(pile, cur as PilePointer, LN_WORDS);
      const f = m.f64;
      f[n + LN_PREV] = prev;
      if (f[n + LN_VALUE] === intentValue) intentLinked = true;
      prev = cur;
      length++;
      cur = f[n + LN_NEXT]!;
    }
    if (prev !== 0) {
      const n = m.at(pile, prev as PilePointer, LN_WORDS);
      m.f64[n + LN_NEXT] = 0;
    }
    h = this.hdr();
    if (length === 0) m.f64[h + L_FIRST] = 0;
    m.f64[h + L_LAST] = prev;
    m.f64[h + L_LENGTH] = length;
    for (const p of nodes) {
      if (chain.has(p)) continue;
      const n = m.at(pile, p as PilePointer, LN_WORDS);
      const value = m.f64[n + LN_VALUE]!;
      if (value > 0) safeDelete(pile, value);
      pile.delete(p as PilePointer);
    }
    for (const p of garbage) pile.delete(p as PilePointer);
    if ((op === OP_LIST_INSERT || op === OP_LIST_REMOVE) && intentValue > 0 && !intentLinked) safeDelete(pile, intentValue);
    h = this.hdr();
    m.f64[h + L_OP] = OP_NONE;
    m.f64[h + L_DIRTY] = 0;
    m.release();
  }
}

function orUndefined(p: number): PilePointer | undefined {
  return p === 0 ? undefined : (p as PilePointer);
}

/**
 * Opens the list named `name` in `pile`, creating it when missing: the entry point, as `openPile`
 * and `openCache` are (the same as {@link PileList.open}).
 * @throws as {@link PileList.open}
 */
export function openList<T>(pile: Pile, name: string, options: PileListOptions<T> = {}): PileList<T> {
  return PileList.open(pile, name, options);
}
