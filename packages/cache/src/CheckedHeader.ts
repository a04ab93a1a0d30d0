import { PileError, ReadRetry, isPileError, type PilePointer } from '@pile/core';
import { SEQ_WORD } from './CoreBindings';
import { foundDropped, underTableCheck, type CheckedTable } from './CheckedRead';
import { H_COUNT, H_EXPIRING, HEADER_WORDS, S_HITS, S_MISSES, addStats, zeroStats } from './EntryFormat';
import type { SlotIndex } from './SlotIndex';
import type { TableStats } from './TableTypes';

// The header and index figures of a table another process writes (count, capacity, stats, bytes):
// docs/concurrency.md, "Cache tables beside a writer". The header's words are f64s, each stored by
// the writer with one aligned 8-byte store, so each word read is a value it held; the words are not
// changed together, so a set of them is not a snapshot.

/**
 * A copy of the table's header words as they are now in the pile (each word whole), read while the
 * header block is live: a table the writer dropped (its header freed) throws PILE_CLOSED.
 * @throws PILE_CLOSED, PILE_CORRUPT when the header block is freed while the catalog names the table
 * @throws PILE_LOCKED when the block's segment keeps changing (the core's back-off)
 */
export function liveHeader(t: CheckedTable): Float64Array {
  const pile = t.host.pile;
  const out = new Float64Array(HEADER_WORDS);
  let retry: ReadRetry | undefined;
  for (;;) {
    try {
      const off = pile.rawSeek(t.meta.header as PilePointer) >>> 3;
      const f = pile.rawF64;
      for (let w = 0; w < HEADER_WORDS; w++) out[w] = f[off + w]!;
      if (pile.rawSettled()) return out;
    } catch (err) {
      if (!isPileError(err, 'PILE_STALE_POINTER')) throw err;
      // Only a drop frees the header, after the catalog stopped naming the table.
      if (t.host.storedIndex(t.meta.id) === undefined) throw foundDropped(t);
      throw new PileError('PILE_CORRUPT', `cache table '${t.meta.name}': its header block ${t.meta.header} is not live (${err.message})`);
    }
    (retry ??= new ReadRetry(pile)).pause(`a read of cache table '${t.meta.name}''s header`, t.seqWords, t.seqWords[SEQ_WORD]!);
  }
}

/**
 * The table's counters: the writer's as they are now (each whole, read at one moment each), with
 * this process's own hits and misses (kept in `own`, its heap copy of the header) added.
 */
export function checkedStats(t: CheckedTable, own: Float64Array): TableStats {
  const s = zeroStats();
  addStats(s, liveHeader(t));
  s.hits += own[S_HITS]!;
  s.misses += own[S_MISSES]!;
  return s;
}

/**
 * The live entries: the header's count at one moment when no entry carries an expiry; else that
 * count less the expired entries found by one pass over the index ({@link sumSlots}). Puts and
 * removals during the pass are not excluded, so then the result may differ from the count of every
 * moment by the number of entries put, removed or expired during the pass.
 */
export function checkedCount(t: CheckedTable): number {
  const h = liveHeader(t);
  if (h[H_EXPIRING] === 0) return h[H_COUNT]!;
  const now = t.host.clock();
  const expired = sumSlots(t, 'a count', (idx, i) => (idx.expiry(i) !== 0 && idx.expiry(i) <= now && idx.ptr(i) > 0 ? 1 : 0));
  return Math.max(0, h[H_COUNT]! - expired);
}

/** The capacity of the table's current index (read again when the table version moved; a resize under way is waited for). */
export function checkedCapacity(t: CheckedTable): number {
  return underTableCheck(t, 'a read', (u) => u.idx.capacity, 0);
}

/** count / capacity, both read with no resize or rehash between them (so at most 1). */
export function checkedLoadFactor(t: CheckedTable): number {
  return underTableCheck(t, 'a read', (u) => liveHeader(u)[H_COUNT]! / u.idx.capacity, 0);
}

/**
 * Pile bytes of the table: index, header and each entry record's payload, summed over one pass
 * ({@link sumSlots}). Each record counted was in the table when its slot was read; a record freed
 * before its size was read is not counted.
 */
export function checkedBytes(t: CheckedTable, slotBytes: number): number {
  const pile = t.host.pile;
  const entries = sumSlots(t, 'a size', (idx, i) => {
    const p = idx.ptr(i);
    if (p <= 0) return 0;
    try {
      return pile.sizeOf(p as PilePointer); // checked by the core in a read-only open
    } catch (err) {
      if (isPileError(err, 'PILE_STALE_POINTER')) return 0;
      throw err;
    }
  });
  return checkedCapacity(t) * slotBytes + HEADER_WORDS * 8 + entries;
}

/** Slots summed per checked attempt: small enough that a writer's backward shifts rarely fall inside one. */
const BATCH = 256;

/**
 * Sums `f(idx, slot)` over the slots of the current index, in batches of BATCH slots each read with
 * no backward shift, resize or rehash under way (a batch that met one is read again); when the
 * table version moves between batches (a resize or rehash ended), the pass starts again on the new
 * index. Not a snapshot: an O(capacity) pass in one attempt would rarely finish beside an evicting
 * writer, which shifts on every removal.
 */
function sumSlots(t: CheckedTable, what: string, f: (idx: SlotIndex, slot: number) => number): number {
  for (;;) {
    const idx = underTableCheck(t, what, (u) => u.idx, 0);
    let sum = 0;
    let i = 0;
    for (; i < idx.capacity; i += BATCH) {
      const part = underTableCheck(
        t,
        what,
        (u, _, from: number) => {
          if (u.idx !== idx) return -1;
          let n = 0;
          const end = Math.min(idx.capacity, from + BATCH);
          for (let j = from; j < end; j++) n += f(idx, j);
          return n;
        },
        i,
      );
      if (part < 0) break;
      sum += part;
    }
    if (i >= idx.capacity) return sum;
  }
}
