import { PileError, isPileError } from '@pile/core';
import { RAW_PREFIX, SEQ_WORD } from './CoreBindings';
import { E_EXPIRES, E_HASH, E_KEY, E_KEY_TYPE, E_VALUE_KIND, keyLength, valueLength, valueOffset } from './EntryFormat';
import { AGAIN, staleOrDamaged, underTableCheck, type CheckedTable } from './CheckedRead';
import { decodeKey, type CacheKey } from './KeyCodec';
import type { DamagedEntry, WalkedTable } from './TableIteration';

/** What one checked step found: the next entry by hash, read whole. */
interface Step<V> {
  hash: number;
  ptr: number;
  key: CacheKey;
  value: V | undefined;
  /** False for an entry passed but not yielded (expired, below the hook's epoch). */
  show: boolean;
  /** checkedEntries: the entry's record failed its checksum. */
  fault: PileError | undefined;
}

/** Where an iteration is: the last hash passed and the entries passed at that hash. */
interface Position {
  after: number;
  tiePtrs: number[];
  tieKeys: (CacheKey | undefined)[];
  /** A slot whose hash disagrees with its record's, unchanged since `since` (ms): see {@link mismatch}. */
  suspect: { slot: number; ptr: number; hash: number; seq: number; since: number };
}

/** How long a slot's hash may disagree with its record's, nothing changing, before it is damage (the core's STUCK_MS). */
const SUSPECT_MS = 1000;

const DONE = Symbol('done');

/**
 * keys()/entries()/checkedEntries() of a table another process writes (CheckedRead,
 * docs/concurrency.md, "Cache tables beside a writer"). The walk is the one of walkTable (entries by
 * increasing hash, from the last hash passed), and each step is one checked attempt: the step's
 * probe, the location of the entry, its key and value are read with the table's seqlock even and
 * unmoved, and the record not changed (rawSettled); otherwise the step is made again from the same
 * position, against the index of the current table version when a resize or rehash ran. So every
 * key and value yielded is one that a put stored together, whole; every entry present for the whole
 * iteration is yielded exactly once (hash order does not depend on the index); a step waits for a
 * resize, rehash or backward shift under way to end (the core's back-off, PILE_LOCKED when the
 * writer stays in the middle of one for 1 s or steps keep meeting changes for 10 s). The entry's
 * own expiry is used, not the slot's copy.
 */
export function* walkChecked<V>(
  t: WalkedTable<V> & CheckedTable,
  withValues: boolean,
  damaged?: DamagedEntry,
): IterableIterator<[CacheKey, V | undefined]> {
  t.check();
  const at: Position = { after: -1, tiePtrs: [], tieKeys: [], suspect: { slot: -1, ptr: 0, hash: 0, seq: 0, since: 0 } };
  for (;;) {
    t.check();
    const hook = t.hook;
    if (hook !== undefined && !hook.serving) return;
    const r = underTableCheck<Step<V> | typeof DONE, 0>(
      t,
      'an iteration',
      (_, s) => step<V>(t, at, s, withValues, damaged !== undefined),
      0,
    );
    if (r === DONE) return;
    if (r.hash !== at.after) {
      at.after = r.hash;
      at.tiePtrs.length = 0;
      at.tieKeys.length = 0;
    }
    at.tiePtrs.push(r.ptr);
    at.tieKeys.push(r.key);
    if (r.fault !== undefined) {
      if (damaged === null || damaged === undefined) throw r.fault;
      damaged(r.key, r.fault);
      continue;
    }
    if (r.show) yield [r.key, r.value];
  }
}

/** One checked attempt at the next entry after `at`: a {@link Step}, DONE, or AGAIN. */
function step<V>(
  t: WalkedTable<V> & CheckedTable,
  at: Position,
  s: number,
  withValues: boolean,
  checksum: boolean,
): Step<V> | typeof DONE | typeof AGAIN {
  const host = t.host;
  const mem = host.mem;
  const idx = t.idx;
  let i = -1;
  let p = 0;
  let key: CacheKey | undefined;
  try {
    i = idx.nextByHash(at.after, (slot) => unseen(t, at, slot));
    if (i < 0) return DONE;
    p = idx.ptr(i);
    const hash = idx.hash(i);
    mem.locate(p);
    const o = mem.off;
    const b = mem.buf;
    const view = mem.view;
    if (view.getUint32(o - RAW_PREFIX, true) !== t.entryTag) {
      if (!mem.settled() || Atomics.load(t.seqWords, SEQ_WORD) !== s) return AGAIN;
      throw new PileError(
        'PILE_CORRUPT',
        `cache table '${t.meta.name}': slot ${i} points at a record (${p}) that is not one of its entries`,
      );
    }
    if (view.getUint32(o + E_HASH, true) !== hash) return mismatch(t, at, s, i, p, hash);
    key = decodeKey(b[o + E_KEY_TYPE]!, b, o + E_KEY, keyLength(mem));
    const exp = view.getFloat64(o + E_EXPIRES, true);
    const hook = t.hook;
    const show = !((exp !== 0 && exp <= host.clock()) || (hook !== undefined && hook.epoch > 0 && t.belowEpoch(hook)));
    let value: V | undefined;
    if (show && withValues) {
      const voff = valueOffset(mem);
      value = t.values.read(b[o + E_VALUE_KIND]!, b, view, o + voff, valueLength(mem, voff));
    }
    const fault = checksum ? mem.fault(p) : undefined;
    if (!mem.settled()) return AGAIN;
    return { hash, ptr: p, key, value, show, fault };
  } catch (err) {
    if (err === AGAIN) return AGAIN;
    if (Atomics.load(t.seqWords, SEQ_WORD) !== s) return AGAIN;
    if (i >= 0 && isPileError(err, 'PILE_STALE_POINTER')) {
      const judged = staleOrDamaged(t, s, i, p, err);
      if (judged === AGAIN) return AGAIN;
      throw judged;
    }
    if (!mem.settled()) return AGAIN;
    if (checksum && i >= 0 && isPileError(err) && (err.code === 'PILE_CORRUPT' || err.code === 'PILE_SCHEMA_MISMATCH')) {
      // The key when it decoded: the damage is reported with it.
      return { hash: idx.hash(i), ptr: p, key: key as CacheKey, value: undefined, show: false, fault: err };
    }
    throw err;
  }
}

/** Whether slot `slot` (whose hash is `at.after`) holds an entry not passed yet; throws AGAIN on a torn read. */
function unseen<V>(t: WalkedTable<V> & CheckedTable, at: Position, slot: number): boolean {
  const p = t.idx.ptr(slot);
  if (at.tiePtrs.includes(p)) return false;
  const mem = t.host.mem;
  const kc = t.host.keys;
  mem.locate(p);
  const o = mem.off;
  let seen = false;
  for (const k of at.tieKeys) {
    if (k === undefined) continue;
    kc.prepare(k);
    if (kc.equals(mem.buf[o + E_KEY_TYPE]!, mem.buf, o + E_KEY, keyLength(mem))) seen = true;
  }
  if (!mem.settled()) throw AGAIN;
  return !seen;
}

/**
 * A slot whose hash is not its record's: a slot being rewritten under the read (the writer stores
 * the hash, then the pointer: the old pointer and the new hash were read), so AGAIN; or a damaged
 * slot, when the same disagreement stays, the slot, the record and the seqlock unchanged, for
 * SUSPECT_MS (two adjacent stores of the writer can be apart that long only if it was stopped).
 * @throws PILE_CORRUPT naming the table, slot and record
 */
function mismatch<V>(t: WalkedTable<V> & CheckedTable, at: Position, s: number, i: number, p: number, hash: number): typeof AGAIN {
  const idx = t.idx;
  if (!t.host.mem.settled() || idx.ptr(i) !== p || idx.hash(i) !== hash) return AGAIN;
  const q = at.suspect;
  // A monotonic clock: a step of the wall clock must not make a live writer's slot look damaged, or hide a damaged one.
  const now = performance.now();
  if (q.slot !== i || q.ptr !== p || q.hash !== hash || q.seq !== s) {
    at.suspect = { slot: i, ptr: p, hash, seq: s, since: now };
    return AGAIN;
  }
  if (now - q.since < SUSPECT_MS) return AGAIN;
  throw new PileError(
    'PILE_CORRUPT',
    `cache table '${t.meta.name}': slot ${i} holds hash ${hash}, its record ${p} another, unchanged for ${Math.round(now - q.since)} ms: the index is damaged (the next writable open repairs it)`,
  );
}
