import { PileError, type PilePointer } from '@pile/core';
import { H_COUNT, H_EXPIRING, H_TOMBS, S_COLLISIONS, S_GROWS, S_SHRINKS, TAG_CHUNK, tagOf } from './EntryFormat';
import { EVICTION_SAMPLES } from './Eviction';
import { SlotIndex } from './SlotIndex';
import type { TableState } from './TableState';
import { underSeqlock } from './TableSeqlock';

/** Slots a speculative put or get probes at most. */
export const SPECULATIVE_PROBES = 32;

/** How many slots a lookup of table `t` probes at most in an index of `capacity` slots. */
export function probeLimit(t: TableState, capacity: number): number {
  return t.speculative ? Math.min(SPECULATIVE_PROBES, capacity) : capacity;
}

/**
 * Before an insert would pass loadFactorHigh (the caller checked it would): grows, or purges
 * tombstones (only recovery and tables written by older versions have any: removals shift entries
 * back instead). A durable table whose index can not grow for lack of memory evicts one of its own
 * entries instead of filling its index past loadFactorHigh, where linear probing slows down sharply.
 */
export function makeRoomForInsert(t: TableState): void {
  const h = t.header;
  const count = h[H_COUNT]!;
  const tombs = h[H_TOMBS]!;
  const cap = t.idx.capacity;
  const o = t.meta.options;
  const high = cap * o.loadFactorHigh;
  const tombsDominate = tombs >= Math.max(1, cap * 0.05, (cap - count) / 2);
  if (count + 1 > high * 0.75 && cap < o.maxCapacity) {
    if (t.stores >= t.growRetryAt) {
      if (grow(t)) return;
      if (!t.speculative && t.host.makeRoom() && grow(t)) return;
      postponeGrow(t, count);
    }
    if (tombs > 0 && tombsDominate) rehash(t, cap);
    // Still past loadFactorHigh in a durable table: a batch of memory-pressure evictions, then one of ours.
    if (!t.speculative && h[H_COUNT]! + h[H_TOMBS]! + 1 > high && !(t.host.makeRoom() && h[H_COUNT]! + h[H_TOMBS]! + 1 <= high))
      t.evictOne(EVICTION_SAMPLES);
  } else if (tombsDominate) {
    // Tombstones, not live entries, fill the table: rebuild it at the same size (amortised over those removes).
    rehash(t, cap);
  }
}

/**
 * A put found its probe window full: a table that may still grow and is not nearly empty grows
 * rather than drops an entry. True when it tried, whether or not the grow succeeded: making room
 * for the new index may have evicted entries, so the put must probe again.
 */
export function growForCollision(t: TableState): boolean {
  const cap = t.idx.capacity;
  const o = t.meta.options;
  const count = t.header[H_COUNT]!;
  if (cap >= o.maxCapacity || count < cap * o.loadFactorHigh * 0.5 || t.stores < t.growRetryAt) return false;
  if (!grow(t)) postponeGrow(t, count);
  return true;
}

/** One grow step; false when the pile has no room for the bigger index. */
function grow(t: TableState): boolean {
  const o = t.meta.options;
  const cap = t.idx.capacity;
  if (!rehash(t, Math.min(o.maxCapacity, Math.max(cap + 1, Math.ceil(cap * o.growthFactor))))) return false;
  t.header[S_GROWS]!++;
  return true;
}

/** After a grow failed for lack of room: the next attempt waits for an eighth of the `count` entries' stores. */
function postponeGrow(t: TableState, count: number): void {
  t.growRetryAt = t.stores + Math.max(64, Math.ceil(count / 8));
}

/** Shrinks the table one step when its load fell below loadFactorLow (and it is above minCapacity). */
export function shrinkIfSparse(t: TableState): void {
  const o = t.meta.options;
  const cap = t.idx.capacity;
  if (cap <= o.minCapacity || t.header[H_COUNT]! >= cap * o.loadFactorLow) return;
  const target = Math.max(o.minCapacity, Math.ceil(cap * o.shrinkFactor));
  if (target < cap && rehash(t, target)) t.header[S_SHRINKS]!++;
}

/**
 * Moves every live slot into a new index of `capacity` slots, publishes it in the catalog
 * (crash-atomic), then frees the old chunks. False when the pile has no room for the new index.
 */
export function rehash(t: TableState, capacity: number): boolean {
  const host = t.host;
  const pile = host.pile;
  const meta = t.meta;
  const old = t.idx;
  let next: SlotIndex;
  try {
    next = SlotIndex.create(pile, capacity, meta.chunkSlots, tagOf(TAG_CHUNK, meta.id));
  } catch (err) {
    if (err instanceof PileError && (err.code === 'PILE_OUT_OF_SPACE' || err.code === 'PILE_TOO_LARGE')) return false;
    throw err;
  }
  // A reader in another process must not probe the index while its entries move, nor the old
  // chunks once they are freed: the seqlock is odd until the end, the version tells it to re-read
  // the chunk list (TableSeqlock).
  return underSeqlock(t.seqWords, true, () => moveInto(t, old, next, capacity));
}

/** The body of {@link rehash} under the table's seqlock. */
function moveInto(t: TableState, old: SlotIndex, next: SlotIndex, capacity: number): boolean {
  const host = t.host;
  const pile = host.pile;
  const meta = t.meta;
  const dropped: number[] = [];
  const moved = old.rehashInto(next, probeLimit(t, capacity), dropped);
  const before = { capacity: meta.capacity, chunks: meta.chunks };
  meta.capacity = capacity;
  meta.chunks = next.blocks.slice();
  try {
    // No eviction to make room here: it would remove entries from the old index only, and free
    // records the new one still names. A full pile fails the rehash; the callers make room and retry.
    host.saveCatalog(false);
  } catch (err) {
    meta.capacity = before.capacity;
    meta.chunks = before.chunks;
    next.free(pile);
    if (err instanceof PileError && err.code === 'PILE_OUT_OF_SPACE') return false;
    throw err;
  }
  t.idx = next;
  old.free(pile);
  const h = t.header;
  h[H_COUNT] = moved.count;
  h[H_TOMBS] = 0;
  h[H_EXPIRING] = moved.expiring;
  // Speculative only: an entry with no free slot within its probe window in the new index.
  h[S_COLLISIONS]! += dropped.length;
  for (const p of dropped) pile.delete(p as PilePointer);
  return true;
}
