import { R_ALLOC } from './SegmentRows';

// The allocator's size classes (Allocator.ts), apart so that the walks over free lists need not import the allocator.

/** Exact classes of 8 bytes up to 1 KiB, then four classes per power of two up to 1 GiB. */
export const NUM_CLASSES = 212;
/** A segment row holds a list head per class before its counters (SegmentRows.ts): checked once, when this module loads. */
if (R_ALLOC !== NUM_CLASSES) throw new Error('segment rows do not hold one list head per size class');

/** The class of a free block of `size` bytes. */
export function sizeClass(size: number): number {
  if (size <= 1024) return size >>> 3;
  const lg = 31 - Math.clz32(size);
  return 128 + (lg - 10) * 4 + ((size >>> (lg - 2)) & 3);
}
