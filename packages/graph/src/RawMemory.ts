import { PileError, type Pile, type PilePointer } from '@pile/core';

let lastBuffer: ArrayBufferLike | undefined;
let lastView: Float64Array | undefined;
const views = new WeakMap<ArrayBufferLike, Float64Array>();

/**
 * Float64 access to raw pile blocks without a typed-array allocation per access: one
 * Float64Array per segment mapping (cached weakly, so a closed pile's mappings can be
 * collected) and the block's base index into it.
 */
export class RawMemory {
  /** The Float64Array over the whole mapping of the last block passed to {@link RawMemory.at}. */
  f64: Float64Array = new Float64Array(0);

  /**
   * Points {@link f64} at the mapping holding `ptr`'s raw bytes and returns their first float64 index.
   * @throws PILE_INVALID_POINTER when `ptr` is not a raw block or its payload is shorter than `minBytes`
   * @throws PILE_STALE_POINTER when the block was deleted
   * @throws PILE_CLOSED
   */
  at(pile: Pile, ptr: PilePointer, minBytes: number): number {
    const buf = pile.rawBuffer(ptr);
    if (buf.length < minBytes) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} names a raw block of ${buf.length} bytes, not a block of this structure`);
    }
    this.f64 = viewOf(buf);
    return buf.byteOffset / 8;
  }

  /** Like {@link at}, also answering the payload length in float64 words. */
  words(pile: Pile, ptr: PilePointer): { base: number; words: number } {
    const buf = pile.rawBuffer(ptr);
    this.f64 = viewOf(buf);
    return { base: buf.byteOffset / 8, words: buf.length >>> 3 };
  }
}

function viewOf(buf: Buffer): Float64Array {
  const ab = buf.buffer;
  if (ab === lastBuffer) return lastView!;
  let v = views.get(ab);
  if (v === undefined) {
    if ((buf.byteOffset & 7) !== 0) {
      throw new PileError('PILE_CORRUPT', `raw block at byte ${buf.byteOffset} of its segment is not 8-byte aligned`);
    }
    v = new Float64Array(ab, 0, Math.floor(ab.byteLength / 8));
    views.set(ab, v);
  }
  lastBuffer = ab;
  lastView = v;
  return v;
}
