import * as fs from 'node:fs';
import * as path from 'node:path';
import { native, type SharedMapping } from '@pile/native';
import { crc32 } from 'node:zlib';
import { ioError } from '../storage/FileAccess';
import { PileError } from '../PileError';
import { MAX_SEGMENTS } from '../records/PointerFormat';
import { READER_SLOTS, ReaderTable } from './ReaderTable';
import { ROW } from '../alloc/SegmentRows';
import { COORD, COORD_VERSION, HEAD_SIZE, LIFE } from './CoordLayout';
import { TurnLock } from './TurnLock';
import type { UndoPlaces } from '../recovery/UndoLog';

// The coordination file (docs/format.md, "The coordination file"; docs/concurrency.md):
// what every process that opens a pile shares while it is open. It holds no data of its own: every
// field is derived from pile.meta and the segment files, so a file that no live process maps is
// laid out afresh by the next opener; but one that a process of this boot left with its rows live
// (HEAD_CRC) is what that process worked on in place, and the next opener after a kill recovers
// from it (kept, below; HolderRepair).

export const COORD_FILE_NAME = 'pile.coord';
/** "PCRD" little-endian. */
export const COORD_MAGIC = 0x44524350;
export { COORD, COORD_VERSION };
/** A multiple of 65536, as SharedMapping requires: the head, then a row per segment (sparse until used). */
export const COORD_SIZE = HEAD_SIZE + MAX_SEGMENTS * ROW * 8;

/** Where the undo log (UndoLog.ts) lies, and what it may name. */
export const UNDO_PLACES: UndoPlaces = {
  state: COORD.UNDO,
  log: COORD.UNDO_LOG,
  end: COORD.MARKS,
  rows: COORD.ROWS,
  fold: COORD.FOLD_TAIL,
  retired: COORD.RETIRED_HEAD,
};

/** Bytes of the file locked with OFD locks (never written): they say who has the pile open. */
const LOCK_INIT = 0;
const LOCK_WRITERS = 1;
const LOCK_READERS = 2;
/** Held (write) by the one process whose pile has a cache or graph open: they change raw blocks outside the turn. */
const LOCK_STRUCTURES = 3;
/** How long an opener waits for another to finish laying the file out (it may be recovering a large pile). */
const INIT_WAIT_MS = 600_000;

/** Bytes of the boot id kept (a Linux boot id has 36). */
const BOOT_BYTES = 36;

/** A layout that fits: checked once, when this module loads. */
if (
  COORD.COUNTERS + COORD.COUNTER_SLOTS * 8 > COORD.FOLD_TAIL ||
  COORD.FOLD_TAIL + 8 > COORD.MARKS ||
  COORD.LIVES_STAMP + 4 > COORD.UNDO ||
  COORD.UNDO + 4 > COORD.UNDO_LOG ||
  COORD.MARKS + MAX_SEGMENTS > COORD.INCARNATIONS ||
  COORD.BOOT + BOOT_BYTES > COORD.HEAD_CRC
) {
  throw new Error('coordination file layout overlaps');
}
if (
  COORD.INCARNATIONS + MAX_SEGMENTS * 4 > COORD.READERS ||
  COORD.READERS + COORD.READER_SLOTS * COORD.READER_SLOT_SIZE > COORD.TOUCHED ||
  COORD.TOUCHED + MAX_SEGMENTS * 4 > COORD.LIVES ||
  COORD.LIVES + COORD.READER_SLOTS * LIFE.SIZE > COORD.ROWS ||
  COORD_SIZE % 65536 !== 0
) {
  throw new Error('coordination file layout overlaps');
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
const ENOSPC = 28;

/**
 * pile.coord mapped as a SharedArrayBuffer, with the writer turn's word in it. Opened by every opener of
 * a mapped pile: read-write opens create it and lay it out under an exclusive OFD lock of its byte
 * 0 when no live process has it open; read-only opens map it when it exists and never write it.
 */
export class CoordFile {
  readonly u32: Uint32Array;
  readonly f64: Float64Array;
  /** The segment rows, which a read-write pile's allocator works on in place. */
  readonly rows: Float64Array;
  readonly marks: Uint8Array;
  readonly incarnations: Uint32Array;
  /** Per segment, the turn that last wrote into it (COORD.TOUCHED). */
  readonly touched: Uint32Array;
  /** The body a growing set() is linking (COORD.PENDING_BODY). */
  readonly pendingBody: Float64Array;
  /** This open's slot in the reader table (claimed when the file is shared memory). */
  readonly readers: ReaderTable;
  /** The descriptor whose open file description holds this open's byte locks (-1 once closed). */
  get lockFd(): number {
    return this.fd;
  }
  /** The tail at the last fold of the tail's counters (COORD.FOLD_TAIL). */
  readonly foldTail: Float64Array;
  /** False for a process that could not map the file as shared memory and writes alone (see openWriter). */
  get shared(): boolean {
    return this.mapping !== undefined;
  }
  /**
   * True when this open laid the file out (no other process had the pile open): it then holds
   * the init lock until {@link initDone}, while it loads the pile from its files, so that openers
   * after it join a state that is complete.
   */
  readonly first: boolean;
  /**
   * True when this first open kept what the last process of this boot left (see openWriter): the
   * rows, turn numbers and tail it worked on in place, which the opener recovers from
   * (HolderRepair.repairTouched) instead of from pile.meta.
   */
  readonly kept: boolean;
  private reservedRows = 0;
  /** A read-only open's TurnLock, for holderGone() only (never claimed). */
  private holderCheck: TurnLock | undefined;

  private constructor(
    readonly file: string,
    private fd: number,
    private mapping: SharedMapping | undefined,
    /** The writer turn's lock (undefined for a read-only open or one that writes alone). */
    readonly turnLock: TurnLock | undefined,
    first: boolean,
    kept = false,
  ) {
    // A process that writes alone (no shared memory) gets views of private zeros: nothing reads them.
    const buf = mapping?.buffer ?? new ArrayBuffer(COORD_SIZE);
    this.u32 = new Uint32Array(buf);
    this.f64 = new Float64Array(buf);
    this.rows = new Float64Array(buf, COORD.ROWS, MAX_SEGMENTS * ROW);
    this.marks = new Uint8Array(buf, COORD.MARKS, MAX_SEGMENTS);
    this.incarnations = new Uint32Array(buf, COORD.INCARNATIONS, MAX_SEGMENTS);
    this.touched = new Uint32Array(buf, COORD.TOUCHED, MAX_SEGMENTS);
    this.pendingBody = new Float64Array(buf, COORD.PENDING_BODY, 1);
    this.foldTail = new Float64Array(buf, COORD.FOLD_TAIL, 1);
    this.first = first;
    this.kept = kept;
    this.readers = new ReaderTable(this);
  }

  /**
   * A read-write open: creates pile.coord if missing, then, under the exclusive init lock, lays it
   * out unless a live read-write opener has it (checked by its byte lock), and takes this
   * process's byte lock for as long as the pile is open. The first opener keeps the init lock
   * (see {@link first}). `keepFor`: the boot id of this machine when pile.meta says the pile was not
   * closed cleanly (undefined otherwise): a first opener then keeps the file as the last process
   * left it, instead of laying it out, when it is this layout's, of this pile, with its rows
   * stamped live on that boot and its header's CRC holding (see {@link kept}); only the turn's
   * word and the waiter count are made anew, and a holder that died is recorded as a dead holder's
   * taker records it (WriterTurn), so that the recovery rescans what that turn touched.
   * @throws PILE_IO when the file can not be created, sized, locked or mapped (the message names it)
   * @throws PILE_FORMAT_VERSION when a live process of another build uses another layout
   * @throws PILE_CORRUPT when pile.coord is not a regular file, or a live process's layout names another pile
   */
  static openWriter(dir: string, segmentSize: number, pileId: number, keepFor?: string): CoordFile {
    const file = path.join(dir, COORD_FILE_NAME);
    let fd: number;
    try {
      fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o644);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ELOOP') {
        throw new PileError('PILE_CORRUPT', `${file} is a symbolic link, not a coordination file`);
      }
      throw ioError(err, `can not open coordination file ${file}`);
    }
    let mapping: SharedMapping | undefined;
    let lock: TurnLock | undefined;
    try {
      checkRegular(fd, file);
      lockInit(fd, file);
      try {
        if (fs.fstatSync(fd).size < COORD_SIZE) {
          // Disk space for the head only: a row gets its own when its segment is made (reserveRows).
          native.reserve(fd, HEAD_SIZE);
          fs.ftruncateSync(fd, COORD_SIZE);
        }
        const live = native.ofdHolder(fd, LOCK_WRITERS, 1, 'write', file) !== null;
        let cannot: unknown;
        try {
          mapping = new native.SharedMapping(fd, COORD_SIZE, 0, file);
          const st = fs.fstatSync(fd);
          lock = new TurnLock(mapping, file, `${st.dev}:${st.ino}`);
        } catch (err) {
          cannot = err;
        }
        if (cannot !== undefined) return openSolo(fd, file, live, cannot, segmentSize, pileId);
        if (!native.ofdLock(fd, LOCK_WRITERS, 1, 'read', file)) {
          throw new PileError(
            'PILE_LOCKED',
            `${file}: the pile is open for writing by a process that could not map this file as shared memory, and so writes alone (byte ${LOCK_WRITERS} locked): close it first`,
          );
        }
        const u32 = new Uint32Array(mapping!.buffer);
        const first = !live || u32[COORD.READY >>> 2] !== 1;
        if (!first) checkHeader(u32, file, segmentSize, pileId);
        const kept = first && keepFor !== undefined && liveOn(u32, keepFor, segmentSize, pileId);
        if (kept) reopen(u32);
        else if (first) layOut(u32, segmentSize, pileId);
        const coord = new CoordFile(file, fd, mapping, lock, first, kept);
        coord.readers.claim();
        try {
          lock!.claim(coord.readers.slot);
        } catch (err) {
          coord.readers.release();
          throw err;
        }
        if (!first) coord.initDone();
        return coord;
      } catch (err) {
        native.ofdLock(fd, LOCK_INIT, 1, 'unlock', file);
        throw err;
      }
    } catch (err) {
      lock?.close();
      mapping?.unmap();
      fs.closeSync(fd);
      if (err instanceof PileError) throw err;
      throw ioError(err, `can not set up coordination file ${file}`);
    }

    /**
     * No shared memory in this process (started with --jitless, which has no WebAssembly; or a tool
     * that emulates mmap): it can not take turns with others, so it writes alone, holding the
     * writers' byte exclusively (another writer then gets PILE_LOCKED), or not at all.
     */
    function openSolo(fd: number, file: string, live: boolean, cannot: unknown, segmentSize: number, pileId: number): CoordFile {
      lock?.close();
      mapping?.unmap();
      if (live || !native.ofdLock(fd, LOCK_WRITERS, 1, 'write', file)) {
        throw new PileError(
          'PILE_LOCKED',
          `the pile is open for writing by other processes, and this process can not map ${file} as shared memory to take turns with them (${(cannot as Error).message})`,
        );
      }
      // It writes the pile without the rows of this file: they must not be kept by the next opener.
      const head = Buffer.alloc(COORD.OWNER);
      if (fs.readSync(fd, head, 0, COORD.OWNER, 0) === COORD.OWNER) {
        const u32 = new Uint32Array(head.buffer, head.byteOffset, COORD.OWNER >>> 2);
        if (liveOn(u32, undefined, segmentSize, pileId)) fs.writeSync(fd, Buffer.alloc(4), 0, 4, COORD.HEAD_CRC);
      }
      return new CoordFile(file, fd, undefined, undefined, true);
    }
  }

  /**
   * A read-only open: maps pile.coord when it exists, is laid out for this pile and can be opened
   * for mapping; never creates, lays out or writes it. Undefined otherwise (a pile last written by
   * an older build, or a directory this process may not write).
   */
  static openReader(dir: string, segmentSize: number, pileId: number): CoordFile | undefined {
    const file = path.join(dir, COORD_FILE_NAME);
    // O_RDWR: a shared mapping of a SharedArrayBuffer is writable. A read-only open writes its own
    // slot of the reader table and the session count, nothing else.
    const fd = openExisting(file, fs.constants.O_RDWR);
    if (fd === undefined) return undefined;
    try {
      if (!fs.fstatSync(fd).isFile() || fs.fstatSync(fd).size < COORD_SIZE) {
        fs.closeSync(fd);
        return undefined;
      }
      const mapping = new native.SharedMapping(fd, COORD_SIZE, 0, file);
      const u32 = new Uint32Array(mapping.buffer);
      if (
        u32[COORD.MAGIC >>> 2] !== COORD_MAGIC ||
        u32[COORD.VERSION >>> 2] !== COORD_VERSION ||
        u32[COORD.SEGMENT_SIZE >>> 2] !== segmentSize ||
        u32[COORD.PILE_ID >>> 2] !== pileId
      ) {
        mapping.unmap();
        fs.closeSync(fd);
        return undefined;
      }
      native.ofdLock(fd, LOCK_READERS, 1, 'read', file);
      const coord = new CoordFile(file, fd, mapping, undefined, false);
      try {
        coord.readers.claim();
      } catch (err) {
        coord.close();
        throw err;
      }
      return coord;
    } catch (err) {
      // A full reader table is reported: an open without a slot would read unprotected by it.
      if (err instanceof PileError) throw err;
      fs.closeSync(fd);
      return undefined;
    }
  }

  /**
   * Gives the rows of segments 0..count-1 disk space, so that writing them through the mapping
   * never meets a full disk (a SIGBUS). Where the file system can not reserve, they stay sparse.
   * @throws PILE_IO when the disk is full, naming the file
   */
  reserveRows(count: number): void {
    if (count <= this.reservedRows || this.fd < 0) return;
    const r = native.reserve(this.fd, COORD.ROWS + count * ROW * 8);
    if (r === ENOSPC) throw new PileError('PILE_IO', `no disk space for the rows of ${count} segments in ${this.file}`);
    this.reservedRows = count;
  }

  /**
   * The rows are complete (the first opener loaded the pile): stamps this boot, so that the first
   * opener after every process of this boot was killed may keep them (see openWriter).
   */
  stampLive(bootId: string): void {
    if (this.mapping === undefined || bootId === '') return;
    const b = Buffer.from(this.u32.buffer, 0, COORD.OWNER);
    b.fill(0, COORD.BOOT, COORD.HEAD_CRC);
    b.write(bootId.slice(0, BOOT_BYTES), COORD.BOOT, 'latin1');
    b.writeUInt32LE(headCrc(this.u32), COORD.HEAD_CRC);
  }

  /** The rows are not to be kept by a later opener: an open that kept them but could not recover from them. */
  distrust(): void {
    if (this.mapping !== undefined) this.u32[COORD.HEAD_CRC >>> 2] = ~headCrc(this.u32) >>> 0;
  }

  /** The write sequence: changes whenever a writer published a change. */
  get writeSeq(): number {
    return Atomics.load(this.u32, COORD.WRITE_SEQ >>> 2);
  }

  get segmentCount(): number {
    return Atomics.load(this.u32, COORD.SEGMENT_COUNT >>> 2);
  }

  get catalogSeq(): number {
    return Atomics.load(this.u32, COORD.CATALOG_SEQ >>> 2);
  }

  /** The first opener has loaded the pile and published its state: others may join. */
  initDone(): void {
    native.ofdLock(this.fd, LOCK_INIT, 1, 'unlock', this.file);
  }

  /** Takes the init lock again, to close: no opener joins while this one decides whether it is the last. */
  holdInit(): void {
    lockInit(this.fd, this.file);
  }

  /** Whether a live read-write open of the pile in `dir` (this process's included) holds pile.coord. */
  static writersLive(dir: string): boolean {
    const file = path.join(dir, COORD_FILE_NAME);
    const fd = openExisting(file, fs.constants.O_RDONLY);
    if (fd === undefined) return false;
    try {
      return native.ofdHolder(fd, LOCK_WRITERS, 1, 'write', file) !== null;
    } catch {
      return false;
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * Takes (or holds already) the byte lock of caches and graphs: exclusively for the one writing
   * open that has them (`write`), shared by read-only opens that read them. False when an open
   * holds it in a way that excludes this one.
   */
  holdStructures(mode: 'read' | 'write'): boolean {
    return native.ofdLock(this.fd, LOCK_STRUCTURES, 1, mode, this.file);
  }

  /**
   * Whether the writer turn names a holder that died or closed holding it (TurnLock.holderGone): a
   * change it left open lasts until the next writer repairs it. A read-only open asks through a
   * TurnLock of its own. A mutex that can not be checked answers false: the reader waits on.
   */
  holderGone(): boolean {
    if (this.mapping === undefined) return false;
    try {
      const st = this.turnLock === undefined && this.holderCheck === undefined ? fs.fstatSync(this.fd) : undefined;
      if (st !== undefined) this.holderCheck = new TurnLock(this.mapping, this.file, `${st.dev}:${st.ino}`);
      return (this.turnLock ?? this.holderCheck)!.holderGone();
    } catch {
      return false;
    }
  }

  /** Whether another live read-write open of the pile (another process) has the file open. */
  otherWriters(): boolean {
    return native.ofdHolder(this.fd, LOCK_WRITERS, 1, 'write', this.file) !== null;
  }

  /** Drops this open's byte locks (the init lock too) and unmaps. Idempotent. */
  close(): void {
    if (this.fd < 0) return;
    // The liveness mutex first: the slot's next claimer locks it.
    this.turnLock?.close();
    this.holderCheck?.close();
    if (this.mapping !== undefined) this.readers.release();
    this.mapping?.unmap();
    this.mapping = undefined;
    fs.closeSync(this.fd);
    this.fd = -1;
  }
}

function checkRegular(fd: number, file: string): void {
  const st = fs.fstatSync(fd);
  if (!st.isFile()) throw new PileError('PILE_CORRUPT', `${file} is not a regular file`);
}

/** Waits (sleeping, not spinning) for the exclusive init lock: another opener is laying the file out. */
function lockInit(fd: number, file: string): void {
  // A monotonic clock: a step of the wall clock must not end the wait early or make it last for ever.
  const deadline = performance.now() + INIT_WAIT_MS;
  let pause = 1;
  while (!native.ofdLock(fd, LOCK_INIT, 1, 'write', file)) {
    if (performance.now() > deadline) {
      throw new PileError('PILE_LOCKED', `another process held the init lock of ${file} (offset ${LOCK_INIT}) for ${INIT_WAIT_MS} ms`);
    }
    Atomics.wait(sleeper, 0, 0, pause);
    pause = Math.min(pause * 2, 50);
  }
}

/** A live writer's layout must be this build's and this pile's. */
function checkHeader(u32: Uint32Array, file: string, segmentSize: number, pileId: number): void {
  if (u32[COORD.MAGIC >>> 2] !== COORD_MAGIC) {
    throw new PileError('PILE_CORRUPT', `${file}: bad magic at offset ${COORD.MAGIC} while another process has it open`);
  }
  const version = u32[COORD.VERSION >>> 2]!;
  if (version !== COORD_VERSION) {
    throw new PileError(
      'PILE_FORMAT_VERSION',
      `${file} has layout version ${version} (offset ${COORD.VERSION}) in a live process; this build uses ${COORD_VERSION}: close the other build's processes first`,
    );
  }
  if (u32[COORD.SEGMENT_SIZE >>> 2] !== segmentSize || u32[COORD.PILE_ID >>> 2] !== pileId) {
    throw new PileError(
      'PILE_CORRUPT',
      `${file}: segment size or pile id (offsets ${COORD.SEGMENT_SIZE}, ${COORD.PILE_ID}) are not those of pile.meta`,
    );
  }
}

/** CRC32 of the header without READY (which a layout moves) and of the boot id (COORD.HEAD_CRC). */
function headCrc(u32: Uint32Array): number {
  const b = Buffer.from(u32.buffer, u32.byteOffset, COORD.OWNER);
  return crc32(b.subarray(COORD.SEGMENT_SIZE, COORD.HEAD_CRC), crc32(b.subarray(0, COORD.READY))) >>> 0;
}

/**
 * The file was laid out for this layout and pile, and its rows were stamped live on the boot
 * `bootId` (any boot when undefined), with the header's CRC holding: what a process of that boot
 * worked on in place.
 */
function liveOn(u32: Uint32Array, bootId: string | undefined, segmentSize: number, pileId: number): boolean {
  if (
    u32[COORD.READY >>> 2] !== 1 ||
    u32[COORD.MAGIC >>> 2] !== COORD_MAGIC ||
    u32[COORD.VERSION >>> 2] !== COORD_VERSION ||
    u32[COORD.SEGMENT_SIZE >>> 2] !== segmentSize ||
    u32[COORD.PILE_ID >>> 2] !== pileId ||
    u32[COORD.FILE_SIZE >>> 2] !== COORD_SIZE ||
    u32[COORD.HEAD_CRC >>> 2] !== headCrc(u32)
  )
    return false;
  if (bootId === undefined) return true;
  const b = Buffer.from(u32.buffer, u32.byteOffset, COORD.OWNER);
  const stamped = b.toString('latin1', COORD.BOOT, COORD.HEAD_CRC).replace(/\0+$/, '');
  return bootId !== '' && bootId.length <= BOOT_BYTES && stamped === bootId;
}

/**
 * Keeps the file as the last process of this boot left it (openWriter's `keepFor`): a turn's word
 * and a waiter count of nobody, and the last holder's death recorded as WriterTurn records one it finds
 * (a repair that died unfinished already left it recorded): the state invalid until the
 * recovery, which rescans the segments stamped by that turn or later, is published.
 */
function reopen(u32: Uint32Array): void {
  // No live writer: every liveness mutex is made afresh at its next claim (a copy of the file, say,
  // holds them locked by threads that never died in it).
  TurnLock.layOut(u32);
  Atomics.store(u32, COORD.WAITERS >>> 2, 0);
  if (Atomics.load(u32, COORD.STATE_VALID >>> 2) === 1) {
    u32[COORD.REPAIR_FROM >>> 2] = u32[COORD.TURN >>> 2]!;
    u32[COORD.FULL_REPAIR >>> 2] = 0;
    Atomics.store(u32, COORD.STATE_VALID >>> 2, 0);
  }
}

/** Lays the file out afresh; only under the init lock with no live opener. READY is set last. */
function layOut(u32: Uint32Array, segmentSize: number, pileId: number): void {
  Atomics.store(u32, COORD.READY >>> 2, 0);
  // Not the rows: a row is written whole (a checkpoint's, a rebuild's, a new segment's) before it is read.
  // Nor the epoch, the session count and the reader table: read-only opens may be in sessions now
  // (their slots are told live or dead by their byte locks, never by what the file held before).
  const bytes = new Uint8Array(u32.buffer);
  const epoch = new Float64Array(u32.buffer)[COORD.EPOCH >>> 3]!;
  // A file of an older layout (2 kept list heads here) holds no epoch: no open of this layout can be in a session on it.
  if (!(Number.isInteger(epoch) && epoch >= 0 && epoch < 2 ** 52))
    bytes.fill(0, COORD.EPOCH, COORD.READERS + READER_SLOTS * COORD.READER_SLOT_SIZE);
  // The retired list is dropped (recovery frees its blocks): sessions that outlive this open lose their pin.
  const reuseGen = u32[COORD.REUSE_GEN >>> 2]!;
  bytes.fill(0, 0, COORD.EPOCH);
  bytes.fill(0, COORD.SESSIONS + 4, COORD.READERS);
  u32[COORD.REUSE_GEN >>> 2] = (reuseGen + 1) >>> 0;
  bytes.fill(0, COORD.READERS + READER_SLOTS * COORD.READER_SLOT_SIZE, HEAD_SIZE);
  u32[COORD.MAGIC >>> 2] = COORD_MAGIC;
  u32[COORD.VERSION >>> 2] = COORD_VERSION;
  u32[COORD.SEGMENT_SIZE >>> 2] = segmentSize;
  u32[COORD.PILE_ID >>> 2] = pileId;
  u32[COORD.FILE_SIZE >>> 2] = COORD_SIZE;
  // After the fills, which zeroed every liveness mutex's stamp: each is made afresh at its slot's next claim.
  TurnLock.layOut(u32);
  Atomics.store(u32, COORD.READY >>> 2, 1);
}

/** `file` opened with `flags`, never through a symbolic link; undefined when it can not be (absent, a link, no permission). */
function openExisting(file: string, flags: number): number | undefined {
  try {
    return fs.openSync(file, flags | fs.constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
}
