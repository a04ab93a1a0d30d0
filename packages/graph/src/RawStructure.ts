import {
  PileError,
  ReadRetry,
  SEQ_WORD,
  beginChange,
  clearDeadMark,
  isPileError,
  type Pile,
  type PilePointer,
  encodeGuard,
  reentrantError,
} from '@pile/core';
import { openSync } from './GraphSync';
import { PointerSet } from './PointerSet';
import { RawMemory } from './RawMemory';
import { B_MAGIC, B_OWNER, H_DIRTY, H_INTENT, H_MAGIC, H_OP, H_VERSION, LAYOUT_VERSION, OP_NONE } from './RawLayout';
import { sharedState, type SharedState } from './Shared';

/** What tells a list from a graph to the code they share: tags, sizes and the words of messages. */
export interface RawKind {
  /** Names the structure in messages and roots (`<noun>:<name>`). */
  readonly noun: 'list' | 'graph';
  readonly headerTag: number;
  readonly headerWords: number;
  readonly nodeTag: number;
  readonly nodeWords: number;
  /** One node in messages: 'an element', 'a node'. */
  readonly nodeNoun: string;
  /** Nodes in messages: 'elements', 'nodes'. */
  readonly nodesNoun: string;
  /** How many intent words the header holds after its op word (see RawLayout). */
  readonly intentWords: 2 | 3;
}

/** The intent a repair starts from: the op word and the intent words after it (0 past the kind's count). */
export interface Intent {
  readonly op: number;
  readonly a: number;
  readonly b: number;
  readonly d: number;
}

/** A node word that holds a pointer, typed as one (the `out` of {@link RawStructure.walk} for node pointers). */
export function asPointer(word: number): PilePointer {
  return word as PilePointer;
}

/**
 * Finds the header of the structure `kind` named `name` (root `<noun>:<name>`), creating it when
 * missing, and checks that it is one.
 * @throws PILE_READONLY when it does not exist and the pile is read-only
 * @throws PILE_CORRUPT when the root does not name such a header
 * @throws PILE_FORMAT_VERSION when it was written by a newer layout
 * @throws PILE_CLOSED, PILE_OUT_OF_SPACE
 */
export function openHeader(pile: Pile, name: string, kind: RawKind): PilePointer {
  const root = `${kind.noun}:${name}`;
  let header = pile.getRoot(root);
  const mem = new RawMemory();
  if (header === undefined) {
    if (pile.readonly) throw new PileError('PILE_READONLY', `${kind.noun} '${name}' does not exist and the pile is open read-only`);
    header = pile.allocRaw(kind.headerWords * 8, kind.headerTag);
    const h = mem.at(pile, header, kind.headerWords);
    mem.f64[h + H_VERSION] = LAYOUT_VERSION;
    mem.f64[h + H_MAGIC] = kind.headerTag;
    pile.setRoot(root, header);
  } else {
    let h: number;
    try {
      h = mem.at(pile, header, kind.headerWords);
    } catch (err) {
      if (isPileError(err, 'PILE_INVALID_POINTER') || isPileError(err, 'PILE_STALE_POINTER')) {
        throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${header}) does not name a ${kind.noun} header: ${err.message}`);
      }
      throw err;
    }
    if (mem.f64[h + H_MAGIC] !== kind.headerTag)
      throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${header}) does not name a ${kind.noun} header`);
    const version = mem.f64[h + H_VERSION]!;
    if (version > LAYOUT_VERSION) {
      throw new PileError(
        'PILE_FORMAT_VERSION',
        `${kind.noun} '${name}' has layout version ${version}; this @pile/graph reads up to ${LAYOUT_VERSION}`,
      );
    }
  }
  mem.release();
  return header;
}

/**
 * What a list and a graph share: the handle's fields, the guards every call starts with, access
 * to the header and to node blocks through one {@link RawMemory}, the intent log that makes an
 * operation repairable, the lazy walk along a node chain and the recovery scan. One concrete
 * class that both hold (not a base class), so its hot methods see one shape.
 */
export class RawStructure {
  /** The one RawMemory of the handle: read its f64 right after the call that resolved a block. */
  readonly mem = new RawMemory();
  /**
   * True when the one writer of the structure is another open (this one is read-only) and the
   * structure has a seqlock: every read goes through {@link reread}.
   */
  readonly checked: boolean;
  /** The structure's seqlock words (GraphSync); undefined for one no writer of this version opened. */
  private readonly sync: Uint32Array | undefined;
  readonly state: SharedState;

  /**
   * The structure of root `<prefix>:<name>` whose seqlock is the root `<prefix>:<name>:sync` (GraphSync):
   * what PileList and PileGraph open alike.
   */
  static named(pile: Pile, prefix: string, name: string, header: PilePointer, kind: RawKind, repair: () => void): RawStructure {
    return new RawStructure(pile, name, header, kind, repair, () => openSync(pile, `${prefix}:${name}:sync`));
  }

  constructor(
    readonly pile: Pile,
    readonly name: string,
    readonly header: PilePointer,
    readonly kind: RawKind,
    /** The structure's own repair, run by {@link writable} and {@link recoverIfNeeded}. */
    private readonly repair: () => void,
    /**
     * Opens the structure's seqlock (GraphSync): a read-only open that finds one checks its reads; a
     * writable open makes it, once it is known to be the one writer (after claimStructures).
     */
    openSync?: () => Uint32Array | undefined,
  ) {
    const found = pile.readonly ? openSync?.() : undefined;
    this.checked = found !== undefined;
    pile.claimStructures(`${kind.noun} '${name}'`, this.checked);
    this.sync = pile.readonly ? found : openSync?.();
    this.state = sharedState(pile, `${kind.noun}:${name}`);
  }

  /** @throws PILE_CLOSED */
  open(): void {
    if (this.pile.isClosed) throw new PileError('PILE_CLOSED', 'the pile is closed');
  }

  /**
   * Checks that the structure may be changed; repairs it first when an earlier operation failed half-way.
   * @throws PILE_CLOSED, PILE_READONLY, PILE_REENTRANT
   */
  writable(): void {
    this.open();
    if (this.pile.readonly) throw new PileError('PILE_READONLY', `${this.kind.noun} '${this.name}': the pile is open read-only`);
    // A write from a value's getter while the pile stores a value: refused before any raw block
    // is touched (the pile refuses its own writes the same way).
    if (encodeGuard.depth !== 0) throw reentrantError();
    if (this.headerWord(H_DIRTY) !== 0) this.repair();
  }

  /**
   * Repairs after an unclean shutdown or an interrupted operation, once per pile handle: what the
   * first open of a structure in a process runs.
   */
  recoverIfNeeded(): void {
    if (this.pile.readonly) return;
    if (this.headerWord(H_DIRTY) !== 0 || (this.pile.lastRecovery.ran && !this.state.repaired)) this.repair();
    this.state.repaired = true;
  }

  /** Releases {@link mem} and returns `value`. */
  done<T>(value: T): T {
    this.mem.release();
    return value;
  }

  /** Resolves the header; returns its base (in this.mem.f64). */
  hdr(): number {
    return this.mem.at(this.pile, this.header, this.kind.headerWords);
  }

  headerWord(word: number): number {
    const h = this.hdr();
    const v = this.mem.f64[h + word]!;
    this.mem.release();
    return v;
  }

  /** {@link headerWord} for a reader: checked (reread) in a checked structure. */
  readHeaderWord(word: number): number {
    return this.checked ? this.reread(() => this.headerWord(word)) : this.headerWord(word);
  }

  setHeaderWord(word: number, value: number): void {
    const h = this.hdr();
    this.mem.f64[h + word] = value;
  }

  /**
   * Resolves node `id` of this structure into this.mem and returns its base.
   * @throws PILE_INVALID_POINTER when `id` is no node of this structure
   * @throws PILE_STALE_POINTER, PILE_CLOSED
   */
  node(id: PilePointer): number {
    if (typeof id !== 'number') throw new PileError('PILE_INVALID_POINTER', `${String(id)} is not a pile pointer`);
    const m = this.mem;
    const kind = this.kind;
    let n: number;
    try {
      n = m.at(this.pile, id, kind.nodeWords);
    } catch (err) {
      if (isPileError(err, 'PILE_INVALID_POINTER')) {
        throw new PileError(
          'PILE_INVALID_POINTER',
          `pointer ${id} is not ${kind.nodeNoun} of ${kind.noun} '${this.name}' (${err.message})`,
        );
      }
      throw err;
    }
    const f = m.f64;
    if (f[n + B_MAGIC] !== kind.nodeTag || f[n + B_OWNER] !== this.header) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${id} is not ${kind.nodeNoun} of ${kind.noun} '${this.name}'`);
    }
    return n;
  }

  setNodeWord(id: number, word: number, value: number): void {
    const n = this.node(id as PilePointer);
    this.mem.f64[n + word] = value;
  }

  /**
   * Allocates a node block for an operation that has begun, right after it stored `record`. When the
   * pile refuses (out of space, nothing allocated) it frees `record` and clears the mark; anything
   * else leaves the mark, so that the next write or open repairs.
   * @throws PILE_OUT_OF_SPACE, PILE_CLOSED
   */
  allocNode(record: PilePointer): PilePointer {
    const pile = this.pile;
    try {
      return pile.allocRaw(this.kind.nodeWords * 8, this.kind.nodeTag);
    } catch (err) {
      if (isPileError(err)) {
        pile.delete(record);
        this.end();
      }
      throw err;
    }
  }

  // ------------------------------------------------------------------ intent log

  /**
   * Marks the structure as being changed and records what recovery needs to finish or undo the
   * operation. The mark stays when the operation fails half-way, so that the next write (or the
   * next open) repairs the structure.
   */
  begin(op: number, a: number, b: number, d: number): void {
    const h = this.hdr();
    this.beginAt(this.mem.f64, h, op, a, b, d);
  }

  /** {@link begin} with the header already resolved (`f`, `h`); `d` is written only by a kind with three intent words. */
  beginAt(f: Float64Array, h: number, op: number, a: number, b: number, d: number): void {
    f[h + H_DIRTY] = 1;
    f[h + H_INTENT] = a;
    f[h + H_INTENT + 1] = b;
    if (this.kind.intentWords === 3) f[h + H_INTENT + 2] = d;
    // The op last: a kill before it leaves the mark with no (or an older) op, which repair handles alike.
    f[h + H_OP] = op;
    this.state.epoch++;
    // Readers in other processes wait from here to endAt (GraphSync); a begin inside an operation
    // already begun leaves the mark as it is.
    if (this.sync !== undefined) beginChange(this.sync);
  }

  /** {@link end} with the header already resolved (`f`, `h`). */
  endAt(f: Float64Array, h: number): void {
    f[h + H_OP] = OP_NONE;
    f[h + H_DIRTY] = 0;
    if (this.sync !== undefined) clearDeadMark(this.sync);
  }

  end(): void {
    const h = this.hdr();
    this.endAt(this.mem.f64, h);
    this.mem.release();
  }

  // ------------------------------------------------------------------ walks and recovery

  /**
   * The nodes along a chain, lazily: from header word `start`, following node word `link`;
   * yields `out(word)` of each node's word `valueWord` (-1: of the node's pointer). Removing the
   * node just yielded (or the one after it) during the walk is safe.
   * @throws PILE_STALE_POINTER when both the node just yielded and its successor were removed meanwhile
   */
  *walk<T>(start: number, link: number, valueWord: number, out: (word: number) => T): IterableIterator<T> {
    if (this.checked) return yield* this.walkChecked(start, link, valueWord, out);
    const m = this.mem;
    let cur = this.headerWord(start);
    while (cur !== 0) {
      let n = this.node(cur as PilePointer);
      let following = m.f64[n + link]!;
      const word = valueWord < 0 ? cur : m.f64[n + valueWord]!;
      m.release();
      const epoch = this.state.epoch;
      yield out(word);
      if (this.state.epoch !== epoch) {
        this.open();
        if (this.pile.has(cur as PilePointer)) {
          n = this.node(cur as PilePointer);
          following = m.f64[n + link]!;
          m.release();
        } else if (following !== 0 && !this.pile.has(following as PilePointer)) {
          throw new PileError(
            'PILE_STALE_POINTER',
            `${this.kind.noun} '${this.name}': ${this.kind.nodesNoun} ${cur} and ${following}, where the iteration stood, were both removed during it`,
          );
        }
      }
      cur = following;
    }
  }

  /**
   * {@link walk} of a checked reader: each step reads the node's successor and value at one moment
   * (reread). A node removed by the writer after the walk reached it and before its step ends the
   * chain there: the walk starts again from the head and skips the nodes it yielded, so it yields
   * every node present for the whole walk once, and never a node twice.
   */
  private *walkChecked<T>(start: number, link: number, valueWord: number, out: (word: number) => T): IterableIterator<T> {
    const seen = new PointerSet();
    const head = (): number => {
      const h = this.hdr();
      return this.mem.f64[h + start]!;
    };
    let cur = this.reread(head);
    while (cur !== 0) {
      const at = cur;
      // out() runs inside the step too: what it reads (a list element's value record) may be
      // freed by the writer once the step has read the node.
      const step = this.reread((): [number, T] | undefined => {
        if (!this.pile.has(at as PilePointer)) return undefined;
        const n = this.node(at as PilePointer);
        const f = this.mem.f64;
        const following = f[n + link]!;
        const word = valueWord < 0 ? at : f[n + valueWord]!;
        this.mem.release();
        return [following, out(word)];
      });
      if (step === undefined) {
        cur = this.reread(head);
        continue;
      }
      if (seen.add(at)) yield step[1];
      this.open();
      cur = step[0];
    }
  }

  /**
   * Starts a repair: reads the intent and tells live iterators that what they prefetched may be gone.
   */
  startRepair(): Intent {
    const h = this.hdr();
    const f = this.mem.f64;
    const intent = {
      op: f[h + H_OP]!,
      a: f[h + H_INTENT]!,
      b: f[h + H_INTENT + 1]!,
      d: this.kind.intentWords === 3 ? f[h + H_INTENT + 2]! : 0,
    };
    this.mem.release();
    this.state.epoch++;
    if (this.sync !== undefined) beginChange(this.sync);
    return intent;
  }

  /**
   * Whether nodes met since `epoch` may have been removed: always for a checked reader, whose
   * writer (another process) moves no epoch of this one.
   */
  changedSince(epoch: number): boolean {
    return this.checked || this.state.epoch !== epoch;
  }

  /**
   * Runs the read `once` of a checked structure until it meets no write operation of the writer:
   * the seqlock (GraphSync) even before it and unmoved after it; an error it raised is reported only
   * when the seqlock did not move, so a read never returns a half-made operation's state nor a false
   * PILE_STALE_POINTER. Waits are the core's (ReadRetry).
   * @throws PILE_LOCKED when the writer died or stopped in the middle of an operation (1 s), or
   *   reads kept meeting operations for 10 s; what `once` throws
   */
  reread<T>(once: () => T): T {
    const w = this.sync!;
    let retry: ReadRetry | undefined;
    for (;;) {
      // A plain load before, Atomics.load after: the order argument of the core's checked reads.
      const s = w[SEQ_WORD]!;
      if ((s & 1) === 0) {
        let value: T | undefined;
        let failed = false;
        try {
          value = once();
        } catch (err) {
          if (Atomics.load(w, SEQ_WORD) === s) throw err;
          failed = true;
        } finally {
          this.mem.release();
        }
        if (!failed && Atomics.load(w, SEQ_WORD) === s) return value as T;
      }
      (retry ??= new ReadRetry(this.pile)).pause(`a read of ${this.kind.noun} '${this.name}'`, w, s);
    }
  }

  /**
   * The recovery scan: calls `visit` for every raw block of one of `tags`, of at least `minWords`
   * words, that names this structure as its owner (with the magic of its tag), and frees every such
   * block whose owner word is still 0: one an operation allocated and was killed before it wrote
   * anything into it, garbage whichever structure it was for.
   */
  scanBlocks(tags: readonly number[], minWords: number, visit: (block: PilePointer, tag: number) => void): void {
    const pile = this.pile;
    const m = this.mem;
    const garbage: number[] = [];
    for (const e of pile.entries()) {
      if (e.kind !== 'raw' || e.size < minWords * 8) continue;
      const tag = pile.rawTag(e.pointer);
      if (!tags.includes(tag)) continue;
      const b = m.at(pile, e.pointer, minWords);
      const owner = m.f64[b + B_OWNER]!;
      if (owner === 0) garbage.push(e.pointer);
      else if (owner === this.header && m.f64[b + B_MAGIC] === tag) visit(e.pointer, tag);
    }
    for (const p of garbage) pile.delete(p as PilePointer);
  }
}
