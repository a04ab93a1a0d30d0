import type { Pile, PilePointer } from '@pile/core';

/** Segment index bits of a pile pointer (see @pile/core PilePointer). */
const SEGMENT_DIV = 2 ** 14;
/** Block header (16) + raw prefix (8): where a raw block's caller bytes start. */
const RAW_PAYLOAD = 24;

/**
 * Reads sealed raw records in place without allocating: `locate(ptr)` sets `buf`/`view`/`off`
 * to a whole-segment Buffer and the offset of the record's bytes. A pointer is decoded the way
 * the core packs it; the first record met in each segment is cross-checked against
 * `pile.rawBuffer`, and if the two ever disagree (or the segment Buffer is not the whole
 * mapping), every later call falls back to `pile.rawBuffer` (one small allocation per call).
 * Only pointers the cache itself holds for live records are passed here.
 */
export class PileMemory {
  buf!: Buffer;
  view!: DataView;
  off = 0;
  /** False once the cross-check failed: always go through the core. */
  fast = true;
  private bufs: (Buffer | undefined)[] = [];
  private views: (DataView | undefined)[] = [];
  private readonly offsetDiv: number;

  constructor(private readonly pile: Pile) {
    this.offsetDiv = pile.segmentSize / 8;
  }

  /**
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER (slow path only), PILE_CLOSED
   */
  locate(ptr: number): void {
    if (this.fast) {
      const off8 = ptr % this.offsetDiv;
      const seg = ((ptr - off8) / this.offsetDiv) % SEGMENT_DIV;
      const b = this.bufs[seg];
      if (b !== undefined) {
        this.buf = b;
        this.view = this.views[seg]!;
        this.off = off8 * 8 + RAW_PAYLOAD;
        return;
      }
      const rb = this.pile.rawBuffer(ptr as PilePointer);
      const ab = rb.buffer as ArrayBuffer;
      if (ab.byteLength === this.pile.segmentSize && rb.byteOffset === off8 * 8 + RAW_PAYLOAD) {
        const whole = Buffer.from(ab, 0, ab.byteLength);
        this.bufs[seg] = whole;
        this.views[seg] = new DataView(ab, 0, ab.byteLength);
        this.buf = whole;
        this.view = this.views[seg]!;
        this.off = rb.byteOffset;
        return;
      }
      this.fast = false;
      this.bufs = [];
      this.views = [];
    }
    const rb = this.pile.rawBuffer(ptr as PilePointer);
    this.buf = rb;
    this.view = new DataView(rb.buffer, rb.byteOffset, rb.length);
    this.off = 0;
  }

  /** Drops every reference to the pile's memory (the core unmaps a segment when its Buffers are collected). */
  release(): void {
    this.bufs = [];
    this.views = [];
    this.buf = undefined as unknown as Buffer;
    this.view = undefined as unknown as DataView;
  }
}
