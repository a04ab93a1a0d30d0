import * as fs from 'node:fs';
import { constants as osConstants } from 'node:os';
import * as path from 'node:path';
import { getSystemErrorName } from 'node:util';
import { native, type Mapping } from '@pile/native';
import {
  FORMAT_VERSION,
  OLDEST_FORMAT_VERSION,
  MIN_BLOCK_SIZE,
  SEGMENT_HEADER_SIZE,
  SEGMENT_MAGIC,
  STATE_FREE,
  stateOf,
} from './BlockFormat';
import { SEQ_WORD, clearDeadMark } from '../concurrency/ChangeSeq';
import { createExclusive, ioError, openExisting } from './FileAccess';
import { PileError } from '../PileError';

const ZERO_CHUNK = 1 << 20;
/**
 * A transparent huge page on x86-64 (and arm64 with 4 KiB pages). An in-memory segment asks for
 * huge pages past its first one (see inMemory).
 */
const HUGE_PAGE = 2 << 20;
/**
 * Whether pages can be faulted in ahead of the writer on a libuv worker (MADV_POPULATE_WRITE,
 * Linux 5.14+, through @pile/native's Mapping.populate). Only on the main thread: a worker thread
 * that is terminated while such a job runs would close its event loop with a request still open,
 * which Node treats as fatal. Decided on first use, so that a process that only reads (a warm
 * restart) does not load node:worker_threads.
 */
let canPopulate: boolean | undefined;
/** Whether this is the main thread, where pool jobs of a mapping may run (see canPopulate). */
let mainThread: boolean | undefined;
const EMPTY = Buffer.alloc(0);
const EMPTY_U32 = new Uint32Array(0);
const EMPTY_F64 = new Float64Array(0);
const EMPTY_VIEW = new DataView(new ArrayBuffer(0));

/** errno values of a file system that can not reserve space: the file is then written full. */
const CANNOT_RESERVE = new Set([osConstants.errno.EOPNOTSUPP, osConstants.errno.ENOSYS, osConstants.errno.EINVAL]);

/**
 * How a new segment file gets its disk space; an object so that tests can replace a step.
 * `reserve` is posix_fallocate (through @pile/native): the blocks are allocated, unwritten, in
 * well under a millisecond. `zeroFill` writes the file full of zeros (60 to 165 ms for 64 MiB on
 * this machine), for file systems that can not reserve; `write` is its one write (fs.writeSync).
 */
export const segmentFiles = {
  /** 0, or the errno of the failure. */
  reserve(fd: number, size: number): number {
    return native.reserve(fd, size);
  },
  /** Bytes written; fewer than asked when the disk fills up mid-write. */
  write(fd: number, buf: Buffer, offset: number, length: number, position: number): number {
    return fs.writeSync(fd, buf, offset, length, position);
  },
  /**
   * Writes zeros over [0, size). A short write is carried on from where it stopped; one that
   * writes nothing means the disk is full. A file left short would be mapped past its end,
   * and the first store there would kill the process with SIGBUS.
   * @throws Error with code ENOSPC when no more can be written
   */
  zeroFill(fd: number, size: number): void {
    const zeros = Buffer.alloc(Math.min(ZERO_CHUNK, size));
    let pos = 0;
    while (pos < size) {
      const n = segmentFiles.write(fd, zeros, 0, Math.min(zeros.length, size - pos), pos);
      if (!(n > 0)) throw Object.assign(new Error(`no space left: ${pos} of ${size} bytes written (ENOSPC)`), { code: 'ENOSPC' });
      pos += n;
    }
  },
};

/** A window's start is a multiple of this: the largest page size of the systems Pile runs on (64 KiB). */
const WINDOW_ALIGN = 1 << 16;

/** Part of a segment's file mapped on its own (see Segment.window): `u32[(off - base) >>> 2]` is the word at segment offset `off`. */
export interface SegmentWindow {
  /** Segment offset of byte 0 of `buf`. */
  readonly base: number;
  /** Segment offset just past the window. */
  readonly end: number;
  readonly buf: Buffer;
  readonly u32: Uint32Array;
  /** Unmaps the window (its views read zeros from then on). */
  release(): void;
}

/** File name of segment `index` inside a pile directory. */
export function segmentFileName(index: number): string {
  return `seg-${String(index).padStart(6, '0')}.pile`;
}

/**
 * One contiguous region of pile memory: an off-heap Buffer for in-memory piles, or a
 * whole file mapped shared for mapped piles. The typed views all start at byte 0 of the
 * segment, so block offsets index them directly (`u32[off >> 2]`, `f64[off >> 3]`).
 */
export class Segment {
  // Empty until the segment is mapped (see use()): an open maps nothing, so it costs the same
  // whatever the number of segments, and each mapping is made when something first needs it.
  buf: Buffer = EMPTY;
  u32: Uint32Array = EMPTY_U32;
  f64: Float64Array = EMPTY_F64;
  view: DataView = EMPTY_VIEW;
  /** True once the views above cover the segment. */
  mapped = false;
  /** The memory under the views; unmapped by release(). */
  private mapping: Mapping | undefined;
  /** Inode of the file mapped (0 until mapped from a file): tells a file made again at this index (remade()). */
  private ino = 0;

  private constructor(
    readonly index: number,
    /** Path of the backing file, undefined in memory. */
    readonly file: string | undefined,
    private readonly size: number,
    private readonly readonlyMap: boolean,
    mapping: Mapping | undefined,
  ) {
    if (mapping !== undefined) this.attach(mapping);
  }

  /**
   * Whether the file at this segment's path is another file than the one mapped: `compact()` in
   * another process released the segment (deleting its file) and a process made it again. A
   * system call (stat): for the path of a read that found no live record, never for a hit.
   */
  remade(): boolean {
    if (this.ino === 0) return false;
    try {
      return fs.statSync(this.file!).ino !== this.ino;
    } catch {
      return false; // released and not made again: the pointer is stale
    }
  }

  /**
   * This segment, mapped first if it is not yet.
   * @throws PILE_CORRUPT when its file changed since open
   * @throws PILE_OUT_OF_SPACE when the address space is exhausted (ENOMEM), PILE_IO for other mmap errors
   */
  use(): this {
    if (!this.mapped) this.map();
    return this;
  }

  /**
   * A segment in process memory outside the V8 heap: private anonymous pages, zero until
   * written, returned to the system by release() without waiting for a GC.
   *
   * Past its first 2 MiB the segment asks for transparent huge pages (MADV_HUGEPAGE; Linux's
   * default THP mode, `madvise`, gives them only to ranges that ask). Random reads and writes over
   * a large pile (a cache table's slots and entries) otherwise miss the TLB on most accesses, and
   * a miss costs a page walk, which in a virtual machine walks two page tables: with 2 MiB pages
   * a cache's replacing put ran 3 to 12 % faster in one-process comparisons (docs/benchmarks.md,
   * the cache put, 2026-12-02). The first
   * 2 MiB keep 4 KiB pages, so a small pile commits only the pages it writes. A kernel without
   * THP refuses the advice, and the segment keeps 4 KiB pages.
   * @throws PILE_OUT_OF_SPACE when the memory can not be mapped
   */
  static inMemory(index: number, size: number, pileId: number): Segment {
    let mapping: Mapping;
    try {
      mapping = new native.Mapping(-1, size, 0, true);
    } catch (err) {
      throw new PileError('PILE_OUT_OF_SPACE', `can not map ${size} bytes of memory for segment ${index}: ${(err as Error).message}`);
    }
    if (size >= 2 * HUGE_PAGE) {
      try {
        mapping.advise(HUGE_PAGE, size - HUGE_PAGE, native.ADVICE.HUGEPAGE);
      } catch {
        // EINVAL: a kernel built without transparent huge pages. The advice is only a hint.
      }
    }
    const seg = new Segment(index, undefined, size, false, mapping);
    seg.writeHeader(size, pileId);
    return seg;
  }

  /**
   * Creates the file of segment `index` with all its disk blocks allocated (reserved, or else
   * written with zeros), so that the mapping never meets a hole it would have to allocate on a
   * page fault (a full disk would then kill the process with SIGBUS instead of failing here with
   * an error).
   * @throws PILE_OUT_OF_SPACE when the file can not be made (disk full, permissions)
   */
  static create(dir: string, index: number, size: number, pileId: number): Segment {
    const file = path.join(dir, segmentFileName(index));
    let fd: number | undefined;
    try {
      fd = createExclusive(file);
      const errno = segmentFiles.reserve(fd, size);
      if (errno !== 0 && !CANNOT_RESERVE.has(errno))
        throw new Error(`reserving ${size} bytes failed: ${getSystemErrorName(-errno)} (errno ${errno})`);
      if (errno !== 0) segmentFiles.zeroFill(fd, size);
      // Whole or refused: a file shorter than the mapping would end in SIGBUS, not an error.
      const written = fs.fstatSync(fd).size;
      if (written !== size) throw new Error(`the file is ${written} bytes after filling, expected ${size}`);
      // The segment header plus the header of one free block over the rest (word1 0 = free,
      // generation 0): a crash after the meta file counts this segment, before the allocator
      // writes to it, leaves a walkable segment rather than a zero block size that recovery
      // would have to quarantine.
      const header = Buffer.alloc(SEGMENT_HEADER_SIZE + 8);
      writeHeaderInto(header, index, size, pileId);
      header.writeUInt32LE(size - SEGMENT_HEADER_SIZE, SEGMENT_HEADER_SIZE);
      fs.writeSync(fd, header, 0, header.length, 0);
      return new Segment(index, file, size, false, new native.Mapping(fd, size, 0, true, file));
    } catch (err) {
      // Only a file this call created is removed (a refused link or foreign entry stays as it was).
      if (fd !== undefined)
        try {
          fs.unlinkSync(file);
        } catch {
          /* already gone */
        }
      if (err instanceof PileError) throw err;
      throw new PileError('PILE_OUT_OF_SPACE', `can not create segment file ${file}: ${(err as Error).message}`);
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
  }

  /**
   * Maps an existing segment file after checking its size and header, so that a truncated
   * file is refused here rather than met as SIGBUS on first access.
   * @throws PILE_CORRUPT when the file is missing, of the wrong size, or its header does not match
   * @throws PILE_FORMAT_VERSION when the file was written by a newer format
   */
  static open(dir: string, index: number, size: number, pileId: number, readonly: boolean, clearMark = false): Segment {
    const file = path.join(dir, segmentFileName(index));
    const fd = openSegmentFile(file, readonly);
    try {
      const st = fs.fstatSync(fd);
      if (st.size !== size) {
        throw new PileError('PILE_CORRUPT', `segment file ${file} is ${st.size} bytes, expected ${size} (truncated or damaged)`);
      }
      const header = Buffer.alloc(SEGMENT_HEADER_SIZE);
      fs.readSync(fd, header, 0, header.length, 0);
      checkHeader(header, file, index, size, pileId);
      if (clearMark && !readonly) clearMarkInFile(fd, header);
      return new Segment(index, file, size, readonly, undefined);
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * True when the file of segment `index` is shorter than a segment and holds no record: what a
   * segment whose filling stopped on a full disk leaves (versions before the checked zero-fill
   * counted it in the meta file anyway, and died with SIGBUS on its first store past the end).
   * The file must hold this pile's segment header and every block header that lies wholly inside
   * it must be a free block of a sane size. Such a segment held no acknowledged data: the open drops it.
   */
  static isShortAndEmpty(dir: string, index: number, size: number, pileId: number): boolean {
    const file = path.join(dir, segmentFileName(index));
    let fd: number | undefined;
    try {
      fd = openExisting(file, true);
    } catch {
      return false; // the open that follows reports it
    }
    if (fd === undefined) return false;
    try {
      const length = fs.fstatSync(fd).size;
      if (length >= size) return false;
      const bytes = Buffer.alloc(length);
      let got = 0;
      while (got < length) {
        const n = fs.readSync(fd, bytes, got, length - got, got);
        if (n <= 0) return false;
        got += n;
      }
      // Without its header and first block header nothing tells what the file held: damage, refused.
      if (length < SEGMENT_HEADER_SIZE + 8) return false;
      if (
        bytes.readUInt32LE(0) !== SEGMENT_MAGIC ||
        bytes.readUInt32LE(8) !== index ||
        bytes.readUInt32LE(12) !== size ||
        bytes.readUInt32LE(16) !== pileId
      ) {
        return false;
      }
      for (let off = SEGMENT_HEADER_SIZE; off + 8 <= length;) {
        const blockSize = bytes.readUInt32LE(off);
        if (blockSize < MIN_BLOCK_SIZE || (blockSize & 7) !== 0 || off + blockSize > size) return false;
        if (stateOf(bytes.readUInt32LE(off + 4)) !== STATE_FREE) return false;
        off += blockSize;
      }
      return true;
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * Asks a libuv worker to fault in the pages of bytes [from, to) for writing, so that the
   * writer filling them does not take a page fault per 4 KiB itself (about 1.3 µs each on a VM,
   * a tenth of a small put). The content never changes; the worker holds the mapping alive until
   * it is done. Does nothing where the kernel can not (see canPopulate) or before the segment is mapped.
   */
  populate(from: number, to: number): void {
    canPopulate ??= native.populateSupported() && (require('node:worker_threads') as typeof import('node:worker_threads')).isMainThread;
    if (canPopulate && this.mapped && !this.readonlyMap && to > from) this.mapping!.populate(from, to - from);
  }

  /**
   * Faults the pages of bytes [from, to) in for reading, mapping the segment first (the warm
   * option, see Warm.ts). On the main thread on a libuv worker: MADV_POPULATE_READ, or a read of
   * one byte per page where the kernel lacks it. In a worker thread, whose termination must not find
   * a pool job running (see canPopulate), MADV_WILLNEED from the calling thread: it starts reading
   * the file into the page cache and returns, so reads find the pages in memory, though each first
   * touch still maps its page. Resolves when done.
   * @throws PILE_CORRUPT, PILE_OUT_OF_SPACE, PILE_IO as use() does
   * @returns rejects with the errno error of the job (ENOMEM; ENXIO when released before it ran)
   */
  warm(from: number, to: number): Promise<unknown> {
    mainThread ??= (require('node:worker_threads') as typeof import('node:worker_threads')).isMainThread;
    const mapping = this.use().mapping!;
    if (mainThread) return mapping.warm(from, to - from);
    mapping.advise(from, to - from, native.ADVICE.WILLNEED);
    return new Promise((resolve) => setImmediate(resolve));
  }

  /**
   * msync: the segment's pages reach the disk before this returns. An unmapped segment has none to write.
   * @throws PILE_IO naming the errno (EIO, ...) and the file when the kernel can not write them
   */
  sync(): void {
    if (this.file === undefined || !this.mapped) return;
    try {
      this.mapping!.sync();
    } catch (err) {
      throw ioError(err, `can not sync segment file ${this.file}`);
    }
  }

  /**
   * A writable mapping of bytes [base, base + length) of this segment's file only, where base is
   * `from` rounded down to WINDOW_ALIGN and length at most `maxBytes`: for a recovery that reads
   * and writes a few MiB past the checkpoint's tail. Mapping the whole segment would make V8 count
   * its size as external memory and start a mark-compact (from about 64 MiB on, measured in
   * docs/benchmarks.md) that the walk does not need. Its stores reach the same page-cache pages
   * as a whole mapping's. undefined when the segment is mapped already (its views serve), is in
   * memory, or is open read-only.
   * @throws PILE_CORRUPT, PILE_OUT_OF_SPACE, PILE_IO as use() does
   */
  window(from: number, maxBytes: number): SegmentWindow | undefined {
    if (this.mapped || this.file === undefined || this.readonlyMap) return undefined;
    const base = from - (from % WINDOW_ALIGN);
    const length = Math.min(this.size - base, maxBytes - (maxBytes % WINDOW_ALIGN));
    if (length <= 0) return undefined;
    const mapping = this.mapFile(length, base);
    const buf = mapping.buffer;
    return {
      base,
      end: base + length,
      buf,
      u32: new Uint32Array(buf.buffer, buf.byteOffset, length >>> 2),
      release: () => mapping.unmap(),
    };
  }

  /**
   * The file a recovery reads and writes this segment's blocks through while it is not mapped
   * (FileRegions.ts): undefined when it is mapped (its views serve), in memory, or open read-only.
   */
  unmappedFile(): string | undefined {
    return this.mapped || this.readonlyMap ? undefined : this.file;
  }

  private map(): void {
    this.attach(this.mapFile(this.size, 0));
  }

  /** Maps bytes [offset, offset + length) of the file, after checking its size again. */
  private mapFile(length: number, offset: number): Mapping {
    const file = this.file!;
    const fd = openSegmentFile(file, this.readonlyMap);
    try {
      // Checked again: a file cut short since open must be refused here, not met as SIGBUS.
      const st = fs.fstatSync(fd);
      if (st.size !== this.size) {
        throw new PileError('PILE_CORRUPT', `segment file ${file} is ${st.size} bytes, expected ${this.size} (truncated or damaged)`);
      }
      this.ino = st.ino;
      try {
        return new native.Mapping(fd, length, offset, !this.readonlyMap, file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOMEM') {
          throw new PileError('PILE_OUT_OF_SPACE', `segment file ${file} can not be mapped: ${(err as Error).message}`);
        }
        throw ioError(err, `can not map segment file ${file}`);
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * Moves on to even a change mark (ChangeSeq.ts) that a writer which died in the middle of a
   * change left odd, so that readers stop waiting for it. Only the holder of the writer turn (or a
   * writer alone) may call it, before it changes anything: nobody else can be in a change then.
   * @throws PILE_IO when the segment's file can not be read or written
   */
  clearDeadMark(): void {
    if (this.mapped) {
      clearDeadMark(this.u32);
      return;
    }
    if (this.file === undefined || this.readonlyMap) return;
    const fd = openSegmentFile(this.file, false);
    try {
      const header = Buffer.alloc(SEGMENT_HEADER_SIZE);
      fs.readSync(fd, header, 0, header.length, 0);
      clearMarkInFile(fd, header);
    } catch (err) {
      throw ioError(err, `can not clear the change mark of segment file ${this.file}`);
    } finally {
      fs.closeSync(fd);
    }
  }

  private attach(mapping: Mapping): void {
    const buf = mapping.buffer;
    this.mapping = mapping;
    this.buf = buf;
    this.u32 = new Uint32Array(buf.buffer, buf.byteOffset, buf.length >>> 2);
    this.f64 = new Float64Array(buf.buffer, buf.byteOffset, buf.length >>> 3);
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.length);
    // msgpackr's unpack takes a source's DataView from here (ValueEncoding.decode unpacks from the
    // segment itself); it would add the property on first use, giving segment Buffers two shapes.
    (buf as Buffer & { dataView?: DataView }).dataView = this.view;
    this.mapped = true;
  }

  /**
   * Gives the segment's memory back at once, without waiting for a GC. A view of it still held
   * anywhere (a Buffer from rawBuffer, a typed array kept by a cache or graph handle) reads zeros
   * from then on and never faults; its writes reach no file.
   */
  release(): void {
    this.mapping?.unmap();
    this.mapping = undefined;
    this.buf = EMPTY;
    this.u32 = EMPTY_U32;
    this.f64 = EMPTY_F64;
    this.view = EMPTY_VIEW;
    this.mapped = false;
  }

  private writeHeader(size: number, pileId: number): void {
    writeHeaderInto(this.buf, this.index, size, pileId);
  }
}

function writeHeaderInto(b: Buffer, index: number, size: number, pileId: number): void {
  b.writeUInt32LE(SEGMENT_MAGIC, 0);
  b.writeUInt32LE(FORMAT_VERSION, 4);
  b.writeUInt32LE(index, 8);
  b.writeUInt32LE(size, 12);
  b.writeUInt32LE(pileId, 16);
}

function checkHeader(b: Buffer, file: string, index: number, size: number, pileId: number): void {
  if (b.readUInt32LE(0) !== SEGMENT_MAGIC) throw new PileError('PILE_CORRUPT', `segment file ${file}: bad magic at offset 0`);
  const version = b.readUInt32LE(4);
  if (version > FORMAT_VERSION) {
    throw new PileError(
      'PILE_FORMAT_VERSION',
      `segment file ${file} has format version ${version}; this build reads up to ${FORMAT_VERSION}`,
    );
  }
  if (version < OLDEST_FORMAT_VERSION)
    throw new PileError('PILE_CORRUPT', `segment file ${file}: bad format version ${version} at offset 4`);
  if (b.readUInt32LE(8) !== index)
    throw new PileError('PILE_CORRUPT', `segment file ${file}: header says segment ${b.readUInt32LE(8)} at offset 8`);
  if (b.readUInt32LE(12) !== size)
    throw new PileError('PILE_CORRUPT', `segment file ${file}: header says size ${b.readUInt32LE(12)} at offset 12`);
  if (b.readUInt32LE(16) !== pileId) throw new PileError('PILE_CORRUPT', `segment file ${file} belongs to another pile (id at offset 16)`);
}

/**
 * @throws PILE_CORRUPT when the file is missing or not a regular file
 * @throws PILE_IO when it exists but can not be opened (permissions, I/O error)
 */
/** Writes the change mark (ChangeSeq.ts, byte 20) of the header read from `fd` even, if it is odd: through the page cache, which the mappings share. */
function clearMarkInFile(fd: number, header: Buffer): void {
  const seq = header.readUInt32LE(SEQ_WORD * 4);
  if ((seq & 1) === 0) return;
  const word = Buffer.alloc(4);
  word.writeUInt32LE((seq + 1) >>> 0);
  fs.writeSync(fd, word, 0, 4, SEQ_WORD * 4);
}

function openSegmentFile(file: string, readonly: boolean): number {
  const fd = openExisting(file, readonly);
  if (fd === undefined) throw new PileError('PILE_CORRUPT', `segment file ${file} is missing`);
  return fd;
}
