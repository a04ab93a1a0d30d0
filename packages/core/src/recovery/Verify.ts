import { checkFreeLists } from '../alloc/AllocatorScan';
import { R_ALLOC, R_LINK, R_OBJ, R_SPAN, R_UTIL, ROW, foldTail } from '../alloc/SegmentRows';
import type { Allocator } from '../alloc/Allocator';
// Two imports so that each list fits one line (a multi-line list repeats Recovery's, line for line).
import { FLAG_BODY, KIND_CATALOG, KIND_JOURNAL, KIND_LINK, SEGMENT_HEADER_SIZE } from '../storage/BlockFormat';
import { STATE_DAMAGED, STATE_FREE, STATE_USED, flagsOf, kindOf, stateOf } from '../storage/BlockFormat';
import { blockDamage } from '../storage/Checksum';
import { PileError } from '../PileError';
import type { Segment } from '../storage/Segment';

/** A damaged spot found by {@link Pile.verify} or by recovery. */
export interface CorruptRecord {
  segment: number;
  offset: number;
  file?: string;
  reason: string;
}

/** Result of {@link Pile.verify}. */
export interface VerifyReport {
  ok: boolean;
  segmentsChecked: number;
  /**
   * Blocks in use that were checked: the live records ({@link objectsChecked}) and the pile's own
   * blocks (the catalog of schemas and structures, an uncommitted journal, the bodies of records
   * that moved to a larger block). So it is `stats.objectCount` plus those, never less.
   */
  recordsChecked: number;
  /** Live records checked, what `stats.objectCount` counts (a moved record once). */
  objectsChecked: number;
  corrupt: CorruptRecord[];
  /** Free-list entries that are not free blocks, lists that loop, free blocks missing from every list. */
  freeListErrors: number;
  /** Bytes no block accounts for (after a damaged block header the rest of a segment can not be walked). */
  unaccountedBytes: number;
  /** Counters that disagree with what the walk found. */
  statsErrors: string[];
  /**
   * Blocks nothing can reach, whose space is lost: a catalog record other than the one the meta
   * file's catalog slot names (a writer died between naming a new catalog and freeing the old one,
   * and no recovery scanned that segment since). Checked by writers only, like the counters.
   */
  unreachable: CorruptRecord[];
}

/** A damaged spot at `off` of `seg`, naming its file when it has one. */
export function corruptAt(seg: Segment, off: number, reason: string): CorruptRecord {
  const r: CorruptRecord = { segment: seg.index, offset: off, reason };
  if (seg.file !== undefined) r.file = seg.file;
  return r;
}

/** The PILE_CORRUPT error of a damaged record at `off` of `seg`, naming its file (or in-memory segment), segment and offset. */
export function corruptError(seg: Segment, off: number, reason: string): PileError {
  const where = seg.file ?? `in-memory segment ${seg.index}`;
  return new PileError('PILE_CORRUPT', `${where} (segment ${seg.index}), record at offset ${off}: ${reason}`);
}

/**
 * A damaged size word would make delete free, or set overwrite, a neighbour's bytes: the blocks a
 * write is about to reuse are checked first (reads check them only with verifyOnRead).
 * @throws PILE_CORRUPT, and nothing is written
 */
export function checkBeforeWrite(seg: Segment, off: number): void {
  const reason = blockDamage(seg.buf, seg.u32, off);
  if (reason !== undefined) throw corruptError(seg, off, `${reason}; the record is left as it is`);
}

/** What a walk of segment `s` found (`after` less `before`) against its row, the allocator's record of it. */
function checkRow(alloc: Allocator, s: number, before: Seen, after: Seen, errors: string[]): void {
  const r = s * ROW;
  const row = alloc.rows;
  const expect: [string, number, number][] = [
    ['objectCount', row[r + R_OBJ]!, after.objects - before.objects],
    ['linkCount', row[r + R_LINK]!, after.links - before.links],
    ['allocatedBytes', row[r + R_ALLOC]!, after.allocated - before.allocated],
    ['utilizedBytes', row[r + R_UTIL]!, after.utilized - before.utilized],
    ['freeBytes', row[r + R_SPAN]! - row[r + R_ALLOC]!, after.free - before.free],
  ];
  for (const [name, kept, found] of expect) if (kept !== found) errors.push(`segment ${s} ${name}: kept ${kept}, found ${found}`);
}

type Seen = { allocated: number; utilized: number; free: number; objects: number; links: number; freeBlocks: number };

/**
 * Pile.verify(): walks every block of every segment, checks each record's checksum and each link,
 * and (for a writer, whose allocator state is live) the free lists and the counters against what
 * the walk found. Never throws on damage. `linkHolds` tells whether the link block at `off`
 * points at a live body; `catalogAddr` (a writer's) is the current catalog record's address: any
 * other catalog record is reported unreachable.
 */
export function verifyPile(
  segments: readonly Segment[],
  alloc: Allocator,
  readonly: boolean,
  linkHolds: (seg: Segment, off: number) => boolean,
  onProgress?: (p: { phase: string; done: number; total: number }) => void,
  catalogAddr?: number,
): VerifyReport {
  const segmentSize = alloc.segmentSize;
  const report: VerifyReport = {
    ok: true,
    segmentsChecked: 0,
    recordsChecked: 0,
    objectsChecked: 0,
    corrupt: [],
    freeListErrors: 0,
    unaccountedBytes: 0,
    statsErrors: [],
    unreachable: [],
  };
  const seen: Seen = { allocated: 0, utilized: 0, free: 0, objects: 0, links: 0, freeBlocks: 0 };
  if (!readonly) foldTail(alloc); // the rows are checked
  for (const s of segments) {
    const seg = s.use();
    const u32 = seg.u32;
    const before = { ...seen };
    let off = SEGMENT_HEADER_SIZE;
    while (off < segmentSize) {
      const size = u32[off >>> 2]!;
      if (!alloc.saneSize(off, size)) {
        report.corrupt.push(corruptAt(seg, off, `bad block size ${size}`));
        report.unaccountedBytes += segmentSize - off;
        break;
      }
      const w = u32[(off >>> 2) + 1]!;
      const state = stateOf(w);
      if (state === STATE_DAMAGED) {
        report.corrupt.push(corruptAt(seg, off, 'a block recovery found damaged (its size is not trusted)'));
        report.unaccountedBytes += segmentSize - off;
        break;
      }
      if (state === STATE_USED) {
        report.recordsChecked++;
        const reason = blockDamage(seg.buf, seg.u32, off);
        if (reason !== undefined) report.corrupt.push(corruptAt(seg, off, reason));
        const kind = kindOf(w);
        seen.allocated += size;
        seen.utilized += u32[(off >>> 2) + 2]!;
        if ((flagsOf(w) & FLAG_BODY) === 0 && kind !== KIND_CATALOG && kind !== KIND_JOURNAL) {
          seen.objects++;
          if (kind === KIND_LINK) {
            seen.links++;
            if (!linkHolds(seg, off)) report.corrupt.push(corruptAt(seg, off, 'link to a block that is not a live body'));
          }
        } else if (kind === KIND_CATALOG && catalogAddr !== undefined && seg.index * segmentSize + off !== catalogAddr) {
          report.unreachable.push(
            corruptAt(seg, off, `a catalog record the catalog slots do not name (the current one is at ${catalogAddr})`),
          );
        }
      } else if (state === STATE_FREE) {
        if (!alloc.checkFree(seg, off)) report.corrupt.push(corruptAt(seg, off, 'free block header damaged (check words do not match)'));
        seen.free += size;
        seen.freeBlocks++;
      } else {
        seen.allocated += size; // reserved: a put in progress
      }
      off += size;
    }
    if (!readonly && off >= segmentSize) checkRow(alloc, seg.index, before, seen, report.statsErrors);
    report.segmentsChecked++;
    onProgress?.({ phase: 'verify', done: report.segmentsChecked, total: segments.length });
  }
  report.objectsChecked = seen.objects;
  if (!readonly) {
    const listed = checkFreeLists(alloc);
    report.freeListErrors = listed.errors;
    const tail = alloc.tailAddr !== 0 ? 1 : 0;
    if (listed.blocks + tail !== seen.freeBlocks) report.freeListErrors += Math.abs(listed.blocks + tail - seen.freeBlocks);
    const a = alloc;
    const expect: [string, number, number][] = [
      ['objectCount', a.objectCount, seen.objects],
      ['linkCount', a.linkCount, seen.links],
      ['allocatedBytes', a.allocatedBytes, seen.allocated],
      ['utilizedBytes', a.utilizedBytes, seen.utilized],
      ['freeBytes', a.freeBytes, seen.free],
    ];
    if (report.unaccountedBytes === 0) {
      for (const [name, kept, found] of expect) if (kept !== found) report.statsErrors.push(`${name}: kept ${kept}, found ${found}`);
    }
  }
  report.ok =
    report.corrupt.length === 0 &&
    report.freeListErrors === 0 &&
    report.unaccountedBytes === 0 &&
    report.statsErrors.length === 0 &&
    report.unreachable.length === 0;
  return report;
}
