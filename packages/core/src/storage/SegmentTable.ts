import type { Allocator } from '../alloc/Allocator';
import { ensureRows } from '../alloc/AllocatorRows';
import { SEGMENT_HEADER_SIZE } from './BlockFormat';
import { faultPoints } from '../recovery/FaultPoints';
import type { MetaFile, MetaHeader } from './MetaFile';
import { PileError } from '../PileError';
import { MAX_SEGMENTS } from '../records/PointerFormat';
import { Segment } from './Segment';

/** A pile's segments and what adding or mapping one needs (the RecordStore). */
export interface SegmentHost {
  readonly segments: Segment[];
  readonly segmentSize: number;
  readonly maxMemory: number;
  readonly persistent: boolean;
  readonly dir: string | undefined;
  readonly pileId: number;
  readonly meta: MetaFile | undefined;
  readonly alloc: Allocator;
}

/** The meta file header of a pile that counts `segmentCount` segments. */
export function metaHeader(host: SegmentHost, segmentCount: number, clean: boolean): MetaHeader {
  return { segmentSize: host.segmentSize, pileId: host.pileId, segmentCount, clean, genFloor: host.alloc.genFloor };
}

/**
 * Adds a segment at the end of the pile (the allocator calls it when no block fits). The file is
 * complete before the meta file counts it, so a counted segment is never half-made.
 * @throws PILE_OUT_OF_SPACE when maxMemory or the segment count forbids another segment
 * @throws PILE_IO when the file can not be made
 */
export function addSegment(host: SegmentHost): Segment {
  const { segments, segmentSize } = host;
  const index = segments.length;
  if ((index + 1) * segmentSize > host.maxMemory) {
    throw new PileError('PILE_OUT_OF_SPACE', `maxMemory ${host.maxMemory} reached (${index} segments of ${segmentSize} bytes)`);
  }
  if (index >= MAX_SEGMENTS) throw new PileError('PILE_OUT_OF_SPACE', `a pile holds at most ${MAX_SEGMENTS} segments`);
  const seg = host.persistent
    ? Segment.create(host.dir!, index, segmentSize, host.pileId)
    : Segment.inMemory(index, segmentSize, host.pileId);
  // The free block header over the whole of it, at the generation floor, before the meta file counts
  // it: even a crash before the first put leaves a segment whose generations start above those of
  // any segment released at the same index. Its row's room first (pile.coord's disk space).
  ensureRows(host.alloc, index + 1);
  host.alloc.writeFree(seg.u32, SEGMENT_HEADER_SIZE >>> 2, segmentSize - SEGMENT_HEADER_SIZE, host.alloc.genFloor);
  segments.push(seg);
  if (host.meta !== undefined) {
    host.meta.writeHeader(metaHeader(host, segments.length, false));
    faultPoints.hit?.('segment-counted');
  }
  return seg;
}

/**
 * The allocator's `grow`: a new segment, or, when the pile may not grow (maxMemory, the segment
 * count, a full disk) and blocks are retired (deferred reuse), undefined once they were handed back
 * to the free lists (RetiredList.makeRoom: it waits a bounded time for read sessions, then gives up
 * their pin). The allocator then looks for a block again.
 * @throws PILE_OUT_OF_SPACE, PILE_IO as addSegment does, when nothing retired could be handed back
 */
export function growOrReclaim(host: SegmentHost & { readonly retired: { makeRoom(): boolean } | undefined }): Segment | undefined {
  try {
    return addSegment(host);
  } catch (err) {
    if (err instanceof PileError && err.code === 'PILE_OUT_OF_SPACE' && host.retired?.makeRoom() === true) return undefined;
    throw err;
  }
}

/**
 * Segment `segIdx`, added by another process since this open last looked (a pointer or a link names
 * it): a read-only pile maps it, a writer takes up what was published. Undefined when there is none.
 */
export function segmentAdded(host: SegmentHost & { readonly readonly: boolean; follow(): void }, segIdx: number): Segment | undefined {
  if (host.readonly) return mapNewSegments(host, segIdx);
  host.follow();
  return host.segments[segIdx];
}

/** A read-only pile maps the segments its writer added since (as the meta file counts them), up to index `upTo`. */
export function mapNewSegments(host: SegmentHost, upTo: number): Segment | undefined {
  if (host.meta === undefined) return undefined;
  const { segments } = host;
  const count = Math.min(host.meta.readHeader().segmentCount, MAX_SEGMENTS);
  while (segments.length < count && segments.length <= upTo) {
    segments.push(Segment.open(host.dir!, segments.length, host.segmentSize, host.pileId, true));
  }
  return segments[upTo];
}

/**
 * After a read found no live record in `seg`: whether `seg` was replaced by the segment another
 * process made again at its index after `compact()` released it there (docs/concurrency.md), so
 * that the read is made again in the new one instead of raising a false PILE_STALE_POINTER. A
 * read-only open compares the file at the segment's path with the one it mapped (a stat) and maps
 * the new one; a writer takes up what was published (`host.follow()`: the segments whose incarnation in
 * pile.coord moved are mapped again), which costs one atomic load when nothing moved.
 */
export function replacedSegment(host: SegmentHost & { readonly readonly: boolean; follow(): void }, seg: Segment): boolean {
  if (host.dir === undefined) return false;
  const i = seg.index;
  if (!host.readonly) {
    host.follow();
    return host.segments[i] !== seg && host.segments[i] !== undefined;
  }
  if (host.segments[i] !== seg || !seg.remade()) return false;
  host.segments[i] = Segment.open(host.dir, i, host.segmentSize, host.pileId, true);
  seg.release();
  return true;
}
