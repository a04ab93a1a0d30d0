import { PileError, type Pile, type PilePointer } from '@pile/core';

/** Bytes per slot: f64 entry pointer, f64 expiresAt, u32 hash, i32 priority, side by side (one cache line per probe). */
export const SLOT_BYTES = 24;
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

/**
 * The hash slots of one table, off the V8 heap: `capacity` slots split into chunks of
 * `chunkSlots` (a power of two), each chunk one mutable raw block of n 24-byte slots
 * `{ f64 ptr, f64 expiresAt, u32 hash, i32 priority }`: slot s is `f64[3s]`, `f64[3s+1]`,
 * `u32[6s+4]`, `i32[6s+5]` of the chunk's views. A slot's ptr is
 * 0 when empty, {@link TOMBSTONE} when removed, else the entry record's pointer; the other
 * three are caches of fields of that record, so probing and sweeping never read entries.
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
        throw new PileError('PILE_CORRUPT', `cache index chunk ${c} (pointer ${blocks[c]}) holds ${b.length} bytes, expected ${n * SLOT_BYTES}`);
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

  /** Frees the chunks; the arrays must not be used afterwards. */
  free(pile: Pile): void {
    for (const b of this.blocks) pile.delete(b);
  }
}
