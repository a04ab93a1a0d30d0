import {
  BLOCK_HEADER_SIZE,
  FLAG_BODY,
  FLAG_SEALED,
  FLAG_SHIFT,
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
} from './BlockFormat';
import { blockChecksum, headerChecksum } from './Checksum';
import type { Allocator } from './Allocator';
import { trustedFreeSize, trustedGen } from './BlockTrust';
import type { Segment } from './Segment';

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
 * Per block it does plain integer loads and compares and the checksum of the payload
 * (Checksum.blockChecksum, the one definition of it: a copy written out here saved about 5 % of the
 * walk's instructions, which did not pay for two copies of the checksum to keep in step).
 */
export function walkPlainRegions(
  segments: readonly Segment[],
  alloc: Allocator,
  segmentSize: number,
  scan: ReadonlyArray<readonly [number, number]>,
): PlainRegions | undefined {
  const runs: number[] = [];
  const inner: number[] = [];
  const regionEnds: number[] = [];
  let blocks = 0;
  let allocated = 0;
  let utilized = 0;
  let objects = 0;
  for (let r = 0; r < scan.length; r++) {
    const segIdx = scan[r]![0];
    const seg = segments[segIdx]!.use();
    const u32 = seg.u32;
    const buf = seg.buf;
    let off = scan[r]![1];
    let runStart = -1;
    let runGen = 0;
    let runInner = 0;
    while (off < segmentSize) {
      blocks++;
      const h = off >>> 2;
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
        const checked = checkedWord1(w);
        const sum =
          kind === KIND_RAW && (flags & FLAG_SEALED) === 0
            ? headerChecksum(size, checked, length)
            : blockChecksum(buf, u32, off, size, checked, length);
        if (sum !== u32[h + 3]) return undefined;
        if (runStart >= 0) {
          runs.push(segIdx, runStart, off, runGen, runInner, inner.length);
          runStart = -1;
        }
        allocated += size;
        utilized += length;
        objects++;
      } else if (state === STATE_DAMAGED) return undefined;
      else {
        // Free or reserved (an unfinished put): stepped over and merged by the size its check
        // words, or its neighbours, confirm, as the allocator's walk does.
        size = trustedFreeSize(alloc, seg, off);
        if (size < 0) return undefined;
        const g = trustedGen(alloc, seg, off);
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
  }
  return { blocks, allocatedBytes: allocated, utilizedBytes: utilized, objectCount: objects, runs, inner, regionEnds };
}
