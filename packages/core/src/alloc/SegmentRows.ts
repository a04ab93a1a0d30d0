// The allocator state of one segment (pile format 4, docs/format.md "Segment rows"): the heads of its
// free lists by size class, then its counters, as f64 slots of one row. A segment's free lists only
// ever link blocks of that segment, so its row is correct as long as the segment is not written:
// a checkpoint saves the rows of the segments written since the one before, and recovery takes
// every other segment's row from pile.meta and rebuilds the written ones by walking them alone.

import { faultPoints } from '../recovery/FaultPoints';
import type { UndoLog } from '../recovery/UndoLog';

/** Bytes of its blocks in use or reserved; the slots before it are the list heads of the size classes (Allocator checks that they fit). */
export const R_ALLOC = 212;
/** Bytes of its blocks walked (used, reserved and free): its free bytes are R_SPAN - R_ALLOC. */
export const R_SPAN = 213;
/** Bytes of the payloads of its used blocks. */
export const R_UTIL = 214;
/** Records, links and internal blocks (catalogs, journals) among its used blocks (bodies are none). */
export const R_OBJ = 215;
export const R_LINK = 216;
export const R_INT = 217;
/** The record counters R_UTIL, R_OBJ, R_LINK and R_INT: this many slots from R_UTIL on (logged together, UndoLog.rows). */
export const R_COUNTERS = 4;
/** f64 slots per row (1,792 bytes; slots 218-223 unused). */
export const ROW = 224;

/**
 * What an append to the tail's segment adds to the counters (block bytes cut, payload bytes, records),
 * kept in JS fields of their own (Allocator's pend*) instead of that segment's row and the pile's
 * counters: appending, the hottest write, then updates two fields per block where format 4 had it
 * update a row beside the pile's counters (docs/benchmarks.md). Other writes update rows and
 * the pile's counters directly (a delta is a delta wherever it is kept). Rows and the pile's counters
 * are read (stats, verify, a checkpoint, the writer turn's release, the merge walk's test) or
 * overwritten (recovery, rebuild, a new tail segment, the sums) only after foldTail() added them in.
 */
export interface TailCounts {
  rows: Float64Array<ArrayBufferLike>;
  /** The segment they belong to; -1: none (all zero). */
  pendSeg: number;
  pendAlloc: number;
  pendUtil: number;
  pendObj: number;
  allocatedBytes: number;
  freeBytes: number;
  utilizedBytes: number;
  objectCount: number;
  tailAddr: number;
  /**
   * [0]: the tail at the last fold that moved counters or started gathering them (pile.coord's FOLD_TAIL for a shared
   * pile): the blocks from it to the tail were cut since, and are counted in the pending counters, not in the row,
   * whose other blocks it counts exactly (a write into the segment that is not a cut folds first: Allocator.touch).
   * So a repair after a death rescans only from there (HolderRepair). Kept at or below the tail when the tail moves
   * down; set where rows are made anew (sumRows) or a segment becomes the tail. A fold with nothing pending and nothing
   * to gather leaves it: it runs outside the writer turn too (stats), where this process's tail may be stale.
   */
  foldAt: Float64Array<ArrayBufferLike>;
  /** The writer turn's stamps of the segments it writes, and its number (Allocator.touched, Allocator.epoch). */
  touched: Uint32Array<ArrayBufferLike>;
  epoch: number;
  /** Where a fold logs the old foldAt and row slots it changes (Allocator.undo). */
  undo: UndoLog;
}

/** Adds the tail segment's pending counters to its row and the pile's; from now on they gather for segment `next` (-1: none). */
export function foldTail(a: TailCounts, next = -1): void {
  const s = a.pendSeg;
  if (s >= 0) {
    // foldAt moves before the row is added to: a holder that dies between the two left a row that
    // lacks what foldAt no longer covers. Stamped with the turn meanwhile, the segment is then
    // rescanned whole by the repair (HolderRepair); the stamp it had comes back once the row is whole.
    const touched = a.touched;
    const was = touched[s]!;
    touched[s] = a.epoch;
    const undo = a.undo;
    const r = s * ROW;
    if (undo.n >= 0) {
      undo.fold();
      undo.row(r + R_ALLOC);
      undo.row(r + R_UTIL);
      undo.row(r + R_OBJ);
    }
    a.foldAt[0] = a.tailAddr;
    faultPoints.hit?.('tail-folding');
    const rows = a.rows;
    rows[r + R_ALLOC]! += a.pendAlloc;
    rows[r + R_UTIL]! += a.pendUtil;
    rows[r + R_OBJ]! += a.pendObj;
    a.allocatedBytes += a.pendAlloc;
    a.freeBytes -= a.pendAlloc;
    a.utilizedBytes += a.pendUtil;
    a.objectCount += a.pendObj;
    touched[s] = was;
  } else if (next >= 0) {
    a.undo.fold();
    a.foldAt[0] = a.tailAddr;
  }
  a.pendAlloc = a.pendUtil = a.pendObj = 0;
  a.pendSeg = next;
}
