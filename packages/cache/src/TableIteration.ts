import { isPileError, type PileError } from '@pile/core';
import { E_KEY, E_KEY_TYPE, E_VALUE_KIND, keyLength, valueLength, valueOffset } from './EntryFormat';
import { decodeKey, type CacheKey } from './KeyCodec';
import type { TableState } from './TableState';
import type { TableHook } from './TableTypes';
import type { ValueCodec } from './ValueCodec';

/** What an iteration reads of a table (internal). */
export interface WalkedTable<V> extends TableState {
  readonly hook: TableHook | undefined;
  readonly values: ValueCodec<V>;
  /** @throws PILE_CLOSED */
  check(): void;
  /** After a hit: the entry host.mem is on was stored before the hook's epoch. */
  belowEpoch(hook: TableHook): boolean;
}

/**
 * Entries by increasing hash: each step finds the smallest hash above the last one passed (or
 * equal to it, for another key: a 32-bit hash is shared by some keys of a large table).
 */
/**
 * With `damaged`, each entry's record checksum is checked too (after its value is read, so a value
 * that does not decode reports that first), and a damaged entry goes to `damaged` (with its key
 * when that decodes) instead of ending the walk with PILE_CORRUPT; `null` throws on damage.
 */
export type DamagedEntry = ((key: CacheKey | undefined, err: PileError) => void) | null;

export function* walkTable<V>(t: WalkedTable<V>, withValues: boolean, damaged?: DamagedEntry): IterableIterator<[CacheKey, V | undefined]> {
  t.check();
  const host = t.host;
  const mem = host.mem;
  const kc = host.keys;
  let after = -1;
  // The entries passed whose hash is `after`: their record pointers and keys.
  const tiePtrs: number[] = [];
  const tieKeys: CacheKey[] = [];
  const unseen = (i: number): boolean => {
    const p = t.idx.ptr(i);
    if (tiePtrs.includes(p)) return false;
    mem.locate(p);
    const o = mem.off;
    for (const k of tieKeys) {
      kc.prepare(k);
      if (kc.equals(mem.buf[o + E_KEY_TYPE]!, mem.buf, o + E_KEY, keyLength(mem))) return false;
    }
    return true;
  };
  for (;;) {
    t.check();
    const hook = t.hook;
    if (hook !== undefined && !hook.serving) return;
    const idx = t.idx;
    const i = idx.nextByHash(after, unseen);
    if (i < 0) return;
    const hash = idx.hash(i);
    const p = idx.ptr(i);
    if (hash !== after) {
      after = hash;
      tiePtrs.length = 0;
      tieKeys.length = 0;
    }
    if (damaged === undefined) {
      mem.locate(p);
      const o = mem.off;
      const b = mem.buf;
      const k = decodeKey(b[o + E_KEY_TYPE]!, b, o + E_KEY, keyLength(mem));
      tiePtrs.push(p);
      tieKeys.push(k);
      const exp = idx.expiry(i);
      if ((exp !== 0 && exp <= host.clock()) || (hook !== undefined && hook.epoch > 0 && t.belowEpoch(hook))) continue;
      const voff = valueOffset(mem);
      const v = withValues ? t.values.read(b[o + E_VALUE_KIND]!, b, mem.view, o + voff, valueLength(mem, voff)) : undefined;
      yield [k, v];
      continue;
    }
    // Checked: the pointer goes to the ties first, so a damaged entry is never located again.
    tiePtrs.push(p);
    let k: CacheKey | undefined;
    let v: V | undefined;
    try {
      mem.locate(p);
      const o = mem.off;
      const b = mem.buf;
      k = decodeKey(b[o + E_KEY_TYPE]!, b, o + E_KEY, keyLength(mem));
      const exp = idx.expiry(i);
      if ((exp !== 0 && exp <= host.clock()) || (hook !== undefined && hook.epoch > 0 && t.belowEpoch(hook))) {
        tieKeys.push(k);
        continue;
      }
      const voff = valueOffset(mem);
      v = withValues ? t.values.read(b[o + E_VALUE_KIND]!, b, mem.view, o + voff, valueLength(mem, voff)) : undefined;
      const bad = mem.fault(p);
      if (bad !== undefined) throw bad;
      tieKeys.push(k);
    } catch (err) {
      if (damaged === null || !isPileError(err) || (err.code !== 'PILE_CORRUPT' && err.code !== 'PILE_SCHEMA_MISMATCH')) throw err;
      damaged(k, err);
      continue;
    }
    yield [k, v];
  }
}
