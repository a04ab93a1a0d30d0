import { MARK_CLEAN, MARK_WHOLE } from '../alloc/Allocator';
import { CHECKPOINT_FIELDS } from '../alloc/AllocatorCheckpoint';
import { SEGMENT_HEADER_SIZE } from '../storage/BlockFormat';
import { beginChange, endChange } from '../concurrency/ChangeSeq';
import { COORD, UNDO_PLACES, type CoordFile } from '../concurrency/CoordFile';
import { mapCounted, recover } from '../storage/PileFiles';
import { emptyRecoveryReport, type RecoveryReport } from './Recovery';
import type { PileOptions } from '../PileOptions';
import type { RecordStore } from '../records/RecordStore';
import { UndoLog } from './UndoLog';

const REPAIR_FROM = COORD.REPAIR_FROM >>> 2;
const FULL_REPAIR = COORD.FULL_REPAIR >>> 2;
const CKPT_TAIL = CHECKPOINT_FIELDS.indexOf('tailAddr');
const LAST_TAIL = COORD.LAST_TAIL >>> 3;
const UNDO = COORD.UNDO >>> 2;

/**
 * The repair after a holder of the writer turn died, on the same boot (docs/concurrency.md, "A
 * holder's death"): pile.coord and the segment files are the memory every writer worked on in
 * place, so only what the dead holder did since its last complete write can be half done. When
 * that write's undo log is trusted (UndoLog.ts), its stores are put back first and no segment is
 * rescanned for its stamp; otherwise the segments stamped with a turn from COORD.REPAIR_FROM on
 * (the repairs that died since included),
 * and any pile.meta counts past those published, are rescanned whole by recovery's passes, which
 * rebuild their rows; every other row is taken as it is, the tail as the last complete write left
 * it (COORD.LAST_TAIL), the pile's counters summed from the rows. The one body a growing set() may
 * have left unlinked is named in pile.coord (COORD.PENDING_BODY), so no link is looked for
 * elsewhere. The checkpoint's dirty marks stay (a rescanned segment is raised to MARK_WHOLE,
 * durably, before the rescan writes into it): an unclean open, the recovery after a machine
 * crash included, finds what it needs as before. No checkpoint follows.
 *
 * The caller took the published counters into the allocator and mapped the published segments.
 * False, with nothing changed but what the general repair (PileFiles.repairPile) redoes, where
 * this can not be trusted: a repair of that kind died unfinished (COORD.FULL_REPAIR), the dead
 * turn uncounted segments (compact()), or pile.meta has no checkpoint of this layout.
 * @throws PILE_CORRUPT, PILE_IO
 */
export function repairTouched(
  store: RecordStore,
  report: RecoveryReport,
  coord: CoordFile,
  onProgress?: PileOptions['onProgress'],
): boolean {
  const u32 = coord.u32;
  const meta = store.meta!;
  const alloc = store.alloc;
  const published = coord.segmentCount;
  const ck = meta.readCheckpoint();
  const counted = meta.readHeader().segmentCount;
  if (
    u32[FULL_REPAIR] !== 0 ||
    ck === undefined ||
    ck.state.length !== CHECKPOINT_FIELDS.length ||
    counted < published ||
    ck.segmentCount > counted
  )
    return false;
  // The tail as the last complete write left it (WriterTurn.completed): the rows of segments not
  // touched since agree with it.
  const fmt = store.fmt;
  const size = fmt.segmentSize;
  const f64 = coord.f64;
  const tail = f64[LAST_TAIL]!;
  const tailEnd = f64[LAST_TAIL + 1]!;
  const tailSeg = tail !== 0 ? fmt.segmentOf(tail) : -1;
  if (tail !== 0 && (!Number.isSafeInteger(tail) || tailSeg >= counted || tailEnd !== (tailSeg + 1) * size)) return false;
  alloc.tailAddr = tail;
  alloc.tailEnd = tailEnd;
  alloc.tailGen = f64[LAST_TAIL + 2]!;
  const count = mapCounted(store);
  const undone = undoDeadWrite(store, u32);
  // What appends cut since the last fold lies from foldAt to the tail, counted only in the dead
  // process's pending counters: that part of its segment is rescanned, and added to its row
  // (SegmentRows' foldTail). A foldAt that does not lie in the tail's segment at or below the tail
  // (or in any segment when the tail is used up) is not trusted: both segments are rescanned whole.
  const fold = coord.foldTail[0]!;
  const foldSeg = fold !== 0 && Number.isSafeInteger(fold) && fold % 8 === 0 ? fmt.segmentOf(fold) : -1;
  const foldOff = fold - foldSeg * size;
  const foldOk =
    foldSeg >= 0 && foldSeg < counted && foldOff >= SEGMENT_HEADER_SIZE && (tail === 0 || (foldSeg === tailSeg && fold <= tail));
  // The dead turn may have checkpointed: the checkpoint and its marks are pile.meta's.
  const ckTail = ck.state[CKPT_TAIL]!;
  alloc.ckptSeq = ck.seq;
  alloc.ckptSegCount = ck.segmentCount;
  alloc.ckptTailSeg = ckTail !== 0 ? fmt.segmentOf(ckTail) : -1;
  alloc.ckptTailOff = ckTail !== 0 ? ckTail - alloc.ckptTailSeg * fmt.segmentSize : 0;
  alloc.marks.fill(MARK_CLEAN);
  alloc.marks.set(meta.readMarks(ck.segmentCount));
  const from = u32[REPAIR_FROM]!;
  const span = (alloc.epoch - from) >>> 0;
  const touched = alloc.touched;
  const regions: Array<[number, number]> = [];
  for (let i = 0; i < count; i++) {
    const stamped = undone < 0 && (touched[i]! - from) >>> 0 <= span;
    const whole = i >= published || stamped || (!foldOk && (i === tailSeg || i === foldSeg));
    if (!whole) {
      if (foldOk && i === foldSeg) regions.push([i, foldOff]);
      continue;
    }
    regions.push([i, SEGMENT_HEADER_SIZE]);
    // The rescan merges and lists free runs anywhere in the segment.
    if (i < ck.segmentCount && alloc.marks[i] !== MARK_WHOLE) {
      alloc.onMark(i, MARK_WHOLE);
      alloc.marks[i] = MARK_WHOLE;
    }
  }
  if (foldOk && regions.some(([i, from]) => i === foldSeg && from === foldOff)) {
    // Recovery takes the tail from foldAt on as free in the row, and finds it again by the walk.
    // The segment is marked for what the walk writes there, and stamped with this turn: a
    // repair after a death during this one rescans it whole (the row has been added to).
    alloc.touch(foldSeg, foldOff);
    alloc.tailAddr = fold;
    alloc.tailEnd = (foldSeg + 1) * size;
  }
  Object.assign(report, emptyRecoveryReport());
  report.source = 'coord';
  report.storesUndone = Math.max(undone, 0);
  const pending = coord.pendingBody[0]!;
  // A body of a scanned segment that no scanned link reaches is the dead set()'s, or is linked
  // from a segment the dead turn did not write: only the former is freed.
  recover(store, report, onProgress, regions, (bodies) => {
    for (const b of bodies) if (b !== pending) bodies.delete(b);
  });
  return true;
}

/**
 * Puts back what the dead write stored below the tail's last fold, from pile.coord's undo log
 * (UndoLog.ts), inside a change of each segment it writes (readers of other processes retry);
 * returns the entries put back, -1 when the log is not trusted (the stamped segments are rescanned
 * whole instead). The log is then marked not trusted: a repairer that dies from here on leaves the
 * next one the stamps, which this repair's own writes add to; one that dies while putting back
 * leaves it whole, and putting back again changes nothing more.
 */
function undoDeadWrite(store: RecordStore, u32: Uint32Array): number {
  const { segments, segmentSize } = store;
  const began = new Map<number, boolean>();
  let n: number;
  try {
    n = UndoLog.undo(u32, UNDO_PLACES, segmentSize, (i) => {
      const seg = segments[i]?.use();
      if (seg !== undefined && !began.has(i)) began.set(i, beginChange(seg.u32));
      return seg?.u32;
    });
  } finally {
    for (const [i, b] of began) endChange(segments[i]!.u32, b);
  }
  u32[UNDO] = 0;
  return n;
}
