import { maxGen, rebuild } from '../alloc/AllocatorScan';
import { trustedFreeSize } from '../storage/BlockTrust';
import * as fs from 'node:fs';
import type { Allocator } from '../alloc/Allocator';
import { SEGMENT_HEADER_SIZE, STATE_FREE, stateOf } from '../storage/BlockFormat';
import type { Segment } from '../storage/Segment';
import { metaHeader, type SegmentHost } from '../storage/SegmentTable';

/**
 * The first step of Pile.compact(): releases the empty segments at the end of the pile and
 * deletes their files. Segments in the middle stay (pointers name segments by index).
 * `uncount(keep)` makes the meta file count only the first `keep` segments, durably: it runs
 * before any file is deleted, so an interrupted compact never leaves a counted segment without
 * its file. Returns how many segments remain.
 * @throws PILE_IO when the meta file can not be written
 */
export function releaseEmptySegments(
  segments: Segment[],
  alloc: Allocator,
  uncount: (keep: number) => void,
  onProgress?: (p: { phase: string; done: number; total: number }) => void,
): number {
  const before = segments.length;
  let keep = before;
  while (keep > 0 && segmentIsEmpty(segments[keep - 1]!, alloc)) keep--;
  if (keep === before) return keep;
  // Segments made again at these indexes must start above every generation they held.
  for (let i = keep; i < before; i++) {
    const g = maxGen(alloc, segments[i]!);
    if (g > alloc.genFloor) alloc.genFloor = g;
  }
  uncount(keep);
  for (let i = before - 1; i >= keep; i--) {
    const file = segments[i]!.file;
    segments.pop()!.release();
    if (file !== undefined) fs.rmSync(file, { force: true });
    onProgress?.({ phase: 'release', done: before - i, total: before - keep });
  }
  return keep;
}

/** True when no block of the segment is in use or being written (a damaged header counts as in use). */
function segmentIsEmpty(s: Segment, alloc: Allocator): boolean {
  const seg = s.use();
  let off = SEGMENT_HEADER_SIZE;
  while (off < alloc.segmentSize) {
    if (stateOf(seg.u32[(off >>> 2) + 1]!) !== STATE_FREE) return false;
    const size = trustedFreeSize(alloc, seg, off);
    if (size < 0) return false;
    off += size;
  }
  return true;
}

/**
 * Pile.compact() without its checkpoint: releases the empty segments at the end (see
 * releaseEmptySegments), then rebuilds the free lists, merging neighbouring free blocks.
 * @throws PILE_IO when the meta file can not be written
 */
export function compactSegments(
  host: SegmentHost,
  onProgress?: (p: { phase: string; done: number; total: number }) => void,
): { segmentsBefore: number; segmentsAfter: number; bytesReleased: number } {
  const { segments, alloc } = host;
  const before = segments.length;
  releaseEmptySegments(
    segments,
    alloc,
    (keep) => {
      host.meta?.writeHeader(metaHeader(host, keep, false));
      host.meta?.sync();
    },
    onProgress,
  );
  rebuild(alloc, (done) => onProgress?.({ phase: 'rebuild', done, total: segments.length }));
  return {
    segmentsBefore: before,
    segmentsAfter: segments.length,
    bytesReleased: (before - segments.length) * host.segmentSize,
  };
}
