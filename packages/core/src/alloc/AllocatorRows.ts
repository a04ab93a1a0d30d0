import type { Allocator } from './Allocator';
import type { UndoLog } from '../recovery/UndoLog';
import { NUM_CLASSES } from './SizeClass';
import { FLAG_BODY, KIND_CATALOG, KIND_JOURNAL, KIND_LINK, flagsOf, kindOf } from '../storage/BlockFormat';
import { R_COUNTERS, R_INT, R_LINK, R_OBJ, R_UTIL, ROW, foldTail } from './SegmentRows';

// The allocator's segment rows (SegmentRows.ts): their room, and the record counters, kept for the
// pile and for the segment of each block, called once per put, set and delete after the allocator's own work.

/**
 * Adds a committed block of segment `segIdx` to the record counters (allocatedBytes is kept by alloc and free): in the
 * tail segment's pending counters (SegmentRows' foldTail) when it is that segment, else in its row and the pile's.
 */
export function countUsed(a: Allocator, w: number, length: number, segIdx: number): void {
  const r = segIdx * ROW;
  const kind = kindOf(w);
  const internal = kind === KIND_CATALOG || kind === KIND_JOURNAL;
  if (internal && segIdx === a.pendSeg) countInternalInTail(a, segIdx);
  // Tested again, not kept from the line above: countInternalInTail folds, and the segment is pending no more.
  const pend = segIdx === a.pendSeg;
  // A record put at the tail changes no row (a link still does): it logs nothing.
  const undo = a.undo;
  if (undo.n >= 0 && (!pend || kind === KIND_LINK)) logCounters(undo, r);
  if (pend) a.pendUtil += length;
  else {
    a.utilizedBytes += length;
    a.rows[r + R_UTIL]! += length;
  }
  if (flagsOf(w) & FLAG_BODY) return;
  if (internal) {
    a.internalCount++;
    a.rows[r + R_INT]!++;
  } else {
    if (pend) a.pendObj++;
    else {
      a.objectCount++;
      a.rows[r + R_OBJ]!++;
    }
    if (kind === KIND_LINK) {
      a.linkCount++;
      a.rows[r + R_LINK]!++;
    }
  }
}

/**
 * Logs the record counters of the row from slot `r` on (UndoLog.ts), before they change. Called only
 * while a log is kept: an in-memory pile never makes the call, and TurboFan, which does not inline a
 * call never made, keeps the counting as small as before the log (docs/benchmarks.md).
 */
function logCounters(undo: UndoLog, r: number): void {
  undo.rows(r + R_UTIL, R_COUNTERS);
}

/**
 * A journal or catalog block cut from the tail since the last fold: internal blocks have no pending
 * counter, and counted in the row above foldAt they were counted twice by a repair's rescan from
 * there (a catalog) or kept after its replay freed them (a journal). So the tail's counters are
 * folded first (the block lies below foldAt then) and the segment stamped with this write, which
 * makes a repair after a death in it rescan the segment whole: its journal is replayed, and a
 * catalog record no slot names yet is freed.
 */
function countInternalInTail(a: Allocator, segIdx: number): void {
  a.touched[segIdx] = a.epoch;
  foldTail(a);
}

/**
 * countUsed() of a typed record, small enough to be inlined into the typed put: TurboFan's inlining budget must
 * cover the codec and the rest of the put (benchmarks/compare/inlined.sh, docs/benchmarks.md).
 */
export function countUsedTyped(a: Allocator, length: number, segIdx: number): void {
  if (segIdx === a.pendSeg) {
    a.pendUtil += length;
    a.pendObj++;
  } else countTypedInRow(a, length, segIdx);
}

function countTypedInRow(a: Allocator, length: number, segIdx: number): void {
  a.utilizedBytes += length;
  a.objectCount++;
  const r = segIdx * ROW;
  const undo = a.undo;
  if (undo.n >= 0) undo.rows(r + R_UTIL, 2); // R_UTIL and R_OBJ
  a.rows[r + R_UTIL]! += length;
  a.rows[r + R_OBJ]!++;
}

/** Takes a used block of segment `segIdx` out of the record counters (it is being freed or replaced). */
export function uncountUsed(a: Allocator, w: number, length: number, segIdx: number): void {
  a.utilizedBytes -= length;
  const r = segIdx * ROW;
  const undo = a.undo;
  if (undo.n >= 0) logCounters(undo, r);
  a.rows[r + R_UTIL]! -= length;
  const kind = kindOf(w);
  if (flagsOf(w) & FLAG_BODY) return;
  if (kind === KIND_CATALOG || kind === KIND_JOURNAL) {
    a.internalCount--;
    a.rows[r + R_INT]!--;
  } else {
    a.objectCount--;
    a.rows[r + R_OBJ]!--;
    if (kind === KIND_LINK) {
      a.linkCount--;
      a.rows[r + R_LINK]!--;
    }
  }
}

/**
 * Rows (and the bits of segBits) for segments 0..count-1: a pile's own rows grow with its segments; a
 * shared pile's (pile.coord's) hold every segment already, and get disk space for them (onRows).
 */
export function ensureRows(a: Allocator, count: number): void {
  a.onRows(count);
  if (a.rows.length < count * ROW) {
    const rows = new Float64Array(Math.max(count, (2 * a.rows.length) / ROW) * ROW);
    rows.set(a.rows);
    a.rows = rows;
  }
  if (count > a.segWords * 32) {
    // Wider bit rows: each class keeps its bits at the start of its new words.
    const words = Math.max(Math.ceil(count / 32), 2 * a.segWords);
    const bits = new Uint32Array(NUM_CLASSES * words);
    for (let c = 0; c < NUM_CLASSES; c++) bits.set(a.segBits.subarray(c * a.segWords, (c + 1) * a.segWords), c * words);
    a.segBits = bits;
    a.segWords = words;
  }
}
