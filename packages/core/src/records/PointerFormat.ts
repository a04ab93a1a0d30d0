import type { PilePointer } from './PilePointer';

/** Segment index bits of a pointer: up to 16384 segments. */
export const SEGMENT_BITS = 14;
export const SEGMENT_DIV = 2 ** SEGMENT_BITS;
/** Most segments a pile holds: every index a pointer can name. */
export const MAX_SEGMENTS = SEGMENT_DIV;
/** Generation bits a pointer carries at most (fewer when the segment size leaves less room in 53 bits). */
const MAX_TAG_BITS = 22;

/**
 * How the pointers and addresses of a pile with one segment size are laid out (docs/format.md):
 * a pointer is `((tag * SEGMENT_DIV + segment) * offsetDiv + offset / 8)`, where the tag is the
 * low bits of the block's generation; an address is `segment * segmentSize + offset`. The only
 * owner of that arithmetic: the pile, its recovery and catalog, and the compiled pointer checks
 * (PointerCheck) take it from here.
 *
 * Every divisor is a power of two, so scaling by the inverse is exact in float64, and much cheaper
 * than dividing or taking a float modulo.
 */
export class PointerFormat {
  /** 1 / segmentSize. */
  readonly segmentInv: number;
  /** Bits of offset/8 in a pointer. */
  readonly offsetBits: number;
  /** 2^offsetBits: the offset/8 part of a pointer is `ptr mod offsetDiv`. */
  readonly offsetDiv: number;
  /** 1 / offsetDiv. */
  readonly offsetInv: number;
  /** The generation bits a pointer carries. */
  readonly tagMask: number;

  constructor(readonly segmentSize: number) {
    this.segmentInv = 1 / segmentSize;
    this.offsetBits = Math.log2(segmentSize) - 3;
    this.offsetDiv = 2 ** this.offsetBits;
    this.offsetInv = 1 / this.offsetDiv;
    this.tagMask = 2 ** Math.min(MAX_TAG_BITS, 53 - SEGMENT_BITS - this.offsetBits) - 1;
  }

  /** The index of the segment holding address `addr`. */
  segmentOf(addr: number): number {
    return Math.floor(addr * this.segmentInv);
  }

  /** The address of offset `off` in segment `segIdx`. */
  address(segIdx: number, off: number): number {
    return segIdx * this.segmentSize + off;
  }

  /** The pointer of the block at `off` of segment `segIdx` whose generation is `gen`. */
  pointer(segIdx: number, off: number, gen: number): PilePointer {
    return (((gen & this.tagMask) * SEGMENT_DIV + segIdx) * this.offsetDiv + off / 8) as PilePointer;
  }

  /** The address of the block a well-formed pointer names (its tag dropped). */
  addressOf(ptr: number): number {
    const rest = Math.floor(ptr * this.offsetInv);
    const off = (ptr - rest * this.offsetDiv) * 8;
    const segIdx = rest - Math.floor(rest * (1 / SEGMENT_DIV)) * SEGMENT_DIV;
    return segIdx * this.segmentSize + off;
  }
}
