import type { ZodType } from 'zod';
import { inReadSession, type Pile, type PilePointer } from '@pile/core';
import { PointerSet } from './PointerSet';
import {
  LN_LIST,
  LN_MAGIC,
  LN_NEXT,
  LN_PREV,
  LN_VALUE,
  LN_WORDS,
  L_FIRST,
  L_LAST,
  L_LENGTH,
  L_WORDS,
  OP_LIST_INSERT,
  OP_LIST_REMOVE,
  TAG_LIST,
  TAG_LIST_NODE,
} from './RawLayout';
import { RawStructure, asPointer, openHeader, type RawKind } from './RawStructure';
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
  private readonly raw: RawStructure;

  private constructor(
    /** The pile this list lives in. */
    readonly pile: Pile,
    /** The list's name (its root is `list:<name>`). */
    readonly name: string,
    header: PilePointer,
    private readonly values_: ValueStore<T>,
  ) {
    this.raw = RawStructure.named(pile, 'list', name, header, LIST, () => this.repair());
  }

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
    const header = openHeader(pile, name, LIST);
    const list = new PileList<T>(pile, name, header, new ValueStore<T>(pile, `list:${name}`, options.schema));
    list.raw.recoverIfNeeded();
    return list;
  }

  /** Elements in the list. @throws PILE_CLOSED */
  get length(): number {
    return this.raw.readHeaderWord(L_LENGTH);
  }

  /** The first element's node, or undefined when the list is empty. @throws PILE_CLOSED */
  get first(): PilePointer | undefined {
    return orUndefined(this.raw.readHeaderWord(L_FIRST));
  }

  /** The last element's node, or undefined when the list is empty. @throws PILE_CLOSED */
  get last(): PilePointer | undefined {
    return orUndefined(this.raw.readHeaderWord(L_LAST));
  }

  /**
   * Adds `value` at the end; returns its node.
   * @throws PILE_SCHEMA_VIOLATION when `value` does not match the schema; nothing is written
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  append(value: T): PilePointer {
    this.raw.writable();
    return this.insert(this.raw.headerWord(L_LAST), value);
  }

  /**
   * Adds `value` at the front; returns its node.
   * @throws PILE_SCHEMA_VIOLATION when `value` does not match the schema; nothing is written
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  prepend(value: T): PilePointer {
    this.raw.writable();
    return this.insert(0, value);
  }

  /**
   * Adds `value` right after the element `node`; returns the new node.
   * @throws PILE_STALE_POINTER when `node` was removed
   * @throws PILE_INVALID_POINTER when `node` is not an element of this list
   * @throws PILE_SCHEMA_VIOLATION, PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  insertAfter(node: PilePointer, value: T): PilePointer {
    this.raw.writable();
    this.raw.node(node);
    this.raw.mem.release();
    return this.insert(node, value);
  }

  /**
   * Deletes the element `node` and frees its space; later use of `node` throws PILE_STALE_POINTER.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}
   * @throws PILE_READONLY, PILE_CLOSED
   */
  delete(node: PilePointer): void {
    const raw = this.raw;
    raw.writable();
    const m = raw.mem;
    const n = raw.node(node);
    const prev = m.f64[n + LN_PREV]!;
    const next = m.f64[n + LN_NEXT]!;
    const value = m.f64[n + LN_VALUE]!;
    raw.begin(OP_LIST_REMOVE, node, value, 0);
    // The forward chain is what recovery trusts: unlinking from it is the commit point.
    if (prev !== 0) raw.setNodeWord(prev, LN_NEXT, next);
    else raw.setHeaderWord(L_FIRST, next);
    if (next !== 0) raw.setNodeWord(next, LN_PREV, prev);
    else raw.setHeaderWord(L_LAST, prev);
    const h = raw.hdr();
    m.f64[h + L_LENGTH] = m.f64[h + L_LENGTH]! - 1;
    this.pile.delete(value as PilePointer);
    this.pile.delete(node);
    raw.end();
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
    const once = (): T => this.values_.get(this.nodeWord(node, LN_VALUE) as PilePointer);
    return this.raw.checked ? this.raw.reread(once) : once();
  }

  /**
   * Replaces the value of element `node` in place; when the new value does not fit, its record
   * becomes a link to a larger block. Crash-atomic; `node` stays valid.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}
   * @throws PILE_SCHEMA_VIOLATION, PILE_OUT_OF_SPACE, PILE_TOO_LARGE, PILE_READONLY, PILE_CLOSED
   */
  set(node: PilePointer, value: T): void {
    this.raw.writable();
    this.values_.set(this.nodeWord(node, LN_VALUE) as PilePointer, value);
  }

  /**
   * The node after `node`, or undefined at the end.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}; PILE_CLOSED
   */
  next(node: PilePointer): PilePointer | undefined {
    return orUndefined(this.readNodeWord(node, LN_NEXT));
  }

  /**
   * The node before `node`, or undefined at the start.
   * @throws PILE_STALE_POINTER, PILE_INVALID_POINTER as {@link insertAfter}; PILE_CLOSED
   */
  prev(node: PilePointer): PilePointer | undefined {
    return orUndefined(this.readNodeWord(node, LN_PREV));
  }

  /**
   * The values, first to last, read lazily from the pile. Removing the element just yielded
   * (or the next one) during the iteration is safe; elements inserted after the current one are seen.
   * @throws PILE_CLOSED; PILE_STALE_POINTER when both the current element and its successor were removed meanwhile
   */
  values(): IterableIterator<T> {
    this.raw.open();
    return inReadSession(
      this.raw.pile,
      this.raw.walk(L_FIRST, LN_NEXT, LN_VALUE, (value) => this.values_.get(value as PilePointer)),
    );
  }

  /** The values, last to first; as {@link values}. @throws PILE_CLOSED, PILE_STALE_POINTER */
  reversed(): IterableIterator<T> {
    this.raw.open();
    return inReadSession(
      this.raw.pile,
      this.raw.walk(L_LAST, LN_PREV, LN_VALUE, (value) => this.values_.get(value as PilePointer)),
    );
  }

  /** The element nodes, first to last; as {@link values}. @throws PILE_CLOSED, PILE_STALE_POINTER */
  nodes(): IterableIterator<PilePointer> {
    this.raw.open();
    return inReadSession(this.raw.pile, this.raw.walk(L_FIRST, LN_NEXT, -1, asPointer));
  }

  [Symbol.iterator](): IterableIterator<T> {
    return this.values();
  }

  // ------------------------------------------------------------------ internals

  /** Inserts after `after` (0: at the front). */
  private insert(after: number, value: T): PilePointer {
    const pile = this.pile;
    const raw = this.raw;
    const m = raw.mem;
    // Header resolved before the put: no pile call between the put and the intent naming its record.
    const h0 = raw.hdr();
    const hf = m.f64;
    const valuePtr = this.values_.put(value);
    raw.beginAt(hf, h0, OP_LIST_INSERT, 0, valuePtr, 0);
    const node = raw.allocNode(valuePtr);
    let next: number;
    if (after === 0) next = raw.headerWord(L_FIRST);
    else {
      const a = raw.node(after as PilePointer);
      next = m.f64[a + LN_NEXT]!;
    }
    const n = m.at(pile, node, LN_WORDS);
    const f = m.f64;
    f[n + LN_MAGIC] = TAG_LIST_NODE;
    f[n + LN_LIST] = raw.header;
    f[n + LN_PREV] = after;
    f[n + LN_NEXT] = next;
    f[n + LN_VALUE] = valuePtr;
    if (next !== 0) raw.setNodeWord(next, LN_PREV, node);
    else raw.setHeaderWord(L_LAST, node);
    // Linking into the forward chain is the commit point (see repair).
    if (after !== 0) raw.setNodeWord(after, LN_NEXT, node);
    else raw.setHeaderWord(L_FIRST, node);
    const h = raw.hdr();
    m.f64[h + L_LENGTH] = m.f64[h + L_LENGTH]! + 1;
    raw.end();
    return node;
  }

  /** Word `word` of element `node`. @throws as {@link RawStructure.node} */
  private nodeWord(node: PilePointer, word: number): number {
    const n = this.raw.node(node);
    return this.raw.done(this.raw.mem.f64[n + word]!);
  }

  /** {@link nodeWord} for a reader: checked (reread) when the writer is another process. */
  private readNodeWord(node: PilePointer, word: number): number {
    return this.raw.checked ? this.raw.reread(() => this.nodeWord(node, word)) : this.nodeWord(node, word);
  }

  /**
   * Rebuilds the list from its forward chain (first → next → ...), which every operation
   * changes in a single word: back links, last, length; then frees element nodes the chain
   * does not reach (an insert killed before it linked, a remove killed after it unlinked) with
   * their values, and the value of an insert killed before its node existed.
   */
  private repair(): void {
    const pile = this.pile;
    const raw = this.raw;
    const m = raw.mem;
    const { op, b: intentValue } = raw.startRepair();
    let cur = raw.headerWord(L_FIRST);
    const nodes: number[] = [];
    raw.scanBlocks([TAG_LIST_NODE], LN_WORDS, (p) => nodes.push(p));
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
    const h = raw.hdr();
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
    if ((op === OP_LIST_INSERT || op === OP_LIST_REMOVE) && intentValue > 0 && !intentLinked) safeDelete(pile, intentValue);
    raw.end();
  }
}

/** What a list is to the code it shares with the graph. */
const LIST: RawKind = {
  noun: 'list',
  headerTag: TAG_LIST,
  headerWords: L_WORDS,
  nodeTag: TAG_LIST_NODE,
  nodeWords: LN_WORDS,
  nodeNoun: 'an element',
  nodesNoun: 'elements',
  intentWords: 2,
};

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
