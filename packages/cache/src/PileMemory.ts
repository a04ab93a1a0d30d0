import type { Pile, PileError, PilePointer } from '@pile/core';

/**
 * Reads sealed raw records in place without allocating: `locate(ptr)` sets `buf`/`view`/`off`
 * to the whole segment holding the record and the offset of its bytes, through the core's
 * `rawSeek` (which checks the pointer's tag and the block's kind like `rawBuffer`).
 */
export class PileMemory {
  buf!: Buffer;
  view!: DataView;
  off = 0;
  /** Byte length of the located record (bounded by its block by the core's check). */
  len = 0;

  constructor(private readonly pile: Pile) {}

  /**
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED
   */
  locate(ptr: number): void {
    const pile = this.pile;
    this.off = pile.rawSeek(ptr as PilePointer);
    this.buf = pile.rawSegment;
    this.view = pile.rawView;
    this.len = pile.rawLength;
  }

  /**
   * Whether the record of the last {@link locate} was not changed since it was located (the core's
   * check of a raw read, Pile.rawSettled): always true for a writable pile.
   */
  settled(): boolean {
    return this.pile.rawSettled();
  }

  /** The record's checksum check (Pile.checkRecord): a PILE_CORRUPT error, or undefined when it holds. */
  fault(ptr: number): PileError | undefined {
    return this.pile.checkRecord(ptr as PilePointer);
  }

  /** Drops every reference to the pile's memory (after close the core has given it back; these views would read zeros). */
  release(): void {
    this.buf = undefined as unknown as Buffer;
    this.view = undefined as unknown as DataView;
  }
}
