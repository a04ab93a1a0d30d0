import type { PileOptions } from '../PileOptions';
import type { Segment } from './Segment';

/**
 * Bytes per warm-up job. One job occupies one thread of the libuv pool (4 by default, shared with
 * fs and crypto work) for the time it takes to map its pages: 8 MiB of cached pages take about a
 * millisecond, so other pool work waits at most that long, and progress comes in steps of 8 MiB.
 */
export const WARM_CHUNK = 8 << 20;

/** What the warm-up needs of the pile. */
export interface WarmHost {
  /** The pile's own array of segments: close() empties it and compact() shortens it. */
  readonly segments: readonly Segment[];
  readonly segmentSize: number;
  /** False once the pile was closed. */
  isOpen(): boolean;
}

/**
 * The warm option: faults in the pages of every segment the pile has now, from its start to the
 * allocator's tail in the tail's segment (the free space past it holds nothing to read, and warming
 * it would only fill memory with zero pages), one chunk at a time, in segment order. Gets go on
 * meanwhile: the main thread only maps each segment (Segment.use, no I/O) and queues a job.
 * `onProgress` gets phase 'warm' with bytes done and total after each chunk; a single
 * `{ done: 0, total: 0 }` when there is nothing to warm. It stops early, without an error, once
 * the pile is closed or a segment released by compact() (a released segment is never mapped again),
 * or when the kernel refuses a chunk (ENOMEM: memory is short, and reads fault their pages
 * themselves as without warming); progress then ends short of total.
 * `tailAddr`: the allocator's tail (0: none known, as in a read-only pile: whole segments).
 */
export async function warmPile(host: WarmHost, tailAddr: number, onProgress: PileOptions['onProgress']): Promise<void> {
  const size = host.segmentSize;
  const segs = host.segments.slice();
  const tailSeg = tailAddr === 0 ? -1 : Math.floor(tailAddr / size);
  const ends = segs.map((s) => (s.index === tailSeg ? tailAddr - s.index * size : size));
  const total = ends.reduce((a, b) => a + b, 0);
  if (total === 0) {
    onProgress?.({ phase: 'warm', done: 0, total: 0 });
    return;
  }
  let done = 0;
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i]!;
    for (let off = 0; off < ends[i]!;) {
      if (!host.isOpen() || host.segments[i] !== seg) return;
      const to = Math.min(ends[i]!, off + WARM_CHUNK);
      try {
        await seg.warm(off, to);
      } catch {
        return;
      }
      if (!host.isOpen()) return;
      done += to - off;
      off = to;
      onProgress?.({ phase: 'warm', done, total });
    }
  }
}
