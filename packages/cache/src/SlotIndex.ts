import { PileError, type Pile, type PilePointer } from '@pile/core';
import { RAW_PREFIX } from './CoreBindings';
import { E_KEY, E_KEY_LEN, E_KEY_TYPE } from './EntryFormat';
import type { KeyCodec } from './KeyCodec';
import type { PileMemory } from './PileMemory';

/** Bytes per slot: f64 entry pointer, f64 expiresAt, u32 hash, i32 priority, side by side (one cache line per probe). */
export const SLOT_BYTES = 24;
/** What a checked {@link SlotIndex.find} answers when an entry it compared was changed meanwhile: read again. */
export const FIND_AGAIN = -2;
/** Slot pointer of a removed entry: probing goes on past it, an insert may reuse it. */
export const TOMBSTONE = -1;
const MAX_CHUNK_SLOTS = 1 << 20;
/** Segment header, block header, raw prefix and some slack: what a segment can not give a raw block. */
const SEGMENT_RESERVE = 256;

/** Slots per chunk for a pile: the largest power of two whose chunk fits in one segment, at most 2^20. */
export function chunkSlotsFor(segmentSize: number): number {
  const fit = Math.floor((segmentSize - SEGMENT_RESERVE) / SLOT_BYTES);
  return Math.min(MAX_CHUNK_SLOTS, 2 ** Math.floor(Math.log2(fit)));
}

/** What {@link SlotIndex.rehashInto} moved: live entries placed, those with an expiry among them. */
export interface RehashCounts {
  count: number;
  expiring: number;
}

/**
 * The hash slots of one table, off the V8 heap, and the linear probing over them: `capacity`
 * slots split into chunks of `chunkSlots` (a power of two), each chunk one mutable raw block of n
 * 24-byte slots `{ f64 ptr, f64 expiresAt, u32 hash, i32 priority }`: slot s of a chunk is
 * `f64[3s]`, `f64[3s+1]`, `u32[6s+4]`, `i32[6s+5]` of the chunk's views. A slot's ptr is 0 when
 * empty, {@link TOMBSTONE} when removed, else the entry record's pointer; the other three are
 * caches of fields of that record, so probing and sweeping never read entries. Only this class
 * knows that layout: everything else goes through its accessors.
 */
export class SlotIndex {
  /** Per chunk: views of the same bytes. */
  readonly f64: Float64Array[] = [];
  readonly u32: Uint32Array[] = [];
  readonly i32: Int32Array[] = [];
  readonly shift: number;
  readonly mask: number;

  private constructor(
    readonly capacity: number,
    readonly chunkSlots: number,
    readonly blocks: PilePointer[],
  ) {
    this.shift = Math.log2(chunkSlots);
    this.mask = chunkSlots - 1;
  }

  /**
   * Allocates zeroed (all empty) chunks for `capacity` slots.
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE (nothing stays allocated)
   */
  static create(pile: Pile, capacity: number, chunkSlots: number, tag: number): SlotIndex {
    const blocks: PilePointer[] = [];
    try {
      for (let start = 0; start < capacity; start += chunkSlots) {
        blocks.push(pile.allocRaw(Math.min(chunkSlots, capacity - start) * SLOT_BYTES, tag));
      }
    } catch (err) {
      for (const b of blocks) pile.delete(b);
      throw err;
    }
    return SlotIndex.open(pile, capacity, chunkSlots, blocks);
  }

  /**
   * Maps the chunks of an existing index.
   * @throws PILE_CORRUPT when a chunk is missing or of the wrong size
   */
  static open(pile: Pile, capacity: number, chunkSlots: number, blocks: PilePointer[]): SlotIndex {
    const idx = new SlotIndex(capacity, chunkSlots, blocks);
    if (blocks.length !== Math.ceil(capacity / chunkSlots)) {
      throw new PileError('PILE_CORRUPT', `cache index of ${capacity} slots lists ${blocks.length} chunks of ${chunkSlots}`);
    }
    for (let c = 0; c < blocks.length; c++) {
      const n = Math.min(chunkSlots, capacity - c * chunkSlots);
      let b: Buffer;
      try {
        b = pile.rawBuffer(blocks[c]!);
      } catch (err) {
        throw new PileError('PILE_CORRUPT', `cache index chunk ${c} (pointer ${blocks[c]}) is not readable: ${(err as Error).message}`);
      }
      if (b.length !== n * SLOT_BYTES) {
        throw new PileError(
          'PILE_CORRUPT',
          `cache index chunk ${c} (pointer ${blocks[c]}) holds ${b.length} bytes, expected ${n * SLOT_BYTES}`,
        );
      }
      const ab = b.buffer;
      const o = b.byteOffset;
      idx.f64.push(new Float64Array(ab, o, 3 * n));
      idx.u32.push(new Uint32Array(ab, o, 6 * n));
      idx.i32.push(new Int32Array(ab, o, 6 * n));
    }
    return idx;
  }

  /** The slot a hash starts probing at: the hash scaled onto [0, capacity). */
  home(hash: number): number {
    return Math.floor((hash * this.capacity) / 4294967296);
  }

  /** Slot i's entry pointer: 0 empty, {@link TOMBSTONE} removed, else the entry record. */
  ptr(i: number): number {
    return this.f64[i >>> this.shift]![3 * (i & this.mask)]!;
  }

  /** Slot i's expiry time in ms (0: never). */
  expiry(i: number): number {
    return this.f64[i >>> this.shift]![3 * (i & this.mask) + 1]!;
  }

  /** Slot i's key hash. */
  hash(i: number): number {
    return this.u32[i >>> this.shift]![6 * (i & this.mask) + 4]!;
  }

  /** Slot i's priority. */
  priority(i: number): number {
    return this.i32[i >>> this.shift]![6 * (i & this.mask) + 5]!;
  }

  /** Replaces slot i's pointer alone (a tombstone, or one copy of a duplicate). */
  setPtr(i: number, ptr: number): void {
    this.f64[i >>> this.shift]![3 * (i & this.mask)] = ptr;
  }

  /**
   * Writes slot i: the caches first, the pointer last, since the pointer is what publishes the
   * slot (a crash in between leaves the old pointer, whose caches recovery re-derives).
   */
  set(i: number, ptr: number, expiresAt: number, hash: number, priority: number): void {
    const c = i >>> this.shift;
    const s = i & this.mask;
    this.u32[c]![6 * s + 4] = hash;
    this.i32[c]![6 * s + 5] = priority;
    const f = this.f64[c]!;
    f[3 * s + 1] = expiresAt;
    f[3 * s] = ptr;
  }

  /** Re-derives slot i's caches from its entry (recovery), leaving the pointer. */
  setCaches(i: number, expiresAt: number, hash: number, priority: number): void {
    this.set(i, this.ptr(i), expiresAt, hash, priority);
  }

  /** The first empty slot, or -1 when none is. */
  firstEmpty(): number {
    for (let i = 0; i < this.capacity; i++) if (this.ptr(i) === 0) return i;
    return -1;
  }

  /**
   * The slot holding the prepared key of `kc` within `limit` probes, or -1; on a hit, `mem` is
   * left on the entry's record. The hot path of every get and put (`npx -y pnpm@12.4.2 bench cache`):
   * the chunk and slot are computed once per probe here, not through the accessors.
   * `checked` (a reader beside a writer in another process, CheckedRead): an entry whose key or
   * tag did not match is checked to have been read whole, else the answer is {@link FIND_AGAIN}
   * (a key torn by a writer's change must not make the reader pass its own entry by).
   * @throws PILE_CORRUPT when a slot points at a record that is not an entry tagged `entryTag`
   */
  find(kc: KeyCodec, mem: PileMemory, entryTag: number, limit: number, table: string, checked: boolean): number {
    const hash = kc.hash;
    const cap = this.capacity;
    const shift = this.shift;
    const mask = this.mask;
    let i = this.home(hash);
    for (let n = 0; n < limit; n++) {
      const c = i >>> shift;
      const s = i & mask;
      const p = this.f64[c]![3 * s]!;
      if (p === 0) return -1;
      if (p > 0 && this.u32[c]![6 * s + 4] === hash) {
        mem.locate(p);
        const o = mem.off;
        const b = mem.buf;
        const v = mem.view;
        if (v.getUint32(o - RAW_PREFIX, true) !== entryTag) {
          if (checked && !mem.settled()) return FIND_AGAIN;
          throw new PileError('PILE_CORRUPT', `cache table '${table}': slot ${i} points at a record (${p}) that is not one of its entries`);
        }
        if (kc.equals(b[o + E_KEY_TYPE]!, b, o + E_KEY, v.getUint32(o + E_KEY_LEN, true))) return i;
        if (checked && !mem.settled()) return FIND_AGAIN;
      }
      if (++i === cap) i = 0;
    }
    return -1;
  }

  /** The first free (empty or tombstone) slot within `limit` probes from `hash`'s home, or -1. */
  findFree(hash: number, limit: number): number {
    const cap = this.capacity;
    let i = this.home(hash);
    for (let n = 0; n < limit; n++) {
      if (this.ptr(i) <= 0) return i;
      if (++i === cap) i = 0;
    }
    return -1;
  }

  /**
   * Empties slot i by backward-shift deletion (Knuth's algorithm R for linear probing): each later
   * entry of the cluster that may live closer to its home moves back into the hole, so removals
   * leave no tombstones and probe lengths stay those of the live load, however many entries an
   * evicting cache turns over. A move writes the slot's caches, then its pointer, and only then
   * reuses the source slot: a crash mid-shift can leave one entry in two slots (which recovery
   * reduces to one), never an unreachable entry.
   */
  shiftOut(i: number): void {
    const cap = this.capacity;
    let hole = i;
    let j = i;
    for (let n = 1; n < cap; n++) {
      if (++j === cap) j = 0;
      const p = this.ptr(j);
      if (p === 0) break;
      // A tombstone (left by recovery or an older version) needs no reaching: probe on past it.
      if (p < 0) continue;
      const home = this.home(this.hash(j));
      // The entry stays when its home lies cyclically in (hole, j]: moving it before its home would lose it.
      if (hole <= j ? hole < home && home <= j : hole < home || home <= j) continue;
      this.set(hole, p, this.expiry(j), this.hash(j), this.priority(j));
      hole = j;
    }
    this.set(hole, 0, 0, 0, 0);
  }

  /**
   * Moves every live slot into `next` (empty), each within `limit` probes of its home there; the
   * pointers of those that find no free slot in that window (speculative tables only) go to `dropped`.
   */
  rehashInto(next: SlotIndex, limit: number, dropped: number[]): RehashCounts {
    let count = 0;
    let expiring = 0;
    for (let i = 0; i < this.capacity; i++) {
      const p = this.ptr(i);
      if (p <= 0) continue;
      const hash = this.hash(i);
      const at = next.findFree(hash, limit);
      if (at < 0) {
        dropped.push(p);
        continue;
      }
      const e = this.expiry(i);
      next.set(at, p, e, hash, this.priority(i));
      if (e !== 0) expiring++;
      count++;
    }
    return { count, expiring };
  }

  /**
   * The slot of the live entry with the smallest hash above `after` (-1: from the start), or with
   * the hash `after` itself when `unseen(slot)` says so; -1 when there is none. Hash order does not
   * depend on the capacity or on where probing put an entry, so an iteration that goes from hash
   * to hash sees every entry once across resizes and backward shifts. An entry lies in the cluster
   * of its home at or after it, and homes grow with hashes: the scan starts at `after`'s home and
   * stops at the first empty slot past the best candidate's home.
   */
  nextByHash(after: number, unseen: (slot: number) => boolean): number {
    const cap = this.capacity;
    const start = after < 0 ? 0 : this.home(after);
    let best = -1;
    let bestHash = 0;
    let bestHome = 0;
    for (let d = 0; d < cap; d++) {
      const i = start + d < cap ? start + d : start + d - cap;
      const p = this.ptr(i);
      if (p === 0) {
        // Past an empty slot every entry's home is further on: its hash is larger (or, once the
        // scan wrapped around the end, smaller than `after`).
        if ((best >= 0 && bestHome < d) || start + d >= cap) return best;
        continue;
      }
      if (p < 0) continue;
      const h = this.hash(i);
      if (h < after || (h === after && !unseen(i))) continue;
      if (best < 0 || h < bestHash) {
        best = i;
        bestHash = h;
        bestHome = this.home(h) - start;
      }
    }
    return best;
  }

  /** Frees the chunks; the arrays must not be used afterwards. */
  free(pile: Pile): void {
    for (const b of this.blocks) pile.delete(b);
  }
}
