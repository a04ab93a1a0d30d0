import { PileError, type Pile, type PilePointer } from '@pile/core';

/**
 * Float64 access to raw pile blocks without an allocation per access, through the core's
 * `rawSeek` (which checks the pointer's tag and the block's kind): {@link f64} is the
 * Float64Array over the whole segment of the last block passed to {@link at}. Read
 * {@link f64} and {@link words} right after {@link at}, before the next call.
 */
export class RawMemory {
  /** The Float64Array over the whole segment of the last block passed to {@link at}. */
  f64: Float64Array = EMPTY;
  /** Payload length of that block in float64 words. */
  words = 0;

  /**
   * Points {@link f64} at the segment holding `ptr`'s raw bytes and returns their first float64 index.
   * @throws PILE_INVALID_POINTER when `ptr` is not a raw block or its payload is shorter than `minWords` words
   * @throws PILE_STALE_POINTER when the block was deleted
   * @throws PILE_CLOSED
   */
  at(pile: Pile, ptr: PilePointer, minWords: number): number {
    const off = pile.rawSeek(ptr);
    const words = pile.rawLength >>> 3;
    if (words < minWords) {
      throw new PileError(
        'PILE_INVALID_POINTER',
        `pointer ${ptr} names a raw block of ${pile.rawLength} bytes, too small for this structure`,
      );
    }
    this.f64 = pile.rawF64;
    this.words = words;
    return off >>> 3;
  }

  /** Drops the reference to the last segment (so a closed pile's memory is not kept alive by this handle). */
  release(): void {
    this.f64 = EMPTY;
    this.words = 0;
  }
}

const EMPTY = new Float64Array(0);
