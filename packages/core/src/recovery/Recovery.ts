import { restoreTail } from '../alloc/AllocatorCheckpoint';
import { ensureRows } from '../alloc/AllocatorRows';
import { beginRegions, closeFreeRun, endRegions, rebuild, rebuildRegions } from '../alloc/AllocatorScan';
import { confirmedSize, quarantine, trustedFreeSize } from '../storage/BlockTrust';
import * as fs from 'node:fs';
import type { Allocator } from '../alloc/Allocator';
import { MARK_CLEAN, MARK_TAIL, MARK_WHOLE } from '../alloc/Allocator';
import {
  FLAG_BODY,
  KIND_CATALOG,
  KIND_JOURNAL,
  KIND_LINK,
  SEGMENT_HEADER_SIZE,
  STATE_DAMAGED,
  STATE_USED,
  flagsOf,
  genOf,
  kindOf,
  stateOf,
} from '../storage/BlockFormat';
import { blockDamage, headerBitRepair } from '../storage/Checksum';
import { faultPoints } from './FaultPoints';
import { OUTSIDE_WINDOW, walkPlainRegions } from './PlainRegions';
import { fileWalkable, listFileRuns } from './FileRegions';
import type { MetaFile } from '../storage/MetaFile';
import type { PileOptions } from '../PileOptions';
import type { PointerFormat } from '../records/PointerFormat';
import type { Segment, SegmentWindow } from '../storage/Segment';
import { R_ALLOC, R_OBJ, R_SPAN, R_UTIL, ROW } from '../alloc/SegmentRows';
import { corruptAt, type CorruptRecord } from './Verify';

/**
 * This boot of the machine ('' where the kernel does not say). A checkpoint carries it: a process
 * death keeps the page cache, so the marks it holds are complete; after a reboot (an OS crash, a
 * power loss) the disk may hold any subset of the writes, and recovery scans every segment.
 */
export const BOOT_ID = ((): string => {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim();
  } catch {
    return '';
  }
})();

/** What the last open did to bring the pile back after an unclean shutdown. */
export interface RecoveryReport {
  /** True when the previous writer did not close cleanly and this open scanned the pile. */
  ran: boolean;
  /** Records found half-written (checksum mismatch) and dropped. */
  tornRecords: number;
  /** Interrupted `set` calls completed from their journal. */
  journalsReplayed: number;
  /** Unreachable internal blocks freed (orphan bodies, old catalogs). */
  orphansFreed: number;
  /** Damage that was left in place, not repaired. */
  corrupt: CorruptRecord[];
  /** True when the whole pile was scanned; false when only what was written since the last checkpoint was. */
  full: boolean;
  /** Regions scanned: a segment, or the part of one from the checkpoint's tail to its end. */
  regionsScanned: number;
  /** Bytes of those regions (a free run is stepped over in one step, whatever its size). */
  bytesScanned: number;
  /** Block headers the scan read. */
  blocksScanned: number;
  /**
   * Stores of a write cut by a kill that the repair put back from pile.coord's undo log (source
   * 'coord'; docs/concurrency.md, "A holder's death"), so that only the tail's part appended
   * since its last fold was rescanned; 0 when there were none or the log was not trusted.
   */
  storesUndone: number;
  /**
   * Where the allocator state outside what was scanned came from: 'none' (no recovery ran), 'scan'
   * (nothing: every segment was scanned), 'checkpoint' (pile.meta's last checkpoint and dirty
   * marks), 'coord' (pile.coord's rows as the writers left them in place on this boot: after a
   * holder of the writer turn died, or when the last process of the pile was killed; only what
   * the dead turn touched and what it appended since its last fold of the tail's counters were
   * scanned; docs/durability.md).
   */
  source: 'none' | 'scan' | 'checkpoint' | 'coord';
}

/** A report of an open that did not need to recover. */
export function emptyRecoveryReport(): RecoveryReport {
  return {
    ran: false,
    tornRecords: 0,
    journalsReplayed: 0,
    orphansFreed: 0,
    corrupt: [],
    full: false,
    regionsScanned: 0,
    bytesScanned: 0,
    blocksScanned: 0,
    storesUndone: 0,
    source: 'none',
  };
}

/** What recovery needs of the pile it brings back. */
export interface RecoveryHost {
  readonly segments: readonly Segment[];
  readonly alloc: Allocator;
  readonly fmt: PointerFormat;
  /** Filled in as recovery goes (the pile's lastRecovery). */
  readonly report: RecoveryReport;
  /** Carries out the committed journal record at `off` of `seg` (idempotent). */
  applyJournal(seg: Segment, off: number): void;
  /** Reads the newest valid catalog; returns the address of its record (0: none). */
  loadCatalog(): number;
  /** The address of the live body the link block at `off` of `seg` points at; 0 when there is none. */
  linkTarget(seg: Segment, off: number): number;
  /** On while recovery runs: the pile then only marks the blocks it releases free (no free lists yet). */
  setRecovering(on: boolean): void;
  /**
   * Given the bodies in scanned regions that no scanned link reaches, keeps in the set only those
   * to free. Unset: those that links of the segments not scanned reach are kept (linksElsewhere,
   * a walk of the rest of the pile); a repair after a holder's death knows the one body that
   * holder may have left unlinked instead (HolderRepair).
   */
  readonly unreachedBodies?: ((bodies: Set<number>) => void) | undefined;
}

/**
 * What recovery must scan when the last checkpoint can be trusted, and the allocator state it
 * starts from: every segment's row from pile.meta (its free lists and counters as the checkpoint
 * saved them), the tail from the checkpoint. Scanned are the tail's segment from the checkpoint's
 * tail on when marked so, every other segment written since (marked) or whose saved row is damaged
 * or newer than the checkpoint, whole, and every segment added since. undefined (scan everything)
 * when there is no checkpoint, or none of this boot (`clean`: the previous writer closed the pile
 * cleanly, after syncing it, so any boot's), or its tail makes no sense.
 */
export function checkpointRegions(
  meta: MetaFile,
  alloc: Allocator,
  fmt: PointerFormat,
  segmentCount: number,
  clean: boolean,
): Array<[number, number]> | undefined {
  const ck = meta.readCheckpoint();
  if (ck === undefined || ck.segmentCount > segmentCount) return undefined;
  if (!clean && (BOOT_ID === '' || ck.bootId !== BOOT_ID)) return undefined;
  if (!restoreTail(alloc, ck.state)) return undefined;
  const tail = alloc.tailAddr;
  const tailSeg = tail !== 0 ? fmt.segmentOf(tail) : -1;
  if (tail !== 0 && (!Number.isSafeInteger(tail) || tailSeg >= ck.segmentCount || alloc.tailEnd !== (tailSeg + 1) * fmt.segmentSize))
    return undefined;
  ensureRows(alloc, segmentCount);
  const marks = meta.readMarks(ck.segmentCount);
  const saved = meta.readRows(alloc.rows, ROW, ck.segmentCount, ck.seq);
  // As if this checkpoint had just been made, with the scanned segments written since: the next
  // checkpoint saves their rows.
  alloc.ckptSeq = ck.seq;
  alloc.ckptSegCount = ck.segmentCount;
  alloc.ckptTailSeg = tailSeg;
  alloc.ckptTailOff = tail !== 0 ? tail - tailSeg * fmt.segmentSize : 0;
  alloc.marks.fill(MARK_CLEAN);
  const regions: Array<[number, number]> = [];
  for (let i = 0; i < segmentCount; i++) {
    const m = i < ck.segmentCount ? marks[i]! : -1;
    if (m === MARK_CLEAN && saved[i] === true) continue;
    if (m === MARK_TAIL && saved[i] === true && i === tailSeg) regions.push([i, tail - i * fmt.segmentSize]);
    else {
      alloc.rows.fill(0, i * ROW, (i + 1) * ROW);
      regions.push([i, SEGMENT_HEADER_SIZE]);
    }
    if (i < ck.segmentCount) alloc.marks[i] = MARK_WHOLE;
  }
  return regions;
}

/**
 * After an unclean shutdown: replay journals, drop torn records and orphans, rebuild free lists.
 * `regions` (from {@link checkpointRegions}): only those are scanned; omitted: every segment.
 */
export function recoverPile(host: RecoveryHost, onProgress: PileOptions['onProgress'], regions?: Array<[number, number]>): void {
  const { segments, alloc, fmt } = host;
  const segmentSize = fmt.segmentSize;
  const seat = (addr: number): { seg: Segment; off: number } => {
    const i = fmt.segmentOf(addr);
    return { seg: segments[i]!.use(), off: addr - i * segmentSize };
  };
  const addrOf = (seg: Segment, off: number): number => fmt.address(seg.index, off);
  faultPoints.hit?.('recovery-walk');
  const r = host.report;
  r.ran = true;
  r.full = regions === undefined;
  if (r.source !== 'coord') r.source = r.full ? 'scan' : 'checkpoint';
  const scan = regions ?? segments.map((s): [number, number] => [s.index, SEGMENT_HEADER_SIZE]);
  r.regionsScanned = scan.length;
  for (const [, from] of scan) r.bytesScanned += segmentSize - from;
  host.setRecovering(true);
  const total = scan.length * 3;
  let done = 0;
  const progress = (): void => onProgress?.({ phase: 'recover', done: ++done, total });
  // Nothing written since the checkpoint: one event still says that recovery ran and is complete.
  if (total === 0) onProgress?.({ phase: 'recover', done: 0, total: 0 });
  // What an appending writer leaves is recovered by one walk; anything else by the passes below.
  // The walk reads the regions through windows of their segments (see Segment.window), and when
  // they do not hold what it needs, again with the segments mapped.
  let windows = regions === undefined ? undefined : openWindows(segments, scan);
  let plain = regions === undefined ? undefined : walkPlainRegions(segments, alloc, segmentSize, scan, windows);
  if (plain === OUTSIDE_WINDOW || plain === undefined) {
    for (const w of windows ?? []) w?.release();
    windows = undefined;
  }
  if (plain === OUTSIDE_WINDOW) plain = walkPlainRegions(segments, alloc, segmentSize, scan);
  if (plain !== undefined && plain !== OUTSIDE_WINDOW) {
    r.blocksScanned = plain.blocks;
    host.loadCatalog();
    host.setRecovering(false);
    // What rebuildRegions would do, from the counts and free runs the walk found.
    beginRegions(alloc, scan);
    const runs = plain.runs;
    const totals = plain.regionTotals;
    let i = 0;
    try {
      for (let k = 0; k < scan.length; k++) {
        const win = windows?.[k];
        const row = scan[k]![0] * ROW;
        const t = 3 * k;
        const allocated = totals[t]! - (k > 0 ? totals[t - 3]! : 0);
        alloc.rows[row + R_ALLOC]! += allocated;
        alloc.rows[row + R_SPAN]! += allocated;
        alloc.rows[row + R_UTIL]! += totals[t + 1]! - (k > 0 ? totals[t - 2]! : 0);
        alloc.rows[row + R_OBJ]! += totals[t + 2]! - (k > 0 ? totals[t - 1]! : 0);
        const file = plain.files[k];
        if (file !== undefined) listFileRuns(alloc, segments[scan[k]![0]]!, file);
        for (; i < plain.regionEnds[k]!; i += 6) {
          closeFreeRun(alloc, segments[runs[i]!]!, runs[i + 1]!, runs[i + 2]!, runs[i + 3]!, plain.inner, runs[i + 4]!, runs[i + 5]!, win);
        }
        faultPoints.hit?.('region-walked');
        progress();
        progress();
        progress();
      }
    } finally {
      for (const w of windows ?? []) w?.release();
    }
    endRegions(alloc);
    return;
  }
  // 1. Replay committed journals: they complete a set() that the crash interrupted.
  const journals: number[] = [];
  walkUsed(
    host,
    (seg, off, w) => {
      if (kindOf(w) === KIND_JOURNAL && blockDamage(seg.buf, seg.u32, off) === undefined) journals.push(addrOf(seg, off));
      return seg.u32[off >>> 2]!;
    },
    progress,
    scan,
  );
  // Counters are rebuilt at the end, or (from a checkpoint) added to the rows of what is scanned
  // by its walk: replay must not drift them meanwhile.
  const rows = regions === undefined ? undefined : regions.map(([s]) => alloc.rows.slice(s * ROW, (s + 1) * ROW));
  for (const a of journals) {
    const j = seat(a);
    host.applyJournal(j.seg, j.off);
    alloc.writeFree(j.seg.u32, j.off >>> 2, j.seg.u32[j.off >>> 2]!, genOf(j.seg.u32[(j.off >>> 2) + 1]!));
    r.journalsReplayed++;
  }
  rows?.forEach((row, k) => alloc.rows.set(row, regions![k]![0] * ROW));
  const catalogAddr = host.loadCatalog();
  // 2. Drop torn records, and find link targets. A torn record's size is not covered by a
  // checksum that holds: it is freed only by a size that the next header confirms (see
  // BlockTrust's confirmedSize); otherwise it stays, and the rest of its segment is left untouched,
  // so that no live record is ever freed with it.
  const bodies = new Set<number>();
  const links: number[] = [];
  walkUsed(
    host,
    (seg, off, w) => {
      const size = seg.u32[off >>> 2]!;
      const reason = blockDamage(seg.buf, seg.u32, off);
      if (reason !== undefined) {
        // Its size and generation as the header's own evidence gives them, else the size its
        // neighbours confirm. A generation that may be damaged is never lowered: the larger one.
        const fixed = headerBitRepair(seg.buf, seg.u32, off, segmentSize);
        if (fixed !== undefined) {
          const g = genOf(fixed.w1) > genOf(w) ? genOf(fixed.w1) : genOf(w);
          alloc.writeFree(seg.u32, off >>> 2, fixed.size, g);
          r.tornRecords++;
          return fixed.size;
        }
        const sure = confirmedSize(alloc, seg, off, size, size);
        if (sure < 0) {
          quarantine(seg, off);
          r.corrupt.push(
            corruptAt(
              seg,
              off,
              `${reason}; its size ${size} is not confirmed by the next block, so it and the rest of the segment are left untouched`,
            ),
          );
          return -1;
        }
        alloc.writeFree(seg.u32, off >>> 2, sure, genOf(w));
        r.tornRecords++;
        return sure;
      }
      const kind = kindOf(w);
      if (kind === KIND_LINK) links.push(addrOf(seg, off));
      else if (kind === KIND_CATALOG && addrOf(seg, off) !== catalogAddr) {
        alloc.writeFree(seg.u32, off >>> 2, size, genOf(w));
        r.orphansFreed++;
      } else if (flagsOf(w) & FLAG_BODY) bodies.add(addrOf(seg, off));
      return size;
    },
    progress,
    scan,
    r.corrupt,
  );
  // 3. A body no link reaches was written by a set() that never committed its journal.
  for (const a of links) {
    const l = seat(a);
    const body = host.linkTarget(l.seg, l.off);
    if (body !== 0) bodies.delete(body);
    else {
      alloc.writeFree(l.seg.u32, l.off >>> 2, l.seg.u32[l.off >>> 2]!, genOf(l.seg.u32[(l.off >>> 2) + 1]!));
      r.tornRecords++;
    }
  }
  if (regions !== undefined && bodies.size > 0) {
    if (host.unreachedBodies !== undefined) host.unreachedBodies(bodies);
    else linksElsewhere(host, scan, bodies);
  }
  // Where a walk stopped at damage, links past that point were not seen: a body that looks
  // unreached may be reached from there, so none is freed.
  if (r.corrupt.length > 0) bodies.clear();
  for (const a of bodies) {
    const b = seat(a);
    alloc.writeFree(b.seg.u32, b.off >>> 2, b.seg.u32[b.off >>> 2]!, genOf(b.seg.u32[(b.off >>> 2) + 1]!));
    r.orphansFreed++;
  }
  host.setRecovering(false);
  if (regions === undefined) rebuild(alloc, () => progress());
  else rebuildRegions(alloc, regions, progress);
}

/**
 * A body that a recovery from a checkpoint found unreached in a segment it scanned whole, though
 * the segment was there at the checkpoint, may be older than the checkpoint, with its link in a
 * segment not written since and so not scanned: `bodies` loses those that the links of every
 * segment not scanned whole reach (a read-only walk, only when such a body is left). A damaged
 * block in that walk keeps every body. Bodies elsewhere were all written since the checkpoint,
 * and so were the links that reach them.
 */
function linksElsewhere(host: RecoveryHost, scan: ReadonlyArray<readonly [number, number]>, bodies: Set<number>): void {
  const { alloc, fmt } = host;
  const whole = new Set(scan.filter(([s, from]) => from === SEGMENT_HEADER_SIZE && s < alloc.ckptSegCount).map(([s]) => s));
  if (![...bodies].some((a) => whole.has(fmt.segmentOf(a)))) return;
  const rest = host.segments.filter((s) => !whole.has(s.index)).map((s): [number, number] => [s.index, SEGMENT_HEADER_SIZE]);
  const damage: CorruptRecord[] = [];
  walkUsed(
    host,
    (seg, off, w) => {
      if (kindOf(w) === KIND_LINK) {
        const body = host.linkTarget(seg, off);
        if (body !== 0) bodies.delete(body);
      }
      return seg.u32[off >>> 2]!;
    },
    () => {},
    rest,
    damage,
  );
  host.report.regionsScanned += rest.length;
  host.report.bytesScanned += rest.length * (fmt.segmentSize - SEGMENT_HEADER_SIZE);
  if (damage.length > 0) bodies.clear();
}

/** Bytes a recovery may map as windows (Segment.window) in all; an object so that tests can change it. */
export const recoveryWindows = { bytes: 16 * 1024 * 1024 };

/**
 * A window over each region of `scan` while their sum stays within recoveryWindows.bytes (the
 * rest, and a segment already mapped, are read through the segment's own views): well below the
 * 64 MiB of external memory from which V8 starts a mark-compact (docs/benchmarks.md).
 */
function openWindows(segments: readonly Segment[], scan: ReadonlyArray<readonly [number, number]>): Array<SegmentWindow | undefined> {
  let left = recoveryWindows.bytes;
  return scan.map(([segIdx, from]) => {
    // A whole segment is read from its file instead (FileRegions), mapped only when that needs it.
    const w = left > 0 && !fileWalkable(segments[segIdx]!, from) ? segments[segIdx]!.window(from, left) : undefined;
    if (w !== undefined) left -= w.end - w.base;
    return w;
  });
}

/**
 * Calls `fn` for each USED block, which returns the size to step by (-1: stop this segment);
 * free and reserved blocks are stepped over by the size their check words confirm. A size that
 * can not be trusted ends that segment's walk (recorded in `corrupt`).
 */
function walkUsed(
  host: RecoveryHost,
  fn: (seg: Segment, off: number, w: number) => number,
  progress: () => void,
  scan: ReadonlyArray<readonly [number, number]>,
  corrupt?: CorruptRecord[],
): void {
  faultPoints.hit?.('recovery-walk');
  const segmentSize = host.fmt.segmentSize;
  for (const [segIdx, from] of scan) {
    const seg = host.segments[segIdx]!.use();
    let off = from;
    while (off < segmentSize) {
      if (corrupt === undefined) host.report.blocksScanned++;
      let size = seg.u32[off >>> 2]!;
      if (!host.alloc.saneSize(off, size)) {
        corrupt?.push(corruptAt(seg, off, `bad block size ${size}; the rest of the segment is left untouched`));
        break;
      }
      const w = seg.u32[(off >>> 2) + 1]!;
      if (stateOf(w) === STATE_USED) size = fn(seg, off, w);
      else if (stateOf(w) === STATE_DAMAGED) {
        corrupt?.push(corruptAt(seg, off, 'a block an earlier recovery found damaged; the rest of the segment is left untouched'));
        size = -1;
      } else {
        size = trustedFreeSize(host.alloc, seg, off);
        if (size < 0) corrupt?.push(corruptAt(seg, off, 'damaged free block header; the rest of the segment is left untouched'));
      }
      if (size < 0) break;
      off += size;
    }
    progress();
  }
}
