import { checkpointState, checkpointed, relist, sumRows } from '../alloc/AllocatorCheckpoint';
import { countOnly } from '../alloc/AllocatorScan';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MARK_CLEAN, MARK_WHOLE } from '../alloc/Allocator';
import { FORMAT_VERSION } from './BlockFormat';
import { CoordFile } from '../concurrency/CoordFile';
import { DirectoryLock, ReaderMark } from './DirectoryLock';
import { faultPoints } from '../recovery/FaultPoints';
import { ioError } from './FileAccess';
import { applyJournal } from '../records/Journal';
import { META_FILE_NAME, MetaFile } from './MetaFile';
import { PileError } from '../PileError';
import { invalid, isSegmentSize, type PileOptions } from '../PileOptions';
import { MAX_SEGMENTS } from '../records/PointerFormat';
import { BOOT_ID, checkpointRegions, emptyRecoveryReport, recoverPile, type RecoveryReport } from '../recovery/Recovery';
import type { RecordStore } from '../records/RecordStore';
import { Segment, segmentFileName } from './Segment';
import { ROW, foldTail } from '../alloc/SegmentRows';
import { metaHeader } from './SegmentTable';
import type { WriterTurn } from '../concurrency/WriterTurn';
import { RetiredList } from '../alloc/RetiredList';

/** Errors of the system, not of the caller's `dir`: reported as PILE_IO. */
const IO_REFUSALS = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'EDQUOT', 'EIO']);

/** What {@link openFiles} found or made in a pile's directory. */
export interface OpenedFiles {
  meta: MetaFile;
  lock: DirectoryLock | ReaderMark | undefined;
  /** pile.coord, mapped (undefined for a read-only open that found none it can map). */
  coord: CoordFile | undefined;
  /** False when the pile was created by this open. */
  existing: boolean;
  segmentSize: number;
  pileId: number;
  /** The previous writer closed the pile cleanly. */
  clean: boolean;
  segmentCount: number;
}

/**
 * Opens the directory of a mapped pile: takes the writer lock (or a reader mark), then opens
 * pile.meta, or creates it for a new pile, checks its header against the options, and maps
 * pile.coord (CoordFile). On a throw nothing stays held.
 * @throws PILE_INVALID_OPTION, PILE_IO, PILE_LOCKED, PILE_CORRUPT, PILE_FORMAT_VERSION
 */
export function openFiles(
  dir: string,
  options: PileOptions,
  readonly: boolean,
  create: boolean,
  segmentSize: number,
  pileId: number,
): OpenedFiles {
  try {
    if (!readonly) fs.mkdirSync(dir, { recursive: true });
    else if (!fs.statSync(dir).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    // The system refusing (permissions, a read-only or full file system) is not a bad option.
    if (IO_REFUSALS.has((err as NodeJS.ErrnoException).code ?? '')) throw ioError(err, `can not use directory ${dir}`);
    throw invalid('dir', `can not use directory ${dir}: ${(err as Error).message}`);
  }
  let lock: DirectoryLock | ReaderMark | undefined = readonly ? undefined : DirectoryLock.acquire(dir);
  let meta: MetaFile | undefined;
  let coord: CoordFile | undefined;
  try {
    meta = MetaFile.open(dir, readonly);
    if (meta === undefined) {
      if (fs.existsSync(path.join(dir, segmentFileName(0)))) {
        throw new PileError('PILE_CORRUPT', `${path.join(dir, META_FILE_NAME)} is missing but ${dir} holds segment files`);
      }
      if (readonly || !create) throw invalid('dir', `${dir} is not a pile (no ${META_FILE_NAME})`);
      // Checked before the meta file exists: a refused open must not leave a pile behind.
      if (options.maxMemory !== undefined && options.maxMemory < segmentSize) {
        throw invalid('maxMemory', `${options.maxMemory} is less than one segment (segmentSize ${segmentSize})`);
      }
      meta = MetaFile.create(dir, { segmentSize, pileId, segmentCount: 0, clean: false, genFloor: 0 });
      coord = CoordFile.openWriter(dir, segmentSize, pileId);
      return { meta, lock, coord, existing: false, segmentSize, pileId, clean: false, segmentCount: 0 };
    }
    // A read-only open goes beside live writers (its reads are checked); only a writer of an older
    // single-writer build, which marks no changes, is refused.
    if (readonly) lock = ReaderMark.acquire(dir);
    const h = meta.readHeader();
    if (options.segmentSize !== undefined && options.segmentSize !== h.segmentSize) {
      throw invalid('segmentSize', `${options.segmentSize} differs from the pile's ${h.segmentSize} in ${dir}`);
    }
    if (!isSegmentSize(h.segmentSize)) {
      throw new PileError('PILE_CORRUPT', `meta file ${meta.file}: bad segment size ${h.segmentSize} at offset 8`);
    }
    if (h.segmentCount > MAX_SEGMENTS)
      throw new PileError('PILE_CORRUPT', `meta file ${meta.file}: bad segment count ${h.segmentCount} at offset 16`);
    if (readonly) coord = CoordFile.openReader(dir, h.segmentSize, h.pileId);
    // Not closed cleanly: the rows of pile.coord may be kept (CoordFile.openWriter, HolderRepair).
    else coord = CoordFile.openWriter(dir, h.segmentSize, h.pileId, !h.clean && h.version === FORMAT_VERSION ? BOOT_ID : undefined);
    return {
      meta,
      lock,
      coord,
      existing: true,
      segmentSize: h.segmentSize,
      pileId: h.pileId,
      clean: h.clean,
      segmentCount: h.segmentCount,
    };
  } catch (err) {
    coord?.close();
    meta?.close();
    lock?.release();
    throw err;
  }
}

/**
 * Brings an opened pile's state in. A process that joins others (pile.coord's {@link
 * CoordFile.first} false) takes their published state; the first loads the pile from its files
 * (loadPile) and checkpoints, holding the turn and the init lock, so that those who join find it
 * complete. When it kept pile.coord as the last process of this boot left it ({@link
 * CoordFile.kept}), it first recovers as a dead holder's repair does (WriterTurn.recoverKept, HolderRepair):
 * from the rows there, rescanning what the dead turn touched and the tail's part appended since
 * the last fold; where that can not be trusted, the rows are not kept again and loadPile recovers.
 * @throws as loadPile
 */
export function startPile(
  store: RecordStore,
  files: OpenedFiles,
  turn: WriterTurn | undefined,
  report: RecoveryReport,
  onProgress: PileOptions['onProgress'],
  checkpoint: () => void,
): void {
  const coord = files.coord;
  if (turn !== undefined && !coord!.first) {
    // The retired list in pile.coord is others' and valid: kept by any repair that taking up their state runs.
    store.retired = retiredList(store, coord!);
    return turn.view();
  }
  turn?.enterFresh();
  if (files.existing) {
    // A kept pile.coord's retired list is the dead writers': recovering from its rows keeps those
    // blocks, as a live writer's repair does (Allocator.keepRetired).
    if (turn !== undefined && coord!.kept) store.retired = retiredList(store, coord!);
    const kept = turn !== undefined && coord!.kept && startKept(store, files.segmentCount, onProgress, turn);
    if (!kept) {
      if (turn !== undefined) coord!.distrust();
      // loadPile frees every retired block (as any reserved one): no list names them after it.
      store.retired?.drop();
      store.retired = undefined;
      loadPile(store, report, files.segmentCount, files.clean, onProgress);
    }
  }
  // A dead set()'s body was freed or kept by the recovery: a later repair must not take it for one.
  if (turn !== undefined) coord!.pendingBody[0] = 0;
  if (!store.readonly) checkpoint();
  turn?.leave();
  turn?.release(); // published before others join
  // Every counted segment's row is complete in pile.coord: the next opener after a kill may keep them.
  if (turn !== undefined) coord!.stampLive(BOOT_ID);
  coord?.initDone();
  // After the recovery: a pile.coord laid out afresh or not kept has no list (its blocks were freed).
  if (turn !== undefined) store.retired ??= retiredList(store, coord!);
}

/** The retired list of pile.coord, for the allocator of this open. */
function retiredList(store: RecordStore, coord: CoordFile): RetiredList {
  return new RetiredList(store.alloc, coord.readers, coord.f64);
}

/**
 * loadPile's first step for a writer (the pile marked in use), then the turn's recovery from the
 * kept rows (WriterTurn.recoverKept); false when that could not be trusted (nothing changed that
 * loadPile does not redo).
 */
function startKept(store: RecordStore, segmentCount: number, onProgress: PileOptions['onProgress'], turn: WriterTurn): boolean {
  const meta = store.meta!;
  if (segmentCount > 0 && Segment.isShortAndEmpty(store.dir!, segmentCount - 1, store.segmentSize, store.pileId)) return false;
  store.alloc.genFloor = meta.readHeader().genFloor;
  // Marked in use before the first write, as loadPile does; segments are mapped by the repair (mapCounted).
  meta.writeHeader(metaHeader(store, segmentCount, false));
  meta.sync();
  return turn.recoverKept(onProgress);
}

/**
 * A writer's clean shutdown: every segment synced, then a checkpoint, and the pile marked clean
 * (after the checkpoint is on disk) so that the next open does not scan; while other processes
 * have the pile open for writing, the checkpoint only (the last to close marks it clean). Under the
 * init lock, so that no opener joins while this one decides it is the last, and under the turn.
 * @throws PILE_IO when pile.meta can not be written
 */
export function closeFiles(store: RecordStore, coord: CoordFile | undefined, turn: WriterTurn | undefined, checkpoint: () => void): void {
  const meta = store.meta;
  if (meta === undefined) return;
  // The init lock is taken before the turn: a turn this thread still holds (since its last write,
  // a checkpoint timer's until setImmediate, or a batch's when close() runs inside batch(fn)) is let
  // go first, or another closer holding the init lock would wait for it while this one waits for
  // the init lock.
  turn?.leaveBatches();
  coord?.holdInit();
  turn?.enter();
  const last = coord?.otherWriters() !== true;
  // The last writer frees every retired block: nothing would list them after it (a read-only open's
  // session loses its pin then; docs/concurrency.md, "Deferred reuse").
  if (last) store.retired?.reclaim(true);
  for (const seg of store.segments) seg.sync();
  checkpoint();
  if (last) {
    // Only a pile whose last writer died is recovered from pile.coord: once this one is closed clean,
    // anything may change its files (a copy, a tool) before an open finds it unclean again.
    coord?.distrust();
    // The rows lie on other pages than the header: on disk before the header says clean.
    meta.sync();
    meta.writeHeader(metaHeader(store, store.segments.length, true));
    meta.sync();
  }
  turn?.leave();
  turn?.release();
}

/**
 * Maps the segments of an existing pile and brings back its allocator state and catalog: from
 * the clean-close state, else by recovery (from the last checkpoint when it can be trusted, else
 * a scan of every segment). A writer first removes segment files past the counted ones and marks
 * the pile in use.
 * @throws PILE_CORRUPT, PILE_IO
 */
export function loadPile(
  store: RecordStore,
  report: RecoveryReport,
  segmentCount: number,
  clean: boolean,
  onProgress: PileOptions['onProgress'],
): void {
  const { dir, alloc, segmentSize, pileId, readonly } = store;
  const meta = store.meta!;
  const header = meta.readHeader();
  alloc.genFloor = header.genFloor;
  if (!readonly && segmentCount > 0 && Segment.isShortAndEmpty(dir!, segmentCount - 1, segmentSize, pileId)) {
    // The last segment's file was never made whole and holds no record: uncount it (the loop
    // below deletes its file) and recover, since a clean state may name its free block.
    segmentCount--;
    meta.writeHeader(metaHeader(store, segmentCount, false));
    meta.sync();
    clean = false;
  }
  // A writer that loads the pile is alone or holds the turn: a change mark a dead writer left odd is cleared.
  for (let i = 0; i < segmentCount; i++) {
    store.segments.push(Segment.open(dir!, i, segmentSize, pileId, readonly, true));
  }
  if (readonly) {
    store.catalog.load();
    countOnly(alloc);
    return;
  }
  removeUncounted(dir!, segmentCount);
  // Mark the pile in use before the first write: a crash from now on makes the next open recover.
  meta.writeHeader(metaHeader(store, segmentCount, false));
  meta.sync();
  // A pile of an older format has no segment rows: one scan of every segment makes them.
  recoverFiles(store, report, onProgress, segmentCount, clean && header.version === FORMAT_VERSION, header.version === FORMAT_VERSION);
}

/**
 * What a writer does under the turn after the holder before it died (docs/concurrency.md): the
 * recovery of an unclean open, while the other processes wait for the turn. The segments this
 * process maps become those pile.meta counts (files past them, left by a holder killed while
 * adding one, are removed), then recovery runs from the last checkpoint, or over every segment.
 * @throws PILE_CORRUPT, PILE_IO
 */
export function repairPile(store: RecordStore, report: RecoveryReport): void {
  const count = mapCounted(store);
  Object.assign(report, emptyRecoveryReport());
  recoverFiles(store, report, undefined, count, false, true);
}

/**
 * The first step of a repair under the turn: the segments this process maps become those
 * pile.meta counts (files past them removed), with the change marks a dead holder left odd
 * cleared before anything changes; returns their count.
 * @throws PILE_CORRUPT, PILE_IO
 */
export function mapCounted(store: RecordStore): number {
  const { dir, segments, segmentSize, pileId } = store;
  const h = store.meta!.readHeader();
  const count = Math.min(h.segmentCount, MAX_SEGMENTS);
  store.alloc.genFloor = h.genFloor;
  while (segments.length > count) segments.pop()!.release();
  for (const seg of segments) seg.clearDeadMark();
  for (let i = segments.length; i < count; i++) segments.push(Segment.open(dir!, i, segmentSize, pileId, false, true));
  removeUncounted(dir!, count);
  return count;
}

/**
 * Saves a checkpoint (docs/format.md): the rows of the segments written since the last one (or
 * added since), then the checkpoint that names them by its sequence number, then the dirty marks
 * cleared. Killed before the checkpoint is written, recovery starts from the one before, which
 * scans those segments; killed before the marks are cleared, it scans more than it must.
 * @throws PILE_IO when pile.meta can not be written
 */
export function saveCheckpoint(store: RecordStore): void {
  const meta = store.meta!;
  const a = store.alloc;
  const n = store.segments.length;
  const seq = (a.ckptSeq + 1) >>> 0;
  const written: number[] = [];
  for (let i = 0; i < n; i++) if (i >= a.ckptSegCount || a.marks[i] !== MARK_CLEAN) written.push(i);
  foldTail(a);
  meta.writeRows(a.rows, ROW, written, seq);
  meta.writeCheckpoint({ segmentCount: n, seq, bootId: BOOT_ID, state: checkpointState(a) });
  faultPoints.hit?.('checkpoint-saved');
  meta.writeMarks(n, MARK_CLEAN);
  faultPoints.hit?.('checkpoint-cleared');
  checkpointed(a, seq);
}

/** Files past the counted segments: left by a crash while adding one, or by an interrupted compact. */
function removeUncounted(dir: string, segmentCount: number): void {
  for (let i = segmentCount; fs.existsSync(path.join(dir, segmentFileName(i))); i++) {
    fs.rmSync(path.join(dir, segmentFileName(i)), { force: true });
  }
}

/**
 * The allocator state from the last checkpoint when it can be trusted (`current`: the pile is of
 * this format), with recovery of what was written since; else a recovery that scans every segment.
 * After a clean close (`clean`) nothing was written since, and nothing is scanned.
 */
function recoverFiles(
  store: RecordStore,
  report: RecoveryReport,
  onProgress: PileOptions['onProgress'],
  segmentCount: number,
  clean: boolean,
  current: boolean,
): void {
  const meta = store.meta!;
  const { alloc } = store;
  // Every row of the counted segments is read from pile.meta or rebuilt below: what this process kept
  // pending for the tail's segment (none after a release: publish folds) is in the files already.
  foldTail(alloc);
  const regions = current ? checkpointRegions(meta, alloc, store.fmt, segmentCount, clean) : undefined;
  if (clean && regions?.length === 0) {
    relist(alloc);
    sumRows(alloc);
    store.catalog.load();
    return;
  }
  if (regions === undefined) {
    // Every row is made anew: the next checkpoint saves them all, numbered on from the last.
    alloc.ckptSegCount = 0;
    alloc.ckptTailSeg = -1;
    alloc.ckptSeq = Math.max(alloc.ckptSeq, meta.readCheckpoint()?.seq ?? 0);
    // A full scan may write into any segment: marked first, so that a crash during it scans all again.
    meta.writeMarks(segmentCount, MARK_WHOLE);
  }
  recover(store, report, onProgress, regions);
}

/**
 * After an unclean shutdown, or a holder's death: see recoverPile. `unreachedBodies`: see
 * RecoveryHost (a holder's repair).
 */
export function recover(
  store: RecordStore,
  report: RecoveryReport,
  onProgress: PileOptions['onProgress'],
  regions: Array<[number, number]> | undefined,
  unreachedBodies?: (bodies: Set<number>) => void,
): void {
  const fmt = store.fmt;
  recoverPile(
    {
      segments: store.segments,
      alloc: store.alloc,
      fmt,
      report,
      applyJournal: (seg, off) => {
        faultPoints.hit?.('recovery-replay');
        applyJournal(store, seg, off);
      },
      loadCatalog: () => {
        store.catalog.load();
        return store.catalog.address;
      },
      linkTarget: (seg, off) => (store.locateBody(seg, off) ? fmt.address(store.dSeg.index, store.dOff) : 0),
      setRecovering: (on) => {
        store.recovering = on;
      },
      unreachedBodies,
    },
    onProgress,
    regions,
  );
}
