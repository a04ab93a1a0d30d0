import { PileError, isPileError, type Pile, type PilePointer, encodeGuard, reentrantError } from '@pile/core';
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
  readonly state: SharedState;

  constructor(
    readonly pile: Pile,
    readonly name: string,
    readonly header: PilePointer,
    readonly kind: RawKind,
    /** The structure's own repair, run by {@link writable} and {@link recoverIfNeeded}. */
    private readonly repair: () => void,
  ) {
    pile.claimStructures(`${kind.noun} '${name}'`);
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
  }

  /** {@link end} with the header already resolved (`f`, `h`). */
  endAt(f: Float64Array, h: number): void {
    f[h + H_OP] = OP_NONE;
    f[h + H_DIRTY] = 0;
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
    return intent;
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
