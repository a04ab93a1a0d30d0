import { MARK_CLEAN, MARK_WHOLE, type Allocator } from './Allocator';
import { NUM_CLASSES } from './SizeClass';
import { ensureRows } from './AllocatorRows';
import { R_ALLOC, R_INT, R_LINK, R_OBJ, R_SPAN, R_UTIL, ROW, foldTail } from './SegmentRows';

// The allocator's side of a checkpoint (see docs/format.md): the state a checkpoint (or a clean
// close, which checkpoints) saves besides the segment rows, its restore, and the dirty marks it clears.

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

/** A checkpoint (sequence number `seq`) saved the state of now and cleared the marks in pile.meta. */
export function checkpointed(alloc: Allocator, seq: number): void {
  alloc.ckptSeq = seq;
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

/** Slots of a checkpoint's state (pile.meta, CKP4): the tail; each segment's lists and counters are in its row. */
export const CHECKPOINT_FIELDS = ['tailAddr', 'tailEnd', 'tailGen'] as const;

/** The checkpoint's state of now (see CHECKPOINT_FIELDS). */
export function checkpointState(alloc: Allocator): Float64Array {
  return Float64Array.from(CHECKPOINT_FIELDS, (f) => alloc[f]);
}

/** Takes the tail from a checkpoint's state; false if it does not fit this build (then the caller rebuilds). */
export function restoreTail(alloc: Allocator, s: Float64Array): boolean {
  if (s.length !== CHECKPOINT_FIELDS.length) return false;
  CHECKPOINT_FIELDS.forEach((f, i) => {
    alloc[f] = s[i]!;
  });
  return true;
}

/** The pile's counters as the sums of its segments' rows. */
export function sumRows(alloc: Allocator): void {
  foldTail(alloc);
  alloc.foldAt[0] = alloc.tailAddr; // every row made anew or taken whole: nothing pending
  const rows = alloc.rows;
  let allocated = 0;
  let span = 0;
  let utilized = 0;
  let objects = 0;
  let links = 0;
  let internal = 0;
  for (let s = 0; s < alloc.segments.length; s++) {
    const r = s * ROW;
    allocated += rows[r + R_ALLOC]!;
    span += rows[r + R_SPAN]!;
    utilized += rows[r + R_UTIL]!;
    objects += rows[r + R_OBJ]!;
    links += rows[r + R_LINK]!;
    internal += rows[r + R_INT]!;
  }
  alloc.allocatedBytes = allocated;
  alloc.freeBytes = span - allocated;
  alloc.utilizedBytes = utilized;
  alloc.objectCount = objects;
  alloc.linkCount = links;
  alloc.internalCount = internal;
}

/**
 * After the rows changed outside this process's allocator (another process's turn, a recovery): which
 * segments have a list of each class, pages populated none.
 */
export function relist(alloc: Allocator): void {
  const n = alloc.segments.length;
  ensureRows(alloc, n);
  alloc.populatedTo = alloc.populateMark = 0;
  alloc.nonEmpty.fill(0);
  alloc.nonEmptyClasses = 0;
  alloc.segBits.fill(0);
  alloc.classSegs.fill(0);
  const rows = alloc.rows;
  for (let s = 0; s < n; s++) {
    const r = s * ROW;
    for (let c = 0; c < NUM_CLASSES; c++) if (rows[r + c] !== 0) alloc.listed(c, s);
  }
}
