import type { Allocator } from '../alloc/Allocator';
import { STAT_FIELDS, relist } from '../alloc/AllocatorCheckpoint';
import { compileCached } from '../schema/CodeCache';
import { COORD, UNDO_PLACES, type CoordFile } from './CoordFile';
import { repairTouched } from '../recovery/HolderRepair';
import { repairPile } from '../storage/PileFiles';
import type { RecordStore } from '../records/RecordStore';
import type { RecoveryReport } from '../recovery/Recovery';
import { Segment } from '../storage/Segment';
import { foldTail } from '../alloc/SegmentRows';
import { UndoLog } from '../recovery/UndoLog';
import { WriterTurn, type TurnHost } from './WriterTurn';

/**
 * The writer turn of a read-write mapped pile, with its shared state: the allocator works on the
 * free-list heads and dirty marks in pile.coord from now on. A holder's death is repaired by a
 * rescan of the segments its turn touched (HolderRepair), or where that can not be trusted by the
 * recovery an unclean open runs, then a checkpoint (reported in `report`). Undefined (no turn) for
 * a pile without pile.coord mapped as shared memory: in memory, or a process that writes alone.
 */
export function shareState(
  store: RecordStore,
  coord: CoordFile | undefined,
  report: RecoveryReport,
  checkpoint: () => void,
): WriterTurn | undefined {
  if (coord?.shared !== true) return undefined;
  const state = new SharedState(coord, store, () => {
    if (repairTouched(store, report, coord)) return;
    // From now on the rows are rewritten from pile.meta: a repair after this one dies must do the same.
    coord.u32[FULL_REPAIR] = 1;
    repairPile(store, report);
    checkpoint();
  });
  state.share(store.alloc);
  const turn = new WriterTurn(coord, state);
  turn.recoverKept = (onProgress) => repairTouched(store, report, coord, onProgress);
  return turn;
}

/**
 * The allocator fields a writer publishes in pile.coord at the end of its turn and another process
 * takes over at the start of its own (docs/format.md): the pile's counters and tail, then what
 * the checkpoint and merge logic keep. The segment rows (free-list heads and counters of each
 * segment) and the dirty marks need no copy: the allocator of a read-write pile works on them in
 * pile.coord itself (see share()); what a process derives from the rows is made again (relist).
 */
export const COORD_FIELDS = [
  ...STAT_FIELDS,
  'genFloor',
  'ckptTailSeg',
  'ckptTailOff',
  'ckptSegCount',
  'ckptSeq',
  'sinceCheckpoint',
  'freedSinceWalk',
  'damagedLists',
] as const;
if (COORD_FIELDS.length > COORD.COUNTER_SLOTS) throw new Error('coordination file counters overflow');

const COUNTERS = COORD.COUNTERS >>> 3;
const SEGMENT_COUNT = COORD.SEGMENT_COUNT >>> 2;
const CATALOG_SEQ = COORD.CATALOG_SEQ >>> 2;
const FULL_REPAIR = COORD.FULL_REPAIR >>> 2;
const LAST_TAIL = COORD.LAST_TAIL >>> 3;

type CopyFields = (alloc: Allocator, f64: Float64Array) => void;
/**
 * The copies of COORD_FIELDS between the allocator and pile.coord, straight-line code generated
 * from the list: a publish runs at every release of the turn (once per event-loop turn of a
 * process that writes in each), and a loop over the names is a keyed load of another name each
 * step (megamorphic, each double boxed), about 0.6 µs against a few ns for named loads.
 */
const publishFields = compileCached<CopyFields>(
  ['alloc', 'f64'],
  COORD_FIELDS.map((name, i) => `f64[${COUNTERS + i}] = alloc.${name};`).join('\n'),
);
const takeFields = compileCached<CopyFields>(
  ['alloc', 'f64'],
  COORD_FIELDS.map((name, i) => `alloc.${name} = f64[${COUNTERS + i}];`).join('\n'),
);

/**
 * What a read-write pile of several processes shares through pile.coord, as the {@link TurnHost}
 * of its {@link WriterTurn}: it publishes this process's allocator counters, segment count (with a
 * new incarnation for each segment it made) and catalog sequence, and takes over another's.
 */
export class SharedState implements TurnHost {
  /** The segments as this process last published or refreshed them, and their incarnations. */
  private known: Segment[] = [];
  private incarnations: number[] = [];
  /** The catalog sequence as this process last published or took it up. */
  private catalogSeq = -1;

  constructor(
    private readonly coord: CoordFile,
    private readonly store: RecordStore,
    /** Recovery from the files after a holder died (PileFiles.repairPile), then a checkpoint. */
    private readonly repairFiles: () => void,
  ) {}

  /** Points the allocator's segment rows and dirty marks at pile.coord (before any open work). */
  share(alloc: Allocator): void {
    alloc.rows = this.coord.rows;
    alloc.marks = this.coord.marks;
    alloc.onRows = (count) => this.coord.reserveRows(count);
    alloc.touched = this.coord.touched;
    alloc.intent = this.coord.pendingBody;
    alloc.foldAt = this.coord.foldTail;
    alloc.undo = new UndoLog(this.coord.u32, this.coord.f64, UNDO_PLACES, alloc.segmentSize);
  }

  turn(turn: number): void {
    this.store.alloc.epoch = turn;
  }

  completed(turn: number): void {
    this.storeTail();
    this.store.alloc.epoch = turn;
  }

  /** What a repair takes as it is beside the rows, the tail, stored with the undo log emptied (UndoLog.completing). */
  private storeTail(): void {
    const alloc = this.store.alloc;
    const undo = alloc.undo;
    const logged = undo.completing();
    const f64 = this.coord.f64;
    f64[LAST_TAIL] = alloc.tailAddr;
    f64[LAST_TAIL + 1] = alloc.tailEnd;
    f64[LAST_TAIL + 2] = alloc.tailGen;
    if (logged) undo.emptied();
  }

  publish(): void {
    // Retired blocks no live session may read any more go to the free lists before the counters are published.
    this.store.retired?.reclaim();
    const { alloc, segments } = this.store;
    // The rows are others' to read once the turn is released: the tail's pending counters go into its row.
    foldTail(alloc);
    // The frees and the fold are complete: a repair after a death from here on has nothing to put back.
    this.storeTail();
    publishFields(alloc, this.coord.f64);
    const n = segments.length;
    const known = this.known;
    if (n !== known.length || (n > 0 && segments[n - 1] !== known[n - 1])) this.countSegments();
    const u32 = this.coord.u32;
    u32[SEGMENT_COUNT] = n;
    u32[CATALOG_SEQ] = this.catalogSeq = this.store.catalog.seq;
  }

  changed(): boolean {
    const { segments, catalog } = this.store;
    const n = segments.length;
    const known = this.known;
    return catalog.seq !== this.catalogSeq || n !== known.length || (n > 0 && segments[n - 1] !== known[n - 1]);
  }

  refresh(): void {
    const { alloc, catalog, values } = this.store;
    alloc.undo.forget(); // another holder's log: emptied at this holder's first completion
    this.mapSegments(this.coord.segmentCount);
    takeFields(alloc, this.coord.f64);
    relist(alloc);
    const seq = this.coord.catalogSeq;
    if (catalog.seq !== seq) {
      catalog.load();
      // msgpackr reloads the record structures another process added before its next pack.
      values.forgetStructures();
      catalog.storedCodecs.clear();
    }
    this.catalogSeq = catalog.seq;
  }

  repair(): void {
    this.store.alloc.undo.forget(); // the dead holder's log is the repair's (HolderRepair)
    // The segments as far as published and still counted in pile.meta (a dead compact() may have
    // uncounted some since), then recovery brings them to what pile.meta counts.
    this.mapSegments(Math.min(this.coord.segmentCount, this.store.meta!.readHeader().segmentCount));
    // The state as published before the dead turn began: what a rescan of that turn's segments starts from.
    takeFields(this.store.alloc, this.coord.f64);
    this.repairFiles();
    this.coord.pendingBody[0] = 0;
    this.countSegments();
    this.catalogSeq = -1; // published by the release that follows
  }

  /** Segments this process made since its last publish (new objects) get the next incarnation of their index. */
  private countSegments(): void {
    const { segments } = this.store;
    const incs = this.coord.incarnations;
    for (let i = 0; i < segments.length; i++) {
      if (segments[i] === this.known[i]) continue;
      incs[i] = (incs[i]! + 1) >>> 0;
      this.incarnations[i] = incs[i]!;
    }
    this.known = segments.slice();
    this.incarnations.length = segments.length;
  }

  /** Maps the segments another process counted, remaps one it made again at an index, drops released ones. */
  private mapSegments(count: number): void {
    const { segments, dir, segmentSize, pileId } = this.store;
    const incs = this.coord.incarnations;
    for (let i = 0; i < count; i++) {
      if (i < segments.length && this.incarnations[i] === incs[i]) continue;
      const seg = Segment.open(dir!, i, segmentSize, pileId, false);
      if (i < segments.length) segments[i]!.release();
      segments[i] = seg;
      this.incarnations[i] = incs[i]!;
    }
    while (segments.length > count) segments.pop()!.release();
    this.known = segments.slice();
    this.incarnations.length = count;
  }
}
