import * as fs from 'node:fs';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import { FORMAT_VERSION, META_MAGIC, OLDEST_FORMAT_VERSION } from './BlockFormat';
import { closeAndUnlinkQuietly, createExclusive, ioError, openExisting } from './FileAccess';
import { faultPoints } from '../recovery/FaultPoints';
import { PileError } from '../PileError';

export const META_FILE_NAME = 'pile.meta';

const HEADER_SIZE = 32;
const SLOT_A = 64;
const SLOT_SIZE = 32;
const CHECKPOINT_AT = 4096;
/** "CKP4": format 4's checkpoint, whose segment rows are at ROWS_AT (format 3's "CKPT" held the lists' heads itself). */
const CHECKPOINT_MAGIC = 0x34504b43;
const CHECKPOINT_HEAD = 64;
const BOOT_ID_BYTES = 40;
/** One byte per segment: its dirty mark since the checkpoint (Allocator MARK_*). */
const MARKS_AT = 8192;
/** Segment i's row (SegmentRows.ts) as a checkpoint saved it, at ROWS_AT + ROW_SLOT * i: CRC, sequence, ROW f64. */
const ROWS_AT = 32768;
const ROW_SLOT = 2048;
const ROW_HEAD = 8;

/** The allocator state a checkpoint saved (docs/format.md, Checkpoint). */
export interface Checkpoint {
  segmentCount: number;
  /** Its sequence number: rows saved by a later checkpoint that did not complete carry a larger one. */
  seq: number;
  /** The boot of the machine that wrote it: marks are trusted only while the page cache that holds them lives. */
  bootId: string;
  state: Float64Array;
}

/** Fields of the meta file header. */
export interface MetaHeader {
  /** The format the file was written by (FORMAT_VERSION when written by this build). */
  version?: number;
  segmentSize: number;
  pileId: number;
  segmentCount: number;
  clean: boolean;
  /** Generation the free space of a new segment starts at (see Allocator.genFloor); 0 until compact() releases a segment. */
  genFloor: number;
}

/** A catalog slot: which catalog record is current. Two slots alternate so an update is never torn. */
export interface CatalogSlot {
  seq: number;
  addr: number;
}

/**
 * The small metadata file of a mapped pile, written with pwrite (never mapped) so that each
 * update is one system call whose result survives a killed process. Layout in docs/format.md.
 */
export class MetaFile {
  private constructor(
    readonly file: string,
    private fd: number,
    readonly readonly: boolean,
  ) {}

  /**
   * @throws PILE_CORRUPT when the file exists but can not be opened
   */
  static open(dir: string, readonly: boolean): MetaFile | undefined {
    const file = path.join(dir, META_FILE_NAME);
    const fd = openExisting(file, readonly);
    return fd === undefined ? undefined : new MetaFile(file, fd, readonly);
  }

  static create(dir: string, header: MetaHeader): MetaFile {
    const file = path.join(dir, META_FILE_NAME);
    const tmp = `${file}.tmp`;
    let fd: number | undefined = createExclusive(tmp, true);
    try {
      const b = Buffer.alloc(SLOT_A + SLOT_SIZE * 2);
      encodeHeader(b, header);
      if (fs.writeSync(fd, b, 0, b.length, 0) !== b.length) throw new Error(`short write to ${tmp}`);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      // Closed: a failed rename must not close the number again (another open may have it by then).
      fd = undefined;
      // A pile directory either has a complete meta file or none: a crash mid-create leaves only the .tmp.
      fs.renameSync(tmp, file);
    } catch (err) {
      closeAndUnlinkQuietly(fd, tmp);
      throw ioError(err, `can not create meta file ${file}`);
    }
    return new MetaFile(file, openExisting(file, false)!, false);
  }

  /**
   * @throws PILE_CORRUPT when the header is damaged or truncated
   * @throws PILE_FORMAT_VERSION when the file was written by a newer format
   */
  readHeader(): MetaHeader {
    const b = this.read(0, HEADER_SIZE);
    if (b.readUInt32LE(0) !== META_MAGIC)
      throw new PileError('PILE_CORRUPT', `meta file ${this.file}: bad magic at offset 0 (not a pile, or damaged)`);
    const version = b.readUInt32LE(4);
    if (version > FORMAT_VERSION) {
      throw new PileError(
        'PILE_FORMAT_VERSION',
        `meta file ${this.file} has format version ${version}; this build reads up to ${FORMAT_VERSION}`,
      );
    }
    if (version >= 1 && version < OLDEST_FORMAT_VERSION && crc32(b.subarray(0, 28)) >>> 0 === b.readUInt32LE(28)) {
      throw new PileError(
        'PILE_FORMAT_VERSION',
        `meta file ${this.file} has format version ${version}, which this build (format ${FORMAT_VERSION}) does not read: open it with the build that wrote it and copy its records into a new pile (docs/format.md)`,
      );
    }
    if (crc32(b.subarray(0, 28)) >>> 0 !== b.readUInt32LE(28)) {
      throw new PileError('PILE_CORRUPT', `meta file ${this.file}: header checksum mismatch at offset 28`);
    }
    if (version < OLDEST_FORMAT_VERSION)
      throw new PileError('PILE_CORRUPT', `meta file ${this.file}: bad format version ${version} at offset 4`);
    return {
      version,
      segmentSize: b.readUInt32LE(8),
      pileId: b.readUInt32LE(12),
      segmentCount: b.readUInt32LE(16),
      clean: b.readUInt32LE(20) === 1,
      genFloor: b.readUInt32LE(24),
    };
  }

  writeHeader(h: MetaHeader): void {
    const b = Buffer.alloc(HEADER_SIZE);
    encodeHeader(b, h);
    this.write(b, 0);
  }

  /** Both catalog slots; a slot whose checksum fails is undefined. */
  readSlots(): [CatalogSlot | undefined, CatalogSlot | undefined] {
    const b = this.read(SLOT_A, SLOT_SIZE * 2);
    return [decodeSlot(b, 0), decodeSlot(b, SLOT_SIZE)];
  }

  /** True when a catalog slot was ever written (slot bytes not all zero), valid or not. */
  slotsWritten(): boolean {
    return this.read(SLOT_A, SLOT_SIZE * 2).some((x) => x !== 0);
  }

  writeSlot(which: 0 | 1, slot: CatalogSlot): void {
    const b = Buffer.alloc(SLOT_SIZE);
    b.writeUInt32LE(slot.seq >>> 0, 0);
    b.writeDoubleLE(slot.addr, 8);
    b.writeUInt32LE(crc32(b.subarray(0, 16)) >>> 0, 16);
    this.write(b, SLOT_A + which * SLOT_SIZE);
  }

  /** Writes a checkpoint (one pwrite, its own CRC): the allocator state that recovery starts from. */
  writeCheckpoint(c: Checkpoint): void {
    const b = Buffer.alloc(CHECKPOINT_HEAD + c.state.length * 8);
    b.writeUInt32LE(CHECKPOINT_MAGIC, 8);
    b.writeUInt32LE(c.segmentCount, 12);
    b.write(c.bootId.slice(0, BOOT_ID_BYTES), 16, 'latin1');
    b.writeUInt32LE(c.state.length, 56);
    b.writeUInt32LE(c.seq >>> 0, 60);
    for (let i = 0; i < c.state.length; i++) b.writeDoubleLE(c.state[i]!, CHECKPOINT_HEAD + i * 8);
    b.writeUInt32LE(b.length - 8, 4);
    b.writeUInt32LE(crc32(b.subarray(8)) >>> 0, 0);
    this.write(b, CHECKPOINT_AT);
  }

  /** The last checkpoint, or undefined when there is none or it is damaged. */
  readCheckpoint(): Checkpoint | undefined {
    const head = this.read(CHECKPOINT_AT, CHECKPOINT_HEAD);
    const len = head.readUInt32LE(4);
    if (len < CHECKPOINT_HEAD - 8 || len > MARKS_AT - CHECKPOINT_AT - 8) return undefined;
    const b = this.read(CHECKPOINT_AT, len + 8);
    if (crc32(b.subarray(8)) >>> 0 !== b.readUInt32LE(0) || b.readUInt32LE(8) !== CHECKPOINT_MAGIC) return undefined;
    const n = b.readUInt32LE(56);
    if (CHECKPOINT_HEAD + n * 8 !== b.length) return undefined;
    const state = new Float64Array(n);
    for (let i = 0; i < n; i++) state[i] = b.readDoubleLE(CHECKPOINT_HEAD + i * 8);
    return {
      segmentCount: b.readUInt32LE(12),
      seq: b.readUInt32LE(60),
      bootId: b.toString('latin1', 16, 16 + BOOT_ID_BYTES).replace(/\0+$/, ''),
      state,
    };
  }

  /**
   * Writes the rows of segments `which` (ascending) from `rows`, each with its CRC and `seq`: one
   * pwrite per run of consecutive segments. Before the checkpoint that names `seq`: until it is
   * written, recovery rescans these segments (they are marked, or past the old checkpoint's count).
   */
  writeRows(rows: Float64Array, width: number, which: readonly number[], seq: number): void {
    for (let k = 0; k < which.length;) {
      let end = k + 1;
      while (end < which.length && which[end] === which[end - 1]! + 1) end++;
      const first = which[k]!;
      const b = Buffer.alloc((end - k) * ROW_SLOT);
      for (let j = k; j < end; j++) {
        const at = (j - k) * ROW_SLOT;
        const i = which[j]!;
        b.writeUInt32LE(seq >>> 0, at + 4);
        for (let x = 0; x < width; x++) b.writeDoubleLE(rows[i * width + x]!, at + ROW_HEAD + x * 8);
        b.writeUInt32LE(crc32(b.subarray(at + 4, at + ROW_HEAD + width * 8)) >>> 0, at);
      }
      this.write(b, ROWS_AT + first * ROW_SLOT);
      k = end;
    }
    faultPoints.hit?.('rows-written');
  }

  /**
   * Reads the rows of segments 0..count-1 into `rows` (`width` slots each); returns, per segment,
   * whether its row is whole (CRC) and was saved by checkpoint `seq` or an earlier one.
   */
  readRows(rows: Float64Array, width: number, count: number, seq: number): boolean[] {
    const b = this.read(ROWS_AT, count * ROW_SLOT);
    const ok: boolean[] = [];
    for (let i = 0; i < count; i++) {
      const at = i * ROW_SLOT;
      const good = crc32(b.subarray(at + 4, at + ROW_HEAD + width * 8)) >>> 0 === b.readUInt32LE(at) && b.readUInt32LE(at + 4) <= seq;
      if (good) for (let x = 0; x < width; x++) rows[i * width + x] = b.readDoubleLE(at + ROW_HEAD + x * 8);
      ok.push(good);
    }
    return ok;
  }

  /** Writes the dirty mark of one segment (one pwrite of one byte). */
  writeMark(segIdx: number, level: number): void {
    faultPoints.hit?.('mark-writing');
    this.write(Buffer.of(level), MARKS_AT + segIdx);
    faultPoints.hit?.('mark-written');
  }

  /** Sets the marks of segments 0..count-1 to `level` (one pwrite): 0 clears them after a checkpoint. */
  writeMarks(count: number, level: number): void {
    if (count > 0) this.write(Buffer.alloc(count, level), MARKS_AT + 0);
  }

  /** The marks of segments 0..count-1. */
  readMarks(count: number): Uint8Array {
    return count > 0 ? this.read(MARKS_AT, count) : new Uint8Array(0);
  }

  sync(): void {
    fs.fsyncSync(this.fd);
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
  }

  private read(pos: number, len: number): Buffer {
    const b = Buffer.alloc(len);
    const n = fs.readSync(this.fd, b, 0, len, pos);
    if (n < len && pos < HEADER_SIZE)
      throw new PileError('PILE_CORRUPT', `meta file ${this.file} is truncated (read ${n} of ${len} bytes at offset ${pos})`);
    return b;
  }

  private write(b: Buffer, pos: number): void {
    if (this.readonly) throw new PileError('PILE_READONLY', `meta file ${this.file} is open read-only`);
    fs.writeSync(this.fd, b, 0, b.length, pos);
  }
}

function encodeHeader(b: Buffer, h: MetaHeader): void {
  b.writeUInt32LE(META_MAGIC, 0);
  b.writeUInt32LE(FORMAT_VERSION, 4);
  b.writeUInt32LE(h.segmentSize, 8);
  b.writeUInt32LE(h.pileId, 12);
  b.writeUInt32LE(h.segmentCount, 16);
  b.writeUInt32LE(h.clean ? 1 : 0, 20);
  b.writeUInt32LE(h.genFloor >>> 0, 24);
  b.writeUInt32LE(crc32(b.subarray(0, 28)) >>> 0, 28);
}

function decodeSlot(b: Buffer, at: number): CatalogSlot | undefined {
  if (crc32(b.subarray(at, at + 16)) >>> 0 !== b.readUInt32LE(at + 16)) return undefined;
  const addr = b.readDoubleLE(at + 8);
  if (!Number.isSafeInteger(addr) || addr <= 0) return undefined;
  return { seq: b.readUInt32LE(at), addr };
}
