// Two imports so that the list fits one line (a multi-line list repeats Recovery's, line for line).
import { KIND_NAMES, stateOf, type RecordKind } from '../storage/BlockFormat';
import { FLAG_BODY, KIND_LINK, SEGMENT_HEADER_SIZE, STATE_DAMAGED, STATE_USED, flagsOf, genOf, kindOf } from '../storage/BlockFormat';
import { ReadRetry } from '../concurrency/ChangeSeq';
import type { PilePointer } from './PilePointer';
import { inReadSession } from '../concurrency/ReaderTable';
import { closedError } from '../concurrency/ReadState';
import type { RecordStore } from './RecordStore';
import type { Segment } from '../storage/Segment';
import { payloadSize } from './ValueEncoding';

/** One live record as yielded by {@link Pile.entries}. */
export interface PileEntry {
  pointer: PilePointer;
  kind: RecordKind;
  /** Payload bytes as stored (what sizeOf returns). */
  size: number;
}

/**
 * Pile.entries(): every live record of `store` once, in address order, a linked record at its
 * head. A segment's walk stops at a block whose size can not be trusted (verify reports it).
 *
 * Each block is read between two loads of its segment's change sequence (ChangeSeq.ts), so that a
 * writer in another process changing the segment meanwhile is noticed. After such a change the walk
 * goes on from the last record it yielded, if that block still holds the same record (a live block
 * always starts where it did: only a freed block merges into its neighbour), else from the start of
 * the segment; records already yielded are not yielded again.
 * @throws PILE_CLOSED when the pile is closed during the iteration
 * @throws PILE_LOCKED when a writer stays in the middle of a change (see ReadRetry)
 */
export function walkEntries(store: RecordStore, isClosed: () => boolean): IterableIterator<PileEntry> {
  return inReadSession(store, walkSegments(store, isClosed));
}

function* walkSegments(store: RecordStore, isClosed: () => boolean): IterableIterator<PileEntry> {
  for (let s = 0; s < store.segments.length; s++) {
    const seg = store.segments[s]!.use();
    const u32 = seg.u32;
    let off = SEGMENT_HEADER_SIZE;
    // Offset of the last record yielded, and where to go on from after a change: that block, as long
    // as it holds the same record (anchorWord), or none (-1).
    let last = -1;
    let anchor = -1;
    let anchorWord = 0;
    let retry: ReadRetry | undefined;
    while (off < store.segmentSize) {
      if (isClosed()) throw closedError();
      if (store.checkReads) {
        store.clearSeqs();
        store.seqBefore(u32);
      }
      const size = u32[off >>> 2]!;
      const w = u32[(off >>> 2) + 1]!;
      const stop = !store.alloc.saneSize(off, size) || stateOf(w) === STATE_DAMAGED;
      const lost = off === anchor && w !== anchorWord;
      const entry =
        !stop && off > last && stateOf(w) === STATE_USED && (flagsOf(w) & FLAG_BODY) === 0 ? entryAt(store, seg, off, w) : undefined;
      if (!store.readSettled()) {
        (retry ??= new ReadRetry(store)).pause(`entries() in segment ${s}`, u32, store.sSeq);
        off = anchor >= 0 ? anchor : SEGMENT_HEADER_SIZE;
        continue;
      }
      if (lost) {
        // The last record yielded was deleted meanwhile: its offset may lie inside a free block now.
        // Walk again from the segment's start; offsets up to it were yielded already.
        anchor = -1;
        off = SEGMENT_HEADER_SIZE;
        continue;
      }
      if (stop) break;
      if (entry !== undefined) {
        last = anchor = off;
        anchorWord = w;
        yield entry;
      }
      off += size;
    }
  }
}

/** The entry of the live head block at `off` whose word1 is `w`, or undefined for kinds entries() does not list. */
function entryAt(store: RecordStore, seg: Segment, off: number, w: number): PileEntry | undefined {
  let dSeg = seg;
  let dOff = off;
  if (kindOf(w) === KIND_LINK && store.locateBody(seg, off)) {
    dSeg = store.dSeg;
    dOff = store.dOff;
  }
  const name = KIND_NAMES[kindOf(dSeg.u32[(dOff >>> 2) + 1]!)];
  if (name === undefined) return undefined;
  return { pointer: store.fmt.pointer(seg.index, off, genOf(w)), kind: name, size: payloadSize(dSeg, dOff) };
}
