import * as fs from 'node:fs';
import { native } from '@pile/native';
import type { Allocator } from '../alloc/Allocator';
import { NUM_CLASSES, sizeClass } from '../alloc/SizeClass';
import { closeFreeRun } from '../alloc/AllocatorScan';
import { KIND_FREE, SEGMENT_HEADER_SIZE, STATE_FREE, genCheck, sizeCheck, word1 } from '../storage/BlockFormat';
import { ioError, openExisting } from '../storage/FileAccess';
import { PileError } from '../PileError';
import type { Segment } from '../storage/Segment';
import { R_SPAN, ROW } from '../alloc/SegmentRows';

// A recovery from a checkpoint that must walk a whole segment (deletes, sets, reused blocks since
// the checkpoint) reads it with pread and writes its free runs with pwrite, without mapping it.
// Measured on this project's VM (docs/benchmarks.md): a walk through a fresh mapping of a
// 256 MiB segment spent more in page faults (one per 4 KiB page read, 2 to 3 µs each) than in the
// checksums, and each page recovery then wrote took a write fault of 15 to 50 µs; pread copies the
// same page-cache pages without faults, and a pwrite of a 32-byte header costs a few µs. The
// pages are those a mapping shares, so a segment mapped later (or by another process) sees them.

/** plainFile's answer (NativeBinding): its header fields, then RUN_FIELDS numbers per run from HEAD on. */
const STATUS = 0;
const STOP = 1;
const BLOCKS = 2;
const OBJECTS = 3;
const ALLOCATED = 4;
const UTILIZED = 5;
const RUNS = 6;
const HEAD = 8;
const RUN_FIELDS = 11;

/** Whether recovery reads whole segments from their files (on) or maps them; an object so that tests can compare the two. */
export const fileRegions = { on: true };

/** What a walk of a region from its segment's file found (see walkFile). */
export interface FileRegion {
  /** plainFile's answer, which listFileRuns applies. */
  readonly found: Float64Array;
  readonly blocks: number;
  readonly objects: number;
  readonly allocated: number;
  readonly utilized: number;
}

/**
 * A region walkFile may walk: a whole segment (from its first block, so that the recovery starts
 * its row empty: beginRegions) that is not mapped and has a writable file.
 */
export function fileWalkable(seg: Segment, from: number): boolean {
  return fileRegions.on && from === SEGMENT_HEADER_SIZE && seg.unmappedFile() !== undefined;
}

/**
 * PlainRegions' walk of the region of `seg` from `from` on, by @pile/native's plainFile over the
 * segment's file: undefined when it meets a block it does not accept (anything but committed data
 * records whose checksums hold and free or reserved blocks whose own check words hold); the caller
 * then walks the region through the mapped segment, where the checks of PlainRegions and BlockTrust
 * decide. Reads only.
 * @throws PILE_CORRUPT when the file is missing, of another size, or ends early; PILE_IO when it can not be read
 */
export function walkFile(seg: Segment, from: number, segmentSize: number): FileRegion | undefined {
  return withFile(seg, segmentSize, (fd, file) => {
    const found = native.plainFile(fd, from, segmentSize, file);
    if (found[STATUS] === 2) {
      throw new PileError('PILE_CORRUPT', `segment file ${file} ends before offset ${found[STOP]} (truncated since it was opened)`);
    }
    if (found[STATUS] !== 0) return undefined;
    return { found, blocks: found[BLOCKS]!, objects: found[OBJECTS]!, allocated: found[ALLOCATED]!, utilized: found[UTILIZED]! };
  });
}

/**
 * What closeFreeRun does for each free run walkFile found in `seg`, in the same order, with the
 * same bytes in the file: each run one free block, the blocks merged into it no longer starting
 * blocks (their size check cleared), listed in its class (pushed in walk order, so each list runs
 * from the last run of its class back to the first) or, reaching the last segment's end, the tail.
 * A run's header and links are written by one pwrite, once its place in its list is known, and not
 * at all when the file holds them already (a recovery run again after a kill). The segment's lists
 * must be empty (a whole region's row, which beginRegions empties); else the runs go through
 * closeFreeRun on the mapped segment.
 * @throws PILE_CORRUPT, PILE_IO as walkFile
 */
export function listFileRuns(alloc: Allocator, seg: Segment, region: FileRegion): void {
  const r = region.found;
  const s = seg.index;
  const segSize = alloc.segmentSize;
  const n = r[RUNS]!;
  const innerAt = HEAD + n * RUN_FIELDS;
  const row = s * ROW;
  let listed = false;
  for (let c = 0; c < NUM_CLASSES && !listed; c++) listed = alloc.rows[row + c] !== 0;
  if (listed) {
    for (let j = 0, at = HEAD; j < n; j++, at += RUN_FIELDS)
      closeFreeRun(alloc, seg, r[at]!, r[at + 1]!, r[at + 2]!, r, innerAt + r[at + 3]!, innerAt + r[at + 4]!);
    return;
  }
  const base = s * segSize;
  const lastSeg = s === alloc.segments.length - 1;
  // The links each run ends up with: pushed in walk order, a run's next is the run of its class
  // before it and its previous the one after it.
  const next = new Float64Array(n);
  const prev = new Float64Array(n);
  const lastOfClass = new Int32Array(NUM_CLASSES).fill(-1);
  for (let j = 0, at = HEAD; j < n; j++, at += RUN_FIELDS) {
    if (lastSeg && r[at + 1] === segSize) continue;
    const c = sizeClass(r[at + 1]! - r[at]!);
    const k = lastOfClass[c]!;
    if (k >= 0) {
      next[j] = base + r[HEAD + k * RUN_FIELDS]!;
      prev[k] = base + r[at]!;
    }
    lastOfClass[c] = j;
  }
  withFile(seg, segSize, (fd) => {
    const block = Buffer.alloc(32);
    const zero = Buffer.alloc(4);
    const write = (bytes: number, buf: Buffer, at: number): void => {
      if (fs.writeSync(fd, buf, 0, bytes, at) !== bytes) throw new Error(`short write of ${bytes} bytes at offset ${at}`);
    };
    for (let j = 0, at = HEAD; j < n; j++, at += RUN_FIELDS) {
      const start = r[at]!;
      const size = r[at + 1]! - start;
      const gen = r[at + 2]!;
      const tail = lastSeg && start + size === segSize;
      alloc.touch(s, start);
      const w1 = word1(gen, KIND_FREE, STATE_FREE, 0);
      const same =
        r[at + 5] === size &&
        r[at + 6] === w1 &&
        r[at + 7] === sizeCheck(size) &&
        r[at + 8] === genCheck(gen) &&
        (tail || (Object.is(r[at + 9], next[j]) && Object.is(r[at + 10], prev[j])));
      if (!same) {
        block.writeUInt32LE(size, 0);
        block.writeUInt32LE(w1, 4);
        block.writeUInt32LE(sizeCheck(size), 8);
        block.writeUInt32LE(genCheck(gen), 12);
        block.writeDoubleLE(next[j]!, 16);
        block.writeDoubleLE(prev[j]!, 24);
        write(tail ? 16 : 32, block, start);
      }
      // The headers of the blocks merged into the run no longer start blocks (see Allocator.free).
      for (let i = innerAt + r[at + 3]!; i < innerAt + r[at + 4]!; i++) write(4, zero, r[i]! + 8);
      alloc.freeBytes += size;
      alloc.rows[row + R_SPAN]! += size;
      if (tail) {
        alloc.tailAddr = base + start;
        alloc.tailEnd = base + segSize;
        alloc.tailGen = gen;
      } else {
        const c = sizeClass(size);
        if (alloc.rows[row + c] === 0) alloc.listed(c, s);
        alloc.rows[row + c] = base + start;
      }
    }
  });
}

/**
 * Runs `fn` with the file of `seg` open for reading and writing, after checking its size again (a
 * file cut short since the open is refused, as Segment's mapping refuses it).
 * @throws PILE_CORRUPT when the file is missing or of another size; PILE_IO for a failed system call
 */
function withFile<T>(seg: Segment, size: number, fn: (fd: number, file: string) => T): T {
  const file = seg.unmappedFile()!;
  const fd = openExisting(file, false);
  if (fd === undefined) throw new PileError('PILE_CORRUPT', `segment file ${file} is missing`);
  try {
    const st = fs.fstatSync(fd);
    if (st.size !== size)
      throw new PileError('PILE_CORRUPT', `segment file ${file} is ${st.size} bytes, expected ${size} (truncated or damaged)`);
    return fn(fd, file);
  } catch (err) {
    throw ioError(err, `can not read or write segment file ${file}`);
  } finally {
    fs.closeSync(fd);
  }
}
