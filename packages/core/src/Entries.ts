// Two imports so that the list fits one line (a multi-line list repeats Recovery's, line for line).
import { KIND_NAMES, type RecordKind } from './BlockFormat';
import { FLAG_BODY, KIND_LINK, SEGMENT_HEADER_SIZE, STATE_DAMAGED, STATE_USED, flagsOf, genOf, kindOf, stateOf } from './BlockFormat';
import type { PilePointer } from './PilePointer';
import { closedError, type RecordStore } from './RecordStore';
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
 * @throws PILE_CLOSED when the pile is closed during the iteration
 */
export function* walkEntries(store: RecordStore, isClosed: () => boolean): IterableIterator<PileEntry> {
  for (let s = 0; s < store.segments.length; s++) {
    const seg = store.segments[s]!.use();
    let off = SEGMENT_HEADER_SIZE;
    while (off < store.segmentSize) {
      if (isClosed()) throw closedError();
      const size = seg.u32[off >>> 2]!;
      const w = seg.u32[(off >>> 2) + 1]!;
      if (!store.alloc.saneSize(off, size) || stateOf(w) === STATE_DAMAGED) break;
      if (stateOf(w) === STATE_USED && (flagsOf(w) & FLAG_BODY) === 0) {
        const kind = kindOf(w);
        let dSeg = seg;
        let dOff = off;
        if (kind === KIND_LINK && store.locateBody(seg, off)) {
          dSeg = store.dSeg;
          dOff = store.dOff;
        }
        const name = KIND_NAMES[kindOf(dSeg.u32[(dOff >>> 2) + 1]!)];
        if (name !== undefined) {
          yield { pointer: store.fmt.pointer(s, off, genOf(w)), kind: name, size: payloadSize(dSeg, dOff) };
        }
      }
      off += size;
    }
  }
}
