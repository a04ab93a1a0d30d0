import { PileError, type Pile, type PilePointer } from '@pile/core';

const views = new WeakMap<ArrayBufferLike, Float64Array>();

/**
 * Float64 access to raw pile blocks without a typed-array allocation per access: one
 * Float64Array per segment mapping, cached weakly so that a closed pile's mappings can be
 * collected, and the block's base index into it. Used like the core's scratch fields:
 * read {@link f64} and {@link words} right after {@link at}, before the next call.
 */
export class RawMemory {
  /** The Float64Array over the whole mapping of the last block passed to {@link at}. */
  f64: Float64Array = new Float64Array(0);
  /** Payload length of that block in float64 words. */
  words = 0;
  private lastBuffer: ArrayBufferLike | undefined;

  /**
   * Points {@link f64} at the mapping holding `ptr`'s raw bytes and returns their first float64 index.
   * @throws PILE_INVALID_POINTER when `ptr` is not a raw block or its payload is shorter than `minWords` words
   * @throws PILE_STALE_POINTER when the block was deleted
   * @throws PILE_CLOSED
   */
  at(pile: Pile, ptr: PilePointer, minWords: number): number {
    const buf = pile.rawBuffer(ptr);
    const words = buf.length >>> 3;
    if (words < minWords) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} names a raw block of ${buf.length} bytes, too small for this structure`);
    }
    const ab = buf.buffer;
    if (ab === this.lastBuffer) {
      this.words = words;
      return buf.byteOffset / 8;
    }
    let v = views.get(ab);
    if (v === undefined) {
      if ((buf.byteOffset & 7) !== 0) {
        throw new PileError('PILE_CORRUPT', `raw block ${ptr} starts at byte ${buf.byteOffset} of its segment, not 8-byte aligned`);
      }
      v = new Float64Array(ab, 0, Math.floor(ab.byteLength / 8));
      views.set(ab, v);
    }
    this.f64 = v;
    this.lastBuffer = ab;
    this.words = words;
    return buf.byteOffset / 8;
  }

  /** Drops the reference to the last mapping (so a closed pile's memory is not kept alive by this handle). */
  release(): void {
    this.f64 = EMPTY;
    this.words = 0;
    this.lastBuffer = undefined;
  }
}

const EMPTY = new Float64Array(0);
