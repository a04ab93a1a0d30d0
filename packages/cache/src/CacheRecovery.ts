import type { Pile, PilePointer } from '@pile/core';
import {
  E_EXPIRES,
  E_HASH,
  E_KEY,
  E_KEY_TYPE,
  E_PRIORITY,
  E_SEQ,
  H_COUNT,
  H_EXPIRING,
  H_SEQ,
  H_TOMBS,
  MAX_TABLE_ID,
  TAG_CHUNK,
  TAG_ENTRY,
  TAG_HEADER,
  TAG_MARK,
  keyLength,
} from './EntryFormat';
import { decodeKey } from './KeyCodec';
import { TOMBSTONE, type SlotIndex } from './SlotIndex';
import { probeLimit } from './TableResize';
import type { TableState } from './TableState';
import { underSeqlock } from './TableSeqlock';

/** Progress callback of a cache's open (see CacheBehaviourOptions.onProgress). */
export type ProgressCallback = ((p: { phase: string; done: number; total: number }) => void) | undefined;

/**
 * After an unclean shutdown: each index drops slots whose record is gone and re-derives its
 * counters; then one pass over the pile frees the cache's blocks nothing references (entries
 * written or replaced by an interrupted put, chunks of an interrupted grow, blocks of a
 * table whose create or drop was interrupted).
 */
export function recoverCache(pile: Pile, tables: TableState[], progress: ProgressCallback): void {
  const byId = new Map<number, TableState>();
  let tablesDone = 0;
  for (const t of tables) {
    // Slots become tombstones and duplicates go: a reader in another process (once one may run
    // beside a writer's open) must not probe meanwhile, and re-reads the index after (TableSeqlock).
    underSeqlock(t.seqWords, true, () => recoverIndex(t));
    byId.set(t.meta.id, t);
    progress?.({ phase: 'cache-index', done: ++tablesDone, total: tables.length });
  }
  const records = pile.stats.objectCount;
  let walked = 0;
  const doomed: PilePointer[] = [];
  for (const e of pile.entries()) {
    // Every 2^16 records: often enough for a progress line, rare enough to cost nothing.
    if ((++walked & 0xffff) === 0) progress?.({ phase: 'cache-orphans', done: walked, total: records });
    if (e.kind !== 'raw') continue;
    const tag = pile.rawTag(e.pointer);
    if (tag >>> 24 !== TAG_MARK) continue;
    const kind = (tag >>> 20) & 0xf;
    const t = byId.get(tag & MAX_TABLE_ID);
    let keep = false;
    if (t !== undefined) {
      if (kind === TAG_ENTRY) {
        try {
          keep = holdsEntry(t, e.pointer);
        } catch {
          keep = false;
        }
      } else if (kind === TAG_CHUNK) keep = t.meta.chunks.includes(e.pointer);
      else if (kind === TAG_HEADER) keep = t.meta.header === e.pointer;
    }
    if (!keep) doomed.push(e.pointer);
  }
  for (const p of doomed) pile.delete(p);
  progress?.({ phase: 'cache-orphans', done: walked, total: Math.max(walked, records) });
}

/**
 * Drops the slots of `t` whose record is gone or not the table's, re-derives each slot's cached
 * fields from its record, recounts.
 */
function recoverIndex(t: TableState): void {
  const pile = t.host.pile;
  const mem = t.host.mem;
  const idx = t.idx;
  const h = t.header;
  let count = 0;
  let tombs = 0;
  let expiring = 0;
  let maxSeq = -1;
  for (let i = 0; i < idx.capacity; i++) {
    const p = idx.ptr(i);
    if (p === 0) continue;
    let ok = false;
    if (p > 0) {
      try {
        ok = pile.has(p as PilePointer) && pile.rawTag(p as PilePointer) === t.entryTag;
      } catch {
        ok = false;
      }
    }
    if (!ok) {
      idx.setPtr(i, TOMBSTONE);
      tombs++;
      continue;
    }
    mem.locate(p);
    const v = mem.view;
    const o = mem.off;
    const e = v.getFloat64(o + E_EXPIRES, true);
    idx.setCaches(i, e, v.getUint32(o + E_HASH, true), v.getInt32(o + E_PRIORITY, true));
    if (e !== 0) expiring++;
    maxSeq = Math.max(maxSeq, v.getFloat64(o + E_SEQ, true));
    count++;
  }
  const dup = dropDuplicates(idx);
  h[H_COUNT] = count - dup.count;
  h[H_TOMBS] = tombs + dup.count;
  h[H_EXPIRING] = expiring - dup.expiring;
  h[H_SEQ] = Math.max(h[H_SEQ]!, maxSeq + 1);
}

/**
 * A crash in the middle of a backward shift leaves one entry in two slots of its cluster.
 * Tombstones the second of each such pair: a tombstone keeps the probe chains through it
 * intact, so the first copy stays reachable. Returns how many slots it cleared and how many
 * of them carried an expiry.
 */
function dropDuplicates(idx: SlotIndex): { count: number; expiring: number } {
  const cap = idx.capacity;
  // Start after an empty slot, so that no cluster is split by the wrap around the end.
  const start = idx.firstEmpty() + 1;
  const cluster = new Set<number>();
  let count = 0;
  let expiring = 0;
  for (let n = 0, i = start % cap; n < cap; n++, i = i + 1 === cap ? 0 : i + 1) {
    const p = idx.ptr(i);
    if (p === 0) cluster.clear();
    else if (p > 0) {
      if (!cluster.has(p)) cluster.add(p);
      else {
        idx.setPtr(i, TOMBSTONE);
        count++;
        if (idx.expiry(i) !== 0) expiring++;
      }
    }
  }
  return { count, expiring };
}

/** True when `ptr` (an entry record of table `t`) is the one the index holds for its key. */
function holdsEntry(t: TableState, ptr: number): boolean {
  const { mem, keys } = t.host;
  mem.locate(ptr);
  const o = mem.off;
  const b = mem.buf;
  keys.prepare(decodeKey(b[o + E_KEY_TYPE]!, b, o + E_KEY, keyLength(mem)));
  const idx = t.idx;
  const found = idx.find(keys, mem, t.entryTag, probeLimit(t, idx.capacity), t.meta.name, false);
  return found >= 0 && idx.ptr(found) === ptr;
}
