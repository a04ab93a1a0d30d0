import { E_CREATED, E_EXPIRES, E_PRIORITY, E_SEQ, H_COUNT, H_EXPIRING, H_SEQ, valueLength, valueOffset } from './EntryFormat';
import type { CacheKey } from './KeyCodec';
import type { SlotIndex } from './SlotIndex';
import { shrinkIfSparse } from './TableResize';
import type { TableState } from './TableState';
import type { PutResult, TableHook } from './TableTypes';

/** What {@link rejuvenate} uses of a table besides its state: its lookup and its store (internal). */
export interface RenewedTable extends TableState {
  readonly hook: TableHook | undefined;
  /** The slot holding the prepared key, or -1; on a hit, host.mem is left on the entry's record. */
  find(): number;
  /** After a hit of find(): the entry was stored before the hook's epoch. */
  belowEpoch(hook: TableHook): boolean;
  /** Stores the entry in the host's scratch[0..len) for the prepared key and publishes it in the index. */
  storeEncoded(len: number, priority: number, expiresAt: number, count: boolean): PutResult;
}

/**
 * Frees every live entry of `t` whose expiry has passed (a read-only table frees none) and
 * recomputes the time before which none of its entries expires; returns how many it freed.
 * One pass over the slots' expiry words, skipped when no entry carries an expiry.
 */
export function sweepTable(t: TableState, now: number, shrink: boolean): number {
  if (t.header[H_EXPIRING] === 0) {
    t.expiryKnownUntil = Number.POSITIVE_INFINITY;
    return 0;
  }
  let freed = 0;
  let next = Number.POSITIVE_INFINITY;
  const idx = t.idx;
  const readonly = t.host.readonly;
  for (let i = 0; i < idx.capacity; i++) {
    const e = idx.expiry(i);
    const p = idx.ptr(i);
    if (e === 0 || p <= 0) continue;
    if (e <= now && !readonly) {
      t.expireSlot(i);
      freed++;
      if (idx.ptr(i) !== p) i--; // the backward shift may have moved a later entry into this slot
    } else if (e < next) next = e;
  }
  if (!readonly) t.expiryKnownUntil = next;
  if (shrink) shrinkIfSparse(t);
  return freed;
}

/**
 * The live entries of `t` (CacheTable.count): O(1) while no entry has expired since the last
 * sweep; otherwise a writable table sweeps (through `t.sweepExpired`) and a read-only one counts
 * the expired entries it can not free.
 */
export function liveCount(t: TableState): number {
  const h = t.header;
  if (h[H_EXPIRING] === 0) return h[H_COUNT]!;
  const now = t.host.clock();
  if (now < t.expiryKnownUntil) return h[H_COUNT]!;
  if (!t.host.readonly) {
    t.sweepExpired(now, false);
    return h[H_COUNT]!;
  }
  return h[H_COUNT]! - countExpired(t.idx, now);
}

/** Live slots of `idx` whose expiry has passed (what a read-only table, which can not free them, subtracts). */
function countExpired(idx: SlotIndex, now: number): number {
  let n = 0;
  for (let i = 0; i < idx.capacity; i++) if (idx.expiry(i) !== 0 && idx.expiry(i) <= now && idx.ptr(i) > 0) n++;
  return n;
}

/**
 * CacheTable.rejuvenate once the table is known writable: stores a copy of `key`'s entry whose age
 * base is now, expiring after the same time to live (a new record and sequence number, as a put
 * makes). False when the key is absent, expired (then freed) or below the hook's epoch.
 */
export function rejuvenate(t: RenewedTable, key: CacheKey): boolean {
  const hook = t.hook;
  if (hook !== undefined) hook.changed('expiry', key);
  const host = t.host;
  host.keys.prepare(key);
  const i = t.find();
  if (i < 0) return false;
  const exp = t.idx.expiry(i);
  const now = host.clock();
  if (exp !== 0 && exp <= now) {
    t.expireSlot(i);
    return false;
  }
  if (hook !== undefined && hook.epoch > 0 && t.belowEpoch(hook)) return false;
  const mem = host.mem;
  const o = mem.off;
  const voff = valueOffset(mem);
  const len = voff + valueLength(mem, voff);
  const s = host.scratch(len);
  mem.buf.copy(s.buf, 0, o, o + len);
  const created = s.view.getFloat64(E_CREATED, true);
  const newExp = exp === 0 ? 0 : now + (exp - created);
  s.view.setFloat64(E_SEQ, t.header[H_SEQ]!++, true);
  s.view.setFloat64(E_CREATED, now, true);
  s.view.setFloat64(E_EXPIRES, newExp, true);
  t.storeEncoded(len, s.view.getInt32(E_PRIORITY, true), newExp, false);
  return true;
}
