import type { Allocator } from './Allocator';
import { NUM_CLASSES, sizeClass } from './SizeClass';
import { MIN_BLOCK_SIZE, SEGMENT_HEADER_SIZE, STATE_DAMAGED, STATE_FREE, STATE_USED, stateOf } from '../storage/BlockFormat';
import { markAll, relist, sumRows } from './AllocatorCheckpoint';
import { countUsed, ensureRows } from './AllocatorRows';
import { R_ALLOC, R_SPAN, ROW, foldTail } from './SegmentRows';
import { trustedFreeSize, trustedGen } from '../storage/BlockTrust';
import { faultPoints } from '../recovery/FaultPoints';
import { isRetired } from './RetiredList';
import type { Segment, SegmentWindow } from '../storage/Segment';

// The allocator's walks over the blocks of its segments: rebuilding the free lists and counters
// (after recovery, for compact(), and as alloc()'s merge walk, which the allocator reaches through
// the callback its owner gives it), counting only, and the checks of verify(). Cold code, kept out
// of the allocator class so that its hot methods stay small.

/**
 * Rebuilds free lists and counters by walking every block of every segment, merging runs
 * of free blocks. Used after recovery and when a clean state is missing.
 * `onSegment` reports progress.
 */
export function rebuild(alloc: Allocator, onSegment?: (done: number) => void): void {
  faultPoints.hit?.('allocator-walk');
  alloc.undo.distrust(); // not logged (UndoLog.ts): a repair after a death during it rescans every segment stamped
  markAll(alloc);
  // Every row is rewritten: a repair after a death during this walk rescans every segment.
  alloc.touched.fill(alloc.epoch, 0, alloc.segments.length);
  ensureRows(alloc, alloc.segments.length);
  foldTail(alloc); // its row is counted again below
  alloc.rows.fill(0, 0, alloc.segments.length * ROW);
  relist(alloc);
  alloc.allocatedBytes = alloc.freeBytes = alloc.utilizedBytes = 0;
  alloc.objectCount = alloc.linkCount = alloc.internalCount = 0;
  alloc.tailAddr = alloc.tailEnd = alloc.tailGen = 0;
  alloc.populatedTo = alloc.populateMark = 0;
  alloc.freedSinceWalk = 0;
  for (const s of alloc.segments) {
    walkSegment(alloc, s.use(), SEGMENT_HEADER_SIZE);
    faultPoints.hit?.('segment-walked');
    onSegment?.(s.index + 1);
  }
  sumRows(alloc);
}

/** Counts the blocks of `seg` from `from` on and merges its free runs into the lists (see rebuild). */
function walkSegment(alloc: Allocator, seg: Segment, from: number): void {
  const segSize = alloc.segmentSize;
  const u32 = seg.u32;
  let off = from;
  let runStart = -1;
  let runGen = 0;
  const runInner: number[] = [];
  const closeRun = (end: number): void => {
    if (runStart < 0) return;
    closeFreeRun(alloc, seg, runStart, end, runGen, runInner, 0, runInner.length);
    runInner.length = 0;
    runStart = -1;
  };
  while (off < segSize) {
    let size = u32[off >>> 2]!;
    const w = u32[(off >>> 2) + 1]!;
    const state = stateOf(w);
    // Quarantined by recovery: the rest of the segment stays untouched.
    if (!alloc.saneSize(off, size) || state === STATE_DAMAGED) break;
    const retired = alloc.keepRetired && isRetired(w);
    if (state === STATE_USED || retired) {
      closeRun(off);
      alloc.allocatedBytes += size;
      alloc.rows[seg.index * ROW + R_ALLOC]! += size;
      alloc.rows[seg.index * ROW + R_SPAN]! += size;
      // A retired block stays allocated, not counted as a record, until the RetiredList frees it.
      if (!retired) countUsed(alloc, w, u32[(off >>> 2) + 2]!, seg.index);
    } else {
      // A free or reserved block is merged by the size its check words (or the next header)
      // confirm; a damaged one ends the walk, and the rest of the segment stays untouched.
      size = trustedFreeSize(alloc, seg, off);
      if (size < 0) break;
      const g = trustedGen(alloc, seg, off);
      if (runStart < 0) {
        runStart = off;
        runGen = g;
      } else {
        runInner.push(off);
        if (g > runGen) runGen = g;
      }
    }
    off += size;
  }
  closeRun(off < segSize ? off : segSize);
}

/**
 * The free run from `start` to `end` of `seg` that a walk found becomes one free block: listed, or
 * the tail when it reaches the last segment's end. `inner[from..to)` are the offsets of the blocks
 * merged into it after its first, whose headers no longer start blocks. `win`: the window of
 * `seg` that the walk read the run through (see Segment.window), which then holds its headers.
 */
export function closeFreeRun(
  alloc: Allocator,
  seg: Segment,
  start: number,
  end: number,
  gen: number,
  inner: ArrayLike<number>,
  from: number,
  to: number,
  win?: SegmentWindow,
): void {
  const segSize = alloc.segmentSize;
  // Through the window the walk read the run by (Segment.window), else the segment's own views.
  const u32 = win?.u32 ?? seg.use().u32;
  const base = win?.base ?? 0;
  const size = end - start;
  alloc.writeFree(u32, (start - base) >>> 2, size, gen);
  // The headers of the blocks merged into the run no longer start blocks (see Allocator.free).
  for (let i = from; i < to; i++) u32[((inner[i]! - base) >>> 2) + 2] = 0;
  alloc.freeBytes += size;
  alloc.rows[seg.index * ROW + R_SPAN]! += size;
  if (seg.index === alloc.segments.length - 1 && end === segSize) {
    alloc.tailAddr = seg.index * segSize + start;
    alloc.tailEnd = (seg.index + 1) * segSize;
    alloc.tailGen = gen;
  } else alloc.push(seg.index * segSize + start, size, seg.use(), start);
}

/** Counters only, by a walk that writes nothing (read-only piles). */
export function countOnly(alloc: Allocator): void {
  faultPoints.hit?.('allocator-walk');
  alloc.allocatedBytes = alloc.freeBytes = alloc.utilizedBytes = 0;
  alloc.objectCount = alloc.linkCount = alloc.internalCount = 0;
  ensureRows(alloc, alloc.segments.length);
  for (const s of alloc.segments) {
    const seg = s.use();
    let off = SEGMENT_HEADER_SIZE;
    while (off < alloc.segmentSize) {
      const size = seg.u32[off >>> 2]!;
      const w = seg.u32[(off >>> 2) + 1]!;
      if (!alloc.saneSize(off, size) || stateOf(w) === STATE_DAMAGED) break;
      if (stateOf(w) === STATE_USED) {
        alloc.allocatedBytes += size;
        countUsed(alloc, w, seg.u32[(off >>> 2) + 2]!, seg.index);
      } else alloc.freeBytes += size;
      off += size;
    }
  }
}

/**
 * Recovery from a checkpoint: the rows of the segments not in `regions` and the tail were restored
 * from it, and `regions` (segment, offset to scan from) hold everything written since. A region
 * from a segment's first block has its row rebuilt from nothing; one from the checkpoint's tail adds
 * to the row the checkpoint saved, and drops the tail (the walk finds its blocks). Each region is
 * walked like rebuild() walks a segment, adding its blocks to its row's counters and its free runs
 * to its lists (the run reaching the last segment's end becomes the tail); the pile's counters are
 * the rows' sums.
 */
export function rebuildRegions(alloc: Allocator, regions: ReadonlyArray<readonly [number, number]>, onRegion?: () => void): void {
  faultPoints.hit?.('allocator-walk');
  beginRegions(alloc, regions);
  for (const [segIdx, from] of regions) {
    walkSegment(alloc, alloc.segments[segIdx]!.use(), from);
    faultPoints.hit?.('region-walked');
    onRegion?.();
  }
  endRegions(alloc);
}

/**
 * What a rebuild from a checkpoint does before it walks `regions` (see rebuildRegions): the rows of
 * regions from a segment's first block emptied, the tail dropped when a region covers it (the walk
 * finds it again) or listed. A clean segment's lists need no check: no recovery writes into them
 * but by listing the tail, which marks the segment.
 */
export function beginRegions(alloc: Allocator, regions: ReadonlyArray<readonly [number, number]>): void {
  alloc.populatedTo = alloc.populateMark = 0;
  alloc.freedSinceWalk = 0;
  foldTail(alloc);
  for (const [s, from] of regions) if (from === SEGMENT_HEADER_SIZE) alloc.rows.fill(0, s * ROW, (s + 1) * ROW);
  relist(alloc);
  if (alloc.tailAddr !== 0) {
    const ts = alloc.fmt.segmentOf(alloc.tailAddr);
    const region = regions.find(([s]) => s === ts);
    if (region !== undefined) {
      // From the tail on: the checkpoint's row counted the tail as free, and the walk counts it again.
      if (region[1] !== SEGMENT_HEADER_SIZE) alloc.rows[ts * ROW + R_SPAN]! -= alloc.tailEnd - alloc.tailAddr;
      alloc.tailAddr = alloc.tailEnd = alloc.tailGen = 0;
    } else if (ts < alloc.segments.length - 1) {
      // A segment was added and the crash came before the old tail was listed: list it now,
      // since the new segment's free end becomes the tail.
      alloc.retireTail();
    }
  }
}

/** After the walk of the regions: the pile's counters from the rows. */
export function endRegions(alloc: Allocator): void {
  sumRows(alloc);
}

/** The largest generation of any block in `seg` (which compact() is about to release). */
export function maxGen(alloc: Allocator, seg: Segment): number {
  const u32 = seg.u32;
  let max = 0;
  for (let off = SEGMENT_HEADER_SIZE; off < alloc.segmentSize;) {
    const size = u32[off >>> 2]!;
    const g = trustedGen(alloc, seg, off);
    if (g > max) max = g;
    if (!alloc.saneSize(off, size)) break;
    off += size;
  }
  return max;
}

/**
 * Walks every free list as verify() does: entries that are not free blocks of their class and
 * segment, lists that loop, and back links that disagree count as errors. `blocks`: the entries found, to be
 * compared with the free blocks a walk of the segments finds. Reads only, never repairs.
 */
export function checkFreeLists(alloc: Allocator): { errors: number; blocks: number } {
  let errors = 0;
  let blocks = 0;
  const limit = alloc.segmentSize / MIN_BLOCK_SIZE + 1;
  for (let s = 0; s < alloc.segments.length; s++) {
    const seg = alloc.segments[s]!.use();
    for (let c = 0; c < NUM_CLASSES; c++) {
      let a = alloc.rows[s * ROW + c]!;
      let prev = 0;
      let steps = 0;
      while (a !== 0) {
        const off = a - s * alloc.segmentSize;
        // A segment's lists link only its own blocks.
        if (++steps > limit || alloc.fmt.segmentOf(a) !== s || off < SEGMENT_HEADER_SIZE || (off & 7) !== 0 || off >= alloc.segmentSize) {
          errors++;
          break;
        }
        const size = seg.u32[off >>> 2]!;
        if (stateOf(seg.u32[(off >>> 2) + 1]!) !== STATE_FREE || !alloc.saneSize(off, size) || sizeClass(size) !== c) {
          errors++;
          break;
        }
        if (seg.f64[(off + 24) >>> 3] !== prev) errors++;
        blocks++;
        prev = a;
        a = seg.f64[(off + 16) >>> 3]!;
      }
    }
  }
  return { errors, blocks };
}
