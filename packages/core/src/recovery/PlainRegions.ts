import {
  BLOCK_HEADER_SIZE,
  FLAG_BODY,
  FLAG_SEALED,
  FLAG_SHIFT,
  GEN_MASK,
  KIND_BUFFER,
  KIND_LINK,
  KIND_JOURNAL,
  KIND_MASK,
  KIND_RAW,
  KIND_SHIFT,
  MIN_BLOCK_SIZE,
  STATE_DAMAGED,
  STATE_MASK,
  STATE_SHIFT,
  STATE_USED,
  checkedWord1,
  genCheck,
  sizeCheck,
} from '../storage/BlockFormat';
import { native } from '@pile/native';
import { blockChecksum, headerChecksum } from '../storage/Checksum';
import type { Allocator } from '../alloc/Allocator';
import { trustedFreeSize, trustedGen } from '../storage/BlockTrust';
import { fileWalkable, walkFile, type FileRegion } from './FileRegions';
import { isRetired } from '../alloc/RetiredList';
import type { Segment, SegmentWindow } from '../storage/Segment';

/** walkPlainRegions' answer when a region's window (Segment.window) did not hold all it had to read. */
export const OUTSIDE_WINDOW = 'outside-window';

/** What {@link walkPlainRegions} found in regions that hold only data records and free space. */
export interface PlainRegions {
  /** Block headers read. */
  blocks: number;
  /** Counters of the records found, to add to the allocator's. */
  allocatedBytes: number;
  utilizedBytes: number;
  objectCount: number;
  /**
   * Free runs in walk order, six numbers each: segment, start, end, generation, and the range of
   * `inner` holding the offsets of the blocks merged into the run after its first.
   */
  runs: number[];
  inner: number[];
  /** For each region, the end of its runs in `runs`. */
  regionEnds: number[];
  /** For each region, allocatedBytes, utilizedBytes and objectCount as summed up to its end (its segment's row gets the differences). */
  regionTotals: number[];
  /** For each region walked from its file (FileRegions), what that walk found; its runs are there, not in `runs`. */
  files: Array<FileRegion | undefined>;
}

/**
 * The one walk of a recovery from a checkpoint in the common case: the regions written since the
 * checkpoint hold only committed data records (no journal, link, body or catalog block) whose
 * checksums hold, and free or reserved blocks whose sizes their check words confirm. That is what
 * an appending writer killed at any instruction leaves. The walk reads only: it returns what the
 * allocator's region walk (AllocatorScan's rebuildRegions) would add, and its caller applies that
 * once every block of every region was seen.
 *
 * Anything else (a journal to replay, a link, body or catalog block, a checksum that fails, a size
 * that can not be trusted, a damaged block) returns undefined, with nothing written: the caller
 * then recovers by the general passes, which handle those, from the same state.
 *
 * `windows[r]`, when given, is the part of region r's segment that the walk reads through instead
 * of mapping the whole segment: a block header or record past its end, or a free block whose own
 * check words do not hold (confirming its size may read anywhere in the segment), returns
 * OUTSIDE_WINDOW, with nothing written; the caller then walks again with the segments mapped.
 *
 * Runs of committed data records are stepped over by @pile/native's plainRecords, the same checks
 * in C++: run once at an open, this loop in JavaScript spent its time in the interpreter and in
 * compiling itself (about 60 M instructions for 10,000 records, docs/benchmarks.md). Every other
 * block, and a record that native step does not accept, is read by the code here, whose checks
 * (and Checksum.blockChecksum) remain the definition: the native step only ever accepts a record
 * that they accept too (test/plain-regions.test.ts compares the two).
 */
export function walkPlainRegions(
  segments: readonly Segment[],
  alloc: Allocator,
  segmentSize: number,
  scan: ReadonlyArray<readonly [number, number]>,
  windows?: ReadonlyArray<SegmentWindow | undefined>,
): PlainRegions | typeof OUTSIDE_WINDOW | undefined {
  const runs: number[] = [];
  const inner: number[] = [];
  const regionEnds: number[] = [];
  const regionTotals: number[] = [];
  const files: Array<FileRegion | undefined> = [];
  const stepped = new Float64Array(4);
  let blocks = 0;
  let allocated = 0;
  let utilized = 0;
  let objects = 0;
  for (let r = 0; r < scan.length; r++) {
    const segIdx = scan[r]![0];
    const win = windows?.[r];
    // A whole segment not mapped is read from its file (FileRegions); the segment is mapped only
    // when that walk meets a block that needs the checks below. Not while retired blocks are kept
    // (a live writer's repair): the file walk would merge them as reserved blocks.
    const file =
      win === undefined && !alloc.keepRetired && fileWalkable(segments[segIdx]!, scan[r]![1])
        ? walkFile(segments[segIdx]!, scan[r]![1], segmentSize)
        : undefined;
    if (file !== undefined) {
      files[r] = file;
      blocks += file.blocks;
      allocated += file.allocated;
      utilized += file.utilized;
      objects += file.objects;
      regionEnds.push(runs.length);
      regionTotals.push(allocated, utilized, objects);
      continue;
    }
    const seg = win === undefined ? segments[segIdx]!.use() : segments[segIdx]!;
    const u32 = win?.u32 ?? seg.u32;
    const buf = win?.buf ?? seg.buf;
    // Segment offsets index the window's words from `base` on; a whole segment's from 0.
    const base = win?.base ?? 0;
    const end = win?.end ?? segmentSize;
    let off = scan[r]![1];
    let runStart = -1;
    let runGen = 0;
    let runInner = 0;
    while (off < segmentSize) {
      // A run of committed data records is stepped over in C++, which accepts what the code below
      // accepts (below NATIVE_CHECKSUM_FROM) and stops at anything else, for the code below to see.
      native.plainRecords(u32, base, off, end, segmentSize, stepped);
      const n = stepped[1]!;
      if (n > 0) {
        if (runStart >= 0) {
          runs.push(segIdx, runStart, off, runGen, runInner, inner.length);
          runStart = -1;
        }
        blocks += n;
        objects += n;
        allocated += stepped[2]!;
        utilized += stepped[3]!;
        off = stepped[0]!;
        if (off >= segmentSize) break;
      }
      blocks++;
      if (off + BLOCK_HEADER_SIZE > end) return OUTSIDE_WINDOW;
      const h = (off - base) >>> 2;
      let size = u32[h]!;
      const w = u32[h + 1]!;
      if (size < MIN_BLOCK_SIZE || (size & 7) !== 0 || size > segmentSize - off) return undefined;
      const state = (w >>> STATE_SHIFT) & STATE_MASK;
      if (state === STATE_USED) {
        const kind = (w >>> KIND_SHIFT) & KIND_MASK;
        const flags = w >>> FLAG_SHIFT;
        const length = u32[h + 2]!;
        // Kinds 1-4, 8, 9 are data records; 0 and above 9 are damage, links, catalogs and
        // journals need the general passes, so do bodies.
        if (kind === 0 || kind > KIND_BUFFER || (kind >= KIND_LINK && kind <= KIND_JOURNAL) || (flags & FLAG_BODY) !== 0) return undefined;
        if (length > size - BLOCK_HEADER_SIZE) return undefined;
        if (off + size > end) return OUTSIDE_WINDOW;
        const checked = checkedWord1(w);
        const sum =
          kind === KIND_RAW && (flags & FLAG_SEALED) === 0
            ? headerChecksum(size, checked, length)
            : blockChecksum(buf, u32, off - base, size, checked, length);
        if (sum !== u32[h + 3]) return undefined;
        if (runStart >= 0) {
          runs.push(segIdx, runStart, off, runGen, runInner, inner.length);
          runStart = -1;
        }
        allocated += size;
        utilized += length;
        objects++;
      } else if (state === STATE_DAMAGED || (alloc.keepRetired && isRetired(w)))
        return undefined; // retired: kept by the general walk
      else {
        // Free or reserved (an unfinished put): stepped over and merged by the size its check
        // words, or its neighbours, confirm, as the allocator's walk does. Its own check words
        // holding (the case of every block an appending writer leaves) is BlockTrust's first answer.
        const gw = w & GEN_MASK;
        const own = u32[h + 2] === sizeCheck(size) && u32[h + 3] === genCheck(gw);
        if (!own && win !== undefined) return OUTSIDE_WINDOW;
        if (!own) size = trustedFreeSize(alloc, seg, off);
        if (size < 0) return undefined;
        const g = own ? gw : trustedGen(alloc, seg, off);
        if (runStart < 0) {
          runStart = off;
          runGen = g;
          runInner = inner.length;
        } else {
          inner.push(off);
          if (g > runGen) runGen = g;
        }
      }
      off += size;
    }
    if (runStart >= 0) runs.push(segIdx, runStart, segmentSize, runGen, runInner, inner.length);
    regionEnds.push(runs.length);
    regionTotals.push(allocated, utilized, objects);
  }
  return { blocks, allocatedBytes: allocated, utilizedBytes: utilized, objectCount: objects, runs, inner, regionEnds, regionTotals, files };
}
