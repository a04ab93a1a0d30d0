import type { Allocator } from '../alloc/Allocator';
import { uncountUsed } from '../alloc/AllocatorRows';
import { BLOCK_HEADER_SIZE, FLAG_BODY, KIND_JOURNAL, KIND_LINK, STATE_USED, blockSizeFor, flagsOf, stateOf } from '../storage/BlockFormat';
import { beginChange, endChange } from '../concurrency/ChangeSeq';
import { faultPoints } from '../recovery/FaultPoints';
import type { Segment } from '../storage/Segment';
import { foldTail } from '../alloc/SegmentRows';
import type { ValueEncoding } from './ValueEncoding';

/** Journal op: copy the journal's payload over the target block. */
const JOURNAL_INPLACE = 1;
/** Journal op: the target (a record's head) becomes a link to a new body. */
const JOURNAL_LINK = 2;
/** Journal payload: u32 op, u32 kind, f64 target, f64 new body, f64 old body, then the new payload. */
const JOURNAL_PREFIX = 32;

/** What set()'s journal needs of the pile (the RecordStore). */
export interface JournalHost {
  readonly alloc: Allocator;
  readonly values: ValueEncoding;
  /** Segment and offset of the block at `addr`. */
  seat(addr: number): { seg: Segment; off: number };
  /** Writes length, checksum, then the USED state word of the block at `off` of `seg`; returns its generation. */
  commit(seg: Segment, off: number, kind: number, flags: number, length: number): number;
  /** Frees the block at `addr`. */
  release(addr: number): void;
}

/**
 * set(): the value prepared in `host.values` replaces the record whose head block is at `hOff`
 * of `hSeg` and whose data is at `dOff` of `dSeg` (the same block unless linked; both checked
 * by the caller). Atomic across a crash: a journal record holds the new value (or the new link)
 * and is committed before anything of the record changes; recovery replays a committed one.
 */
export function replaceRecord(host: JournalHost, hSeg: Segment, hOff: number, dSeg: Segment, dOff: number): void {
  // Logged (UndoLog.ts) when it fits the record's block: a repair after a death inside it puts back
  // the record, the journal's block and the rows as they were, and rescans from the tail's last fold only.
  const undo = host.alloc.undo;
  undo.armed++;
  try {
    replace(host, hSeg, hOff, dSeg, dOff);
  } finally {
    undo.armed--;
  }
}

function replace(host: JournalHost, hSeg: Segment, hOff: number, dSeg: Segment, dOff: number): void {
  const alloc = host.alloc;
  const values = host.values;
  const linked = hSeg !== dSeg || hOff !== dOff;
  // The journal may rewrite both blocks: their segments are marked before it is written, so that
  // recovery, which replays it, scans them too.
  alloc.touch(hSeg.index, hOff);
  if (linked) alloc.touch(dSeg.index, dOff);
  const segmentSize = alloc.segmentSize;
  const hAddr = hSeg.index * segmentSize + hOff;
  const dAddr = dSeg.index * segmentSize + dOff;
  const kind = values.kind;
  const len = values.len;
  // A value the log has no room for (with the journal's and the rows' entries) is not logged.
  if ((len >>> 3) + 32 > alloc.undo.capacity) alloc.undo.distrust();
  let target: number;
  let oldBody = 0;
  if (len <= hSeg.u32[hOff >>> 2]! - BLOCK_HEADER_SIZE) {
    target = hAddr;
    if (linked) oldBody = dAddr;
  } else if (linked && len <= dSeg.u32[dOff >>> 2]! - BLOCK_HEADER_SIZE) {
    target = dAddr;
  } else {
    target = 0;
  }
  if (target !== 0) {
    // Journal = the whole new payload; replayed by recovery if the copy below is torn.
    const jAddr = alloc.alloc(blockSizeFor(JOURNAL_PREFIX + len));
    const j = host.seat(jAddr);
    const p = j.off + BLOCK_HEADER_SIZE;
    try {
      values.write(j.seg, p + JOURNAL_PREFIX);
    } catch (err) {
      alloc.free(jAddr);
      throw err;
    }
    writeJournalHead(j.seg, p, JOURNAL_INPLACE, kind, target, 0, oldBody);
    commitJournal(host, j.seg, j.off, JOURNAL_PREFIX + len, jAddr);
    return;
  }
  // Grown past both blocks: new body, then the head becomes a link to it. Not logged: its body is
  // named in PENDING_BODY, and the repair rescans what the turn stamped.
  alloc.undo.distrust();
  const bAddr = alloc.alloc(blockSizeFor(len));
  const b = host.seat(bAddr);
  try {
    values.write(b.seg, b.off + BLOCK_HEADER_SIZE);
  } catch (err) {
    alloc.free(bAddr);
    throw err;
  }
  // Named until the journal links it: a repair after this holder's death frees it if nothing
  // links it, without looking for links in segments this holder did not write (see HolderRepair).
  alloc.intent[0] = bAddr;
  try {
    host.commit(b.seg, b.off, kind, FLAG_BODY, len);
    const jAddr = alloc.alloc(blockSizeFor(JOURNAL_PREFIX));
    const j = host.seat(jAddr);
    writeJournalHead(j.seg, j.off + BLOCK_HEADER_SIZE, JOURNAL_LINK, KIND_LINK, hAddr, bAddr, linked ? dAddr : 0);
    commitJournal(host, j.seg, j.off, JOURNAL_PREFIX, jAddr);
  } finally {
    alloc.intent[0] = 0;
  }
}

/** Commits the journal record written at `off` of `seg`, carries it out and frees it. */
function commitJournal(host: JournalHost, seg: Segment, off: number, length: number, addr: number): void {
  faultPoints.hit?.('journal-written');
  // Put back by a repair as it was cut (RESERVED): the rescan from the fold frees it, nothing replays it.
  host.alloc.undo.words(seg.u32, seg.index, off, 2);
  host.commit(seg, off, KIND_JOURNAL, 0, length);
  faultPoints.hit?.('journal-committed');
  applyJournal(host, seg, off);
  host.release(addr);
}

function writeJournalHead(seg: Segment, p: number, op: number, kind: number, target: number, body: number, oldBody: number): void {
  seg.u32[p >>> 2] = op;
  seg.u32[(p >>> 2) + 1] = kind;
  seg.f64[(p + 8) >>> 3] = target;
  seg.f64[(p + 16) >>> 3] = body;
  seg.f64[(p + 24) >>> 3] = oldBody;
}

/** Carries out the committed journal record at `jOff` of `jSeg`. Idempotent, so recovery may run it again. */
export function applyJournal(host: JournalHost, jSeg: Segment, jOff: number): void {
  const alloc = host.alloc;
  const p = jOff + BLOCK_HEADER_SIZE;
  const op = jSeg.u32[p >>> 2]!;
  const kind = jSeg.u32[(p >>> 2) + 1]!;
  const t = host.seat(jSeg.f64[(p + 8) >>> 3]!);
  const body = jSeg.f64[(p + 16) >>> 3]!;
  const oldBody = jSeg.f64[(p + 24) >>> 3]!;
  const tw = t.seg.u32[(t.off >>> 2) + 1]!;
  const tFlags = flagsOf(tw) & FLAG_BODY;
  const wasUsed = stateOf(tw) === STATE_USED;
  // The target lies below foldAt, so its counts are its row's, which a repair takes as they stand. A
  // cut of this set (its body or journal from the tail) may have made its segment the pending one
  // since replaceRecord's touch: counted now, it would go to the pending counters and be lost with a
  // holder killed before their next fold, its row a record short (segment stamped by an older write).
  if (t.seg.index === alloc.pendSeg) foldTail(alloc);
  if (wasUsed) uncountUsed(alloc, tw, t.seg.u32[(t.off >>> 2) + 2]!, t.seg.index);
  const tp = t.off + BLOCK_HEADER_SIZE;
  const len = op === JOURNAL_INPLACE ? jSeg.u32[(jOff >>> 2) + 2]! - JOURNAL_PREFIX : 8;
  // The old value and header, for a repair that puts the record back (a value past the log's room marks it not trusted).
  alloc.undo.words(t.seg.u32, t.seg.index, t.off, (BLOCK_HEADER_SIZE + len + 7) >>> 3);
  // The target is changed in place: readers of other processes may be reading it (ChangeSeq.ts).
  const began = beginChange(t.seg.u32);
  try {
    if (op === JOURNAL_INPLACE) {
      jSeg.buf.copy(t.seg.buf, tp, p + JOURNAL_PREFIX, p + JOURNAL_PREFIX + len);
    } else {
      t.seg.f64[tp >>> 3] = body;
    }
    host.commit(t.seg, t.off, kind, tFlags, len);
  } finally {
    endChange(t.seg.u32, began);
  }
  // release() marks the old body's segment itself.
  if (oldBody !== 0) {
    const o = host.seat(oldBody);
    const ow = o.seg.u32[(o.off >>> 2) + 1]!;
    if (stateOf(ow) === STATE_USED && (flagsOf(ow) & FLAG_BODY) !== 0) host.release(oldBody);
  }
}
