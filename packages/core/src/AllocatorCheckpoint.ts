import { MARK_CLEAN, MARK_WHOLE, NUM_CLASSES, type Allocator } from './Allocator';

// The allocator's side of a checkpoint (see docs/format.md): the state a checkpoint or a clean
// close saves, its restore, and the dirty marks a checkpoint clears.

/** Counters the allocator keeps exact; the pile adds the per-kind ones. */
export const STAT_FIELDS = [
  'allocatedBytes',
  'freeBytes',
  'utilizedBytes',
  'objectCount',
  'linkCount',
  'internalCount',
  'tailAddr',
  'tailEnd',
  'tailGen',
] as const;

/** Marks every segment whole (one write to pile.meta), before a walk that may write into any of them. */
export function markAll(alloc: Allocator): void {
  const n = Math.min(alloc.ckptSegCount, alloc.segments.length);
  let any = false;
  for (let i = 0; i < n; i++) if (alloc.marks[i] !== MARK_WHOLE) any = true;
  if (!any) return;
  alloc.onMarkAll(n);
  alloc.marks.fill(MARK_WHOLE, 0, n);
}

/** A checkpoint saved the state of now (snapshot()) and cleared the marks in pile.meta. */
export function checkpointed(alloc: Allocator): void {
  alloc.marks.fill(MARK_CLEAN);
  alloc.ckptSegCount = alloc.segments.length;
  if (alloc.tailAddr !== 0) {
    alloc.ckptTailSeg = alloc.fmt.segmentOf(alloc.tailAddr);
    alloc.ckptTailOff = alloc.tailAddr - alloc.ckptTailSeg * alloc.segmentSize;
  } else {
    alloc.ckptTailSeg = -1;
    alloc.ckptTailOff = 0;
  }
  alloc.sinceCheckpoint = 0;
}

/** Allocator state for a clean close: counters then list heads. */
export function snapshot(alloc: Allocator): Float64Array {
  const out = new Float64Array(STAT_FIELDS.length + NUM_CLASSES);
  STAT_FIELDS.forEach((f, i) => {
    out[i] = alloc[f];
  });
  out.set(alloc.heads, STAT_FIELDS.length);
  return out;
}

/** Restores a snapshot; false if it does not fit this build (then the caller rebuilds). */
export function restore(alloc: Allocator, s: Float64Array): boolean {
  if (s.length !== STAT_FIELDS.length + NUM_CLASSES) return false;
  STAT_FIELDS.forEach((f, i) => {
    alloc[f] = s[i]!;
  });
  alloc.heads.set(s.subarray(STAT_FIELDS.length));
  relist(alloc);
  return true;
}

/** After the heads changed outside this process's allocator: which classes have a free list, pages populated none. */
export function relist(alloc: Allocator): void {
  alloc.populatedTo = alloc.populateMark = 0;
  alloc.nonEmpty.fill(0);
  alloc.nonEmptyClasses = 0;
  for (let c = 0; c < NUM_CLASSES; c++) {
    if (alloc.heads[c] !== 0) {
      alloc.nonEmpty[c >>> 5]! |= 1 << (c & 31);
      alloc.nonEmptyClasses++;
    }
  }
}
