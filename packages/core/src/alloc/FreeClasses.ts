import type { Segment } from '../storage/Segment';

// Two lookups of the allocator's bits of free lists by size class and segment, and its faulting in
// of pages ahead of the tail: plain functions of the allocator's fields (Allocator.ts stays within
// its size), inlined by TurboFan as its methods were.

/** Bytes of pages faulted in ahead of the tail per request (see Allocator.populatedTo). */
const POPULATE_CHUNK = 1 << 20;

/** The allocator fields these read and write (Allocator's). */
export interface FreeBits {
  readonly nonEmpty: Uint32Array;
  readonly segBits: Uint32Array;
  readonly segWords: number;
  readonly segmentSize: number;
  readonly tailAddr: number;
  readonly tailEnd: number;
  populatedTo: number;
  populateMark: number;
}

/** The lowest segment with a list of class `c`, which must have one (classSegs[c] > 0). */
export function firstSeg(a: FreeBits, c: number): number {
  const bits = a.segBits;
  const w0 = c * a.segWords;
  let w = w0;
  while (bits[w] === 0) w++;
  const b = bits[w]!;
  return ((w - w0) << 5) + (31 - Math.clz32(b & -b));
}

/** The lowest class from `c` on that some segment has a list of; -1: none. */
export function nextNonEmpty(a: FreeBits, c: number): number {
  const nonEmpty = a.nonEmpty;
  for (let w = c >>> 5; w < nonEmpty.length; w++) {
    let bits = nonEmpty[w]!;
    if (w === c >>> 5) bits &= ~((1 << (c & 31)) - 1) | 0;
    if (bits !== 0) return (w << 5) + (31 - Math.clz32(bits & -bits));
  }
  return -1;
}

/** Asks for the pages from the block just cut at `addr` to two chunks past the tail (see Allocator.populatedTo). */
export function populateAhead(a: FreeBits, seg: Segment, segIdx: number, addr: number): void {
  if (a.populatedTo === 0) {
    a.populatedTo = addr;
    a.populateMark = addr + POPULATE_CHUNK;
    return;
  }
  const base = segIdx * a.segmentSize;
  const from = Math.max(a.populatedTo, addr);
  const to = Math.min(a.tailEnd, a.tailAddr + 2 * POPULATE_CHUNK);
  if (to > from) seg.populate(from - base, to - base);
  a.populatedTo = to;
  a.populateMark = to - POPULATE_CHUNK;
}
