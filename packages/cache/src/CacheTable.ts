import { PileError, type CompiledSchema, type PilePointer } from '@pile/core';
import type { CacheHost } from './CacheHost';
import {
  E_CREATED, E_EXPIRES, E_HASH, E_KEY, E_KEY_LEN, E_KEY_TYPE, E_PRIORITY, E_SEQ, E_VALUE_KIND, E_VALUE_LEN,
  H_COUNT, H_EXPIRING, H_SEQ, H_STATS, H_TOMBS, HEADER_WORDS, STAT_NAMES, TAG_CHUNK, TAG_ENTRY, align8, tagOf,
} from './EntryFormat';
import { decodeKey, type CacheKey } from './KeyCodec';
import { SlotIndex, TOMBSTONE } from './SlotIndex';
import { type ResolvedTableOptions, invalidOption } from './TableOptions';
import { ValueCodec } from './ValueCodec';
import type { PileMemory } from './PileMemory';

/** Eviction candidates a table keeps between evictions. */
const EVICTION_POOL = 16;
/** Entries an eviction samples afresh (besides its pool). */
export const EVICTION_SAMPLES = 3;

/** Slots a speculative put or get probes at most. */
export const SPECULATIVE_PROBES = 32;

/** Counters of one table, persisted with it. */
export interface TableStats {
  hits: number;
  misses: number;
  inserts: number;
  replaces: number;
  overwrites: number;
  collisions: number;
  removes: number;
  expired: number;
  evicted: number;
  grows: number;
  shrinks: number;
}

/** Options of {@link CacheTable.put}. */
export interface PutOptions {
  /** Seconds until the entry expires; overrides the table's defaultMaxAgeSec. 0 = never. */
  maxAgeSec?: number;
  /** When the entry expires (a Date or ms since the epoch); give this or maxAgeSec, not both. */
  expiresAt?: Date | number;
  /** An int32; a speculative put may overwrite an entry of lower or equal priority. Default 0. */
  priority?: number;
}

/** Options of {@link CacheTable.get}. */
export interface GetOptions {
  /** Entries older than this (since put or rejuvenate) are treated as misses (and left in place). */
  maxAgeSec?: number;
}

/** What a put did. */
export type PutResult = 'inserted' | 'replaced' | 'overwritten' | 'collision';

/**
 * Advanced: what a replication layer (`@pile/sync`) attaches to a table with
 * {@link CacheTable.setHook}. Without a hook a table pays one field test per get and per write.
 */
export interface TableHook {
  /**
   * False while the table's copy may be stale (its replication is disconnected or lagging):
   * get and has answer a miss without looking (get counts it as a miss).
   */
  serving: boolean;
  /**
   * Entries whose sequence number is below this are treated as absent by get, has and rejuvenate
   * (left in place until replaced, removed or swept): a table epoch, 0 = none. Compare with
   * {@link CacheTable.sequence}.
   */
  epoch: number;
  /**
   * Called before a local change of `key` is written: `'put'`, `'delete'`, `'expiry'` (rejuvenate),
   * whether or not the key is present and whether or not the write then stores anything (a
   * speculative collision, a schema violation): so a crash between the two can only announce a
   * change that did not happen, never hide one. Memory-pressure evictions, expiry sweeps and
   * speculative overwrites of other keys are local and not reported. Runs synchronously; it may use
   * other tables, not this one.
   */
  changed(op: 'put' | 'delete' | 'expiry', key: CacheKey): void;
}

/** A table as persisted in the cache catalog (internal). */
export interface TableMeta {
  name: string;
  id: number;
  /** Fingerprint of the values' schema, or '' for untyped values. */
  fingerprint: string;
  options: ResolvedTableOptions;
  capacity: number;
  chunkSlots: number;
  chunks: number[];
  header: number;
}

const OUTCOME_COLLISION = 0;
const OUTCOME_INSERT = 1;
const OUTCOME_REPLACE = 2;
const OUTCOME_OVERWRITE = 3;

const S_HITS = H_STATS + 0;
const S_MISSES = H_STATS + 1;
const S_INSERTS = H_STATS + 2;
const S_REPLACES = H_STATS + 3;
const S_OVERWRITES = H_STATS + 4;
const S_COLLISIONS = H_STATS + 5;
const S_REMOVES = H_STATS + 6;
const S_EXPIRED = H_STATS + 7;
const S_EVICTED = H_STATS + 8;
const S_GROWS = H_STATS + 9;
const S_SHRINKS = H_STATS + 10;

function closedTable(name: string): PileError {
  return new PileError('PILE_CLOSED', `cache table '${name}' was dropped`);
}

/**
 * A named table of a {@link PileCache}: keys, values, expiry and priority all live in the pile.
 * Obtained from {@link PileCache.table}; valid until the cache is closed or the table dropped.
 */
export class CacheTable<V = unknown> {
  /** @internal */ idx: SlotIndex;
  /** @internal */ header: Float64Array;
  /** @internal */ values: ValueCodec<V>;
  /** @internal */ readonly entryTag: number;
  private readonly speculative: boolean;
  private dropped = false;
  /** Stores so far in this process; after a failed grow (out of space), the next attempt waits for growRetryAt. */
  private stores = 0;
  private growRetryAt = 0;
  /** Eviction candidates kept between evictions (see evictOne); typed arrays, no per-entry objects. */
  private readonly pool = {
    idx: undefined as SlotIndex | undefined,
    n: 0,
    slot: new Float64Array(EVICTION_POOL),
    ptr: new Float64Array(EVICTION_POOL),
    prio: new Int32Array(EVICTION_POOL),
    created: new Float64Array(EVICTION_POOL),
  };
  /**
   * No live entry expires before this time (ms): until then `count` needs no sweep. Not
   * persisted: 0 after an open, so the first `count` that may see an expired entry sweeps once.
   */
  private expiryKnownUntil = 0;
  /** Iterations in progress: a shrink waits for them to end, so removing while iterating skips no entry. */
  private walkers = 0;
  // Result of the last probe: the slot and the pointer in it.
  private fPtr = 0;
  private fOutcome = 0;
  private hook: TableHook | undefined = undefined;

  /** @internal */
  constructor(
    private readonly host: CacheHost,
    /** @internal */ readonly meta: TableMeta,
    header: Float64Array,
    codec: CompiledSchema<V> | undefined,
  ) {
    this.header = header;
    this.values = new ValueCodec<V>(codec);
    this.entryTag = tagOf(TAG_ENTRY, meta.id);
    this.speculative = meta.options.collisionMode === 'speculative';
    this.idx = SlotIndex.open(host.pile, meta.capacity, meta.chunkSlots, meta.chunks as PilePointer[]);
  }

  /** The table's name. */
  get name(): string {
    return this.meta.name;
  }

  /**
   * Live entries: expired ones are never counted, also after a reopen. O(1) while no entry has
   * expired since the last sweep (the table knows the earliest expiry time it holds); otherwise
   * the first `count` after an expiry sweeps the table (O(capacity), freeing what expired, as the
   * sweep timer would), and a read-only table counts the expired ones at each call.
   * @throws PILE_CLOSED
   */
  get count(): number {
    this.check();
    const h = this.header;
    if (h[H_EXPIRING] === 0) return h[H_COUNT]!;
    const now = this.host.clock();
    if (now < this.expiryKnownUntil) return h[H_COUNT]!;
    // Something may have expired since the last sweep: sweep now (a read-only table counts instead).
    if (!this.host.readonly) {
      this.sweepExpired(now, false);
      return h[H_COUNT]!;
    }
    return h[H_COUNT]! - this.countExpired(now);
  }

  /** Slots of the index. @throws PILE_CLOSED */
  get capacity(): number {
    this.check();
    return this.idx.capacity;
  }

  /** count / capacity. @throws PILE_CLOSED */
  get loadFactor(): number {
    this.check();
    return this.header[H_COUNT]! / this.idx.capacity;
  }

  /** A snapshot of the table's counters (persisted across restarts). @throws PILE_CLOSED */
  get stats(): TableStats {
    this.check();
    const s = {} as Record<(typeof STAT_NAMES)[number], number>;
    STAT_NAMES.forEach((n, i) => { s[n] = this.header[H_STATS + i]!; });
    return s;
  }

  /**
   * Advanced: attaches (or, with undefined, detaches) the table's {@link TableHook}; one at a time.
   * Used by `@pile/sync`; not persisted.
   * @throws PILE_LOCKED when another hook is attached, PILE_CLOSED
   */
  setHook(hook: TableHook | undefined): void {
    this.check();
    if (hook !== undefined && this.hook !== undefined && this.hook !== hook) {
      throw new PileError('PILE_LOCKED', `cache table '${this.meta.name}' already has a hook attached (one @pile/sync per table)`);
    }
    this.hook = hook;
  }

  /** Advanced: the sequence number the next stored entry gets (persisted; see {@link TableHook.epoch}). @throws PILE_CLOSED */
  get sequence(): number {
    this.check();
    return this.header[H_SEQ]!;
  }

  /**
   * Stores `value` under `key`.
   * @returns 'inserted' (new key), 'replaced' (key existed), 'overwritten' (speculative: took the
   *   slot of a lower- or equal-priority entry of another key), 'collision' (speculative: nothing stored)
   * @throws PILE_INVALID_OPTION for a bad key or option, naming it
   * @throws PILE_SCHEMA_VIOLATION when the value does not match the table's schema (nothing is written)
   * @throws PILE_OUT_OF_SPACE when a durable table is full at maxCapacity, or nothing is left to evict
   * @throws PILE_TOO_LARGE when the entry does not fit in one segment
   * @throws PILE_READONLY, PILE_CLOSED
   */
  put(key: CacheKey, value: V, opts?: PutOptions): PutResult {
    this.writable();
    let priority = 0;
    let maxAgeSec = this.meta.options.defaultMaxAgeSec;
    let expiresAt = -1;
    if (opts !== undefined) {
      if (opts === null || typeof opts !== 'object') throw invalidOption('put options', 'expected an object');
      if (opts.priority !== undefined) {
        priority = opts.priority;
        if (!Number.isInteger(priority) || priority < -0x80000000 || priority > 0x7fffffff) {
          throw invalidOption('priority', `expected an int32, got ${String(priority)}`);
        }
      }
      if (opts.maxAgeSec !== undefined && opts.expiresAt !== undefined) throw invalidOption('expiresAt', 'give maxAgeSec or expiresAt, not both');
      if (opts.maxAgeSec !== undefined) {
        maxAgeSec = opts.maxAgeSec;
        if (typeof maxAgeSec !== 'number' || !Number.isFinite(maxAgeSec) || maxAgeSec < 0) {
          throw invalidOption('maxAgeSec', `expected a number of seconds >= 0, got ${String(maxAgeSec)}`);
        }
      }
      if (opts.expiresAt !== undefined) {
        const e = opts.expiresAt instanceof Date ? opts.expiresAt.getTime() : opts.expiresAt;
        if (typeof e !== 'number' || !Number.isFinite(e) || e <= 0) throw invalidOption('expiresAt', `expected a Date or ms since the epoch, got ${String(opts.expiresAt)}`);
        expiresAt = e;
      }
    }
    // Before the write, and before the key is prepared (the hook may use other tables).
    if (this.hook !== undefined) this.hook.changed('put', key);
    const host = this.host;
    // The value before the key: measuring it runs the caller's code, which may read this cache and
    // so replace the prepared key and the lookup state.
    const vlen = this.values.measure(value);
    // Checked before anything is sized from them: an entry must fit in one segment, and past
    // 2^31 the 32-bit align8 of a key length wraps.
    const room = host.pile.segmentSize;
    if (vlen > room || (key instanceof Uint8Array && key.length > room)) {
      throw new PileError('PILE_TOO_LARGE', `a cache entry with a ${key instanceof Uint8Array ? `${key.length}-byte key and ` : ''}${vlen}-byte value does not fit in a segment of ${room} bytes (segmentSize)`);
    }
    const now = host.clock();
    if (expiresAt < 0) expiresAt = maxAgeSec > 0 ? now + maxAgeSec * 1000 : 0;
    const kc = host.keys;
    kc.prepare(key);
    const epoch = kc.epoch;
    const len = this.encode(vlen, now, expiresAt, priority);
    // A typed value is read again while it is written: a get from its getters prepared another key.
    if (kc.epoch !== epoch) kc.prepare(key);
    return this.storeEncoded(len, priority, expiresAt, true);
  }

  /**
   * The value under `key`, or undefined when absent or expired.
   * @throws PILE_INVALID_OPTION for a bad key or maxAgeSec
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT when the stored value can not be decoded
   * @throws PILE_CLOSED
   */
  get(key: CacheKey, opts?: GetOptions): V | undefined {
    this.check();
    let maxAge = -1;
    if (opts !== undefined && opts.maxAgeSec !== undefined) {
      maxAge = opts.maxAgeSec;
      if (typeof maxAge !== 'number' || Number.isNaN(maxAge) || maxAge < 0) throw invalidOption('maxAgeSec', `expected a number of seconds >= 0, got ${String(maxAge)}`);
    }
    const host = this.host;
    host.keys.prepare(key);
    const hook = this.hook;
    const i = hook === undefined || hook.serving ? this.find() : -1;
    const h = this.header;
    if (i < 0 || (hook !== undefined && hook.epoch > 0 && this.belowEpoch(hook))) {
      h[S_MISSES]!++;
      return undefined;
    }
    const idx = this.idx;
    const exp = idx.f64[i >>> idx.shift]![3 * (i & idx.mask) + 1]!;
    const mem = host.mem;
    let now = 0;
    if (exp !== 0) {
      now = host.clock();
      if (exp <= now) {
        this.expireSlot(i);
        h[S_MISSES]!++;
        return undefined;
      }
    }
    const o = mem.off;
    const view = mem.view;
    if (maxAge >= 0) {
      if (now === 0) now = host.clock();
      if (now - view.getFloat64(o + E_CREATED, true) > maxAge * 1000) {
        h[S_MISSES]!++;
        return undefined;
      }
    }
    h[S_HITS]!++;
    const b = mem.buf;
    const voff = valueOffset(mem);
    return this.values.read(b[o + E_VALUE_KIND]!, b, view, o + voff, valueLength(mem, voff));
  }

  /**
   * The value under `key`; when absent, `make(key)` is stored (with `opts`) and returned.
   * @throws as {@link get} and {@link put}, and whatever `make` throws
   */
  getOrPut(key: CacheKey, make: (key: CacheKey) => V, opts?: PutOptions): V {
    const v = this.get(key);
    if (v !== undefined) return v;
    const made = make(key);
    this.put(key, made, opts);
    return made;
  }

  /**
   * True when `key` is present and not expired. Counts no hit or miss.
   * @throws PILE_INVALID_OPTION for a bad key, PILE_CLOSED
   */
  has(key: CacheKey): boolean {
    this.check();
    this.host.keys.prepare(key);
    const hook = this.hook;
    if (hook !== undefined && !hook.serving) return false;
    const i = this.find();
    if (i < 0 || (hook !== undefined && hook.epoch > 0 && this.belowEpoch(hook))) return false;
    const exp = this.idx.f64[i >>> this.idx.shift]![3 * (i & this.idx.mask) + 1]!;
    return exp === 0 || exp > this.host.clock();
  }

  /**
   * Deletes `key`, as `Map.delete` does; true when a live entry was deleted (an expired one is
   * freed but answers false).
   * @throws PILE_INVALID_OPTION for a bad key, PILE_READONLY, PILE_CLOSED
   */
  delete(key: CacheKey): boolean {
    this.writable();
    if (this.hook !== undefined) this.hook.changed('delete', key);
    return this.removeKey(key);
  }

  /**
   * @deprecated Use {@link delete}, the name every Pile package and `Map` use; `remove` stays as its alias.
   * @throws as {@link delete}
   */
  remove(key: CacheKey): boolean {
    return this.delete(key);
  }

  private removeKey(key: CacheKey): boolean {
    this.host.keys.prepare(key);
    const i = this.find();
    if (i < 0) return false;
    const exp = this.idx.f64[i >>> this.idx.shift]![3 * (i & this.idx.mask) + 1]!;
    if (exp !== 0 && exp <= this.host.clock()) {
      this.expireSlot(i);
      this.maybeShrink();
      return false;
    }
    this.removeSlot(i);
    this.header[S_REMOVES]!++;
    this.maybeShrink();
    return true;
  }

  /**
   * Resets the age of `key` to zero: its age base becomes now and, when it expires, it expires
   * after the same time to live it was given. False when absent or expired.
   * @throws PILE_INVALID_OPTION for a bad key, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  rejuvenate(key: CacheKey): boolean {
    this.writable();
    const hook = this.hook;
    if (hook !== undefined) hook.changed('expiry', key);
    const host = this.host;
    host.keys.prepare(key);
    const i = this.find();
    if (i < 0) return false;
    const idx = this.idx;
    const exp = idx.f64[i >>> idx.shift]![3 * (i & idx.mask) + 1]!;
    const now = host.clock();
    if (exp !== 0 && exp <= now) {
      this.expireSlot(i);
      return false;
    }
    if (hook !== undefined && hook.epoch > 0 && this.belowEpoch(hook)) return false;
    const mem = host.mem;
    const o = mem.off;
    const voff = valueOffset(mem);
    const len = voff + valueLength(mem, voff);
    const s = host.scratch(len);
    mem.buf.copy(s.buf, 0, o, o + len);
    const created = s.view.getFloat64(E_CREATED, true);
    const newExp = exp === 0 ? 0 : now + (exp - created);
    const priority = s.view.getInt32(E_PRIORITY, true);
    s.view.setFloat64(E_SEQ, this.header[H_SEQ]!++, true);
    s.view.setFloat64(E_CREATED, now, true);
    s.view.setFloat64(E_EXPIRES, newExp, true);
    this.storeEncoded(len, priority, newExp, false);
    return true;
  }

  /**
   * Keys of live (not expired) entries, in slot order. Entries put or removed during the
   * iteration may or may not be seen. Removing the key just yielded is safe: every other entry is
   * still seen once (the table does not shrink while an iteration is open). Removing other keys
   * may move entries across the iteration point (backward-shift deletion), and a grow (a put
   * during the iteration) may make a key appear twice or not at all.
   * @throws PILE_CLOSED (also when the cache is closed mid-iteration)
   */
  *keys(): IterableIterator<CacheKey> {
    for (const e of this.walk(false)) yield e[0];
  }

  /**
   * [key, value] pairs of live entries; same iteration rules as {@link keys}.
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT when a value can not be decoded; PILE_CLOSED
   */
  *entries(): IterableIterator<[CacheKey, V]> {
    for (const e of this.walk(true)) yield e as [CacheKey, V];
  }

  /**
   * Live entries in slot order. When the slot just yielded holds another key on resumption (its
   * entry was removed and a later one shifted back into it), that slot is visited again; a new
   * record of the same key (a put during the iteration) is not.
   */
  private *walk(withValues: boolean): IterableIterator<[CacheKey, V | undefined]> {
    let last: CacheKey | undefined;
    let lastPtr = 0;
    this.check();
    let idx = this.idx;
    // Start after an empty slot: a shift moves entries back within their cluster, never across an
    // empty slot, so from there no removal moves an entry from ahead of the walk to behind it.
    let start = 0;
    for (let i = 0; i < idx.capacity; i++) {
      if (idx.f64[i >>> idx.shift]![3 * (i & idx.mask)] === 0) {
        start = i;
        break;
      }
    }
    this.walkers++;
    try {
      for (let n = 0; ; ) {
        this.check();
        if (this.idx !== idx) {
          idx = this.idx;
          start = 0;
        }
        if (n >= idx.capacity) return;
        const i = (start + n) % idx.capacity;
        if (last !== undefined) {
          const p = idx.f64[i >>> idx.shift]![3 * (i & idx.mask)]!;
          let revisit = false;
          if (p > 0 && p !== lastPtr) {
            const mem = this.host.mem;
            mem.locate(p);
            this.host.keys.prepare(last);
            revisit = !this.host.keys.equals(mem.buf[mem.off + E_KEY_TYPE]!, mem.buf, mem.off + E_KEY, mem.view.getUint32(mem.off + E_KEY_LEN, true));
          }
          last = undefined;
          if (!revisit) {
            n++;
            continue;
          }
        }
        if (!this.liveAt(i)) {
          n++;
          continue;
        }
        const mem = this.host.mem;
        const o = mem.off;
        const b = mem.buf;
        const k = decodeKey(b[o + E_KEY_TYPE]!, b, o + E_KEY, keyLength(mem));
        const voff = valueOffset(mem);
        const v = withValues ? this.values.read(b[o + E_VALUE_KIND]!, b, mem.view, o + voff, valueLength(mem, voff)) : undefined;
        last = k;
        lastPtr = idx.f64[i >>> idx.shift]![3 * (i & idx.mask)]!;
        yield [k, v];
      }
    } finally {
      this.walkers--;
    }
  }

  // ----------------------------------------------------------------- internals (used by PileCache)

  /** @internal Frees every live entry whose expiry has passed; returns how many. */
  sweepExpired(now: number, shrink: boolean): number {
    if (this.header[H_EXPIRING] === 0) {
      this.expiryKnownUntil = Number.POSITIVE_INFINITY;
      return 0;
    }
    let freed = 0;
    let next = Number.POSITIVE_INFINITY;
    const idx = this.idx;
    for (let c = 0; c < idx.f64.length; c++) {
      const f = idx.f64[c]!;
      for (let s = 0; s < f.length; s += 3) {
        const e = f[s + 1]!;
        const p = f[s]!;
        if (e === 0 || p <= 0) continue;
        if (e <= now && !this.host.readonly) {
          this.expireSlot(c * idx.chunkSlots + s / 3);
          freed++;
          if (f[s] !== p) s -= 3; // the backward shift may have moved a later entry into this slot
        } else if (e < next) next = e;
      }
    }
    if (!this.host.readonly) this.expiryKnownUntil = next;
    if (shrink) this.maybeShrink();
    return freed;
  }

  /** Live slots whose expiry has passed (a read-only table can not free them). */
  private countExpired(now: number): number {
    let n = 0;
    const idx = this.idx;
    for (let c = 0; c < idx.f64.length; c++) {
      const f = idx.f64[c]!;
      for (let s = 0; s < f.length; s += 3) if (f[s + 1] !== 0 && f[s + 1]! <= now && f[s]! > 0) n++;
    }
    return n;
  }

  /**
   * @internal Memory pressure: evicts the lowest-priority, then oldest, entry among `samples`
   * freshly sampled live entries and the best candidates kept from earlier evictions (a pool of
   * {@link EVICTION_POOL}, as Redis keeps one): the age lives in the entry record, so each sample
   * costs a random read of the pile, and the pool gets the choice of many samples for the reads
   * of a few. A pooled candidate is used only while its slot still holds the same record.
   * Returns false when the table is empty.
   */
  evictOne(samples: number): boolean {
    const count = this.header[H_COUNT]!;
    if (count === 0) return false;
    const idx = this.idx;
    const cap = idx.capacity;
    const mem = this.host.mem;
    const pool = this.pool;
    if (pool.idx !== idx) {
      pool.idx = idx;
      pool.n = 0;
    }
    // The samples are the live slots that follow one random slot: the entries are as random
    // (slots are in hash order), and the index is read at one place instead of `samples`.
    let i = Math.floor(Math.random() * cap);
    for (let n = 0, step = 0; n < samples && step < cap; step++, i = i + 1 === cap ? 0 : i + 1) {
      const p = idx.f64[i >>> idx.shift]![3 * (i & idx.mask)]!;
      if (p <= 0) continue;
      n++;
      let known = false;
      for (let k = 0; k < pool.n; k++) {
        if (pool.ptr[k] === p) {
          pool.slot[k] = i; // a backward shift may have moved it
          known = true;
        }
      }
      if (known) continue;
      const prio = idx.i32[i >>> idx.shift]![6 * (i & idx.mask) + 5]!;
      mem.locate(p);
      const created = mem.view.getFloat64(mem.off + E_CREATED, true);
      let at = pool.n;
      if (at === EVICTION_POOL) {
        // Full: the new candidate replaces the pool's least evictable one, if it is more evictable.
        at = 0;
        for (let k = 1; k < EVICTION_POOL; k++) {
          if (pool.prio[k]! > pool.prio[at]! || (pool.prio[k] === pool.prio[at] && pool.created[k]! > pool.created[at]!)) at = k;
        }
        if (prio > pool.prio[at]! || (prio === pool.prio[at] && created >= pool.created[at]!)) continue;
      } else pool.n++;
      pool.slot[at] = i;
      pool.ptr[at] = p;
      pool.prio[at] = prio;
      pool.created[at] = created;
    }
    for (;;) {
      let best = -1;
      for (let k = 0; k < pool.n; k++) {
        if (best < 0 || pool.prio[k]! < pool.prio[best]! || (pool.prio[k] === pool.prio[best] && pool.created[k]! < pool.created[best]!)) best = k;
      }
      if (best < 0) return this.evictOne(Math.max(1, samples));
      const slot = pool.slot[best]!;
      const held = idx.f64[slot >>> idx.shift]![3 * (slot & idx.mask)] === pool.ptr[best];
      // Take it out of the pool (the last one moves into its place).
      pool.n--;
      pool.slot[best] = pool.slot[pool.n]!;
      pool.ptr[best] = pool.ptr[pool.n]!;
      pool.prio[best] = pool.prio[pool.n]!;
      pool.created[best] = pool.created[pool.n]!;
      if (!held) continue;
      this.removeSlot(slot);
      this.header[S_EVICTED]!++;
      return true;
    }
  }

  /**
   * @internal After an unclean shutdown: drops slots whose record is gone or not this table's,
   * re-derives each slot's cached fields from its record, recounts.
   */
  recoverIndex(): void {
    const pile = this.host.pile;
    const mem = this.host.mem;
    const idx = this.idx;
    const h = this.header;
    let count = 0;
    let tombs = 0;
    let expiring = 0;
    let maxSeq = -1;
    for (let i = 0; i < idx.capacity; i++) {
      const c = i >>> idx.shift;
      const s = i & idx.mask;
      const p = idx.f64[c]![3 * s]!;
      if (p === 0) continue;
      let ok = false;
      if (p > 0) {
        try {
          ok = pile.has(p as PilePointer) && pile.rawTag(p as PilePointer) === this.entryTag;
        } catch {
          ok = false;
        }
      }
      if (!ok) {
        idx.f64[c]![3 * s] = TOMBSTONE;
        tombs++;
        continue;
      }
      mem.locate(p);
      const v = mem.view;
      const o = mem.off;
      idx.u32[c]![6 * s + 4] = v.getUint32(o + E_HASH, true);
      idx.i32[c]![6 * s + 5] = v.getInt32(o + E_PRIORITY, true);
      const e = v.getFloat64(o + E_EXPIRES, true);
      idx.f64[c]![3 * s + 1] = e;
      if (e !== 0) expiring++;
      maxSeq = Math.max(maxSeq, v.getFloat64(o + E_SEQ, true));
      count++;
    }
    const dup = this.dropDuplicates();
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
  private dropDuplicates(): { count: number; expiring: number } {
    const idx = this.idx;
    const cap = idx.capacity;
    // Start after an empty slot, so that no cluster is split by the wrap around the end.
    let start = 0;
    for (let i = 0; i < cap; i++) {
      if (idx.f64[i >>> idx.shift]![3 * (i & idx.mask)] === 0) {
        start = i + 1;
        break;
      }
    }
    const cluster = new Set<number>();
    let count = 0;
    let expiring = 0;
    for (let n = 0, i = start % cap; n < cap; n++, i = i + 1 === cap ? 0 : i + 1) {
      const c = i >>> idx.shift;
      const s = i & idx.mask;
      const p = idx.f64[c]![3 * s]!;
      if (p === 0) cluster.clear();
      else if (p > 0) {
        if (!cluster.has(p)) cluster.add(p);
        else {
          idx.f64[c]![3 * s] = TOMBSTONE;
          count++;
          if (idx.f64[c]![3 * s + 1] !== 0) expiring++;
        }
      }
    }
    return { count, expiring };
  }

  /** @internal True when `ptr` (an entry record of this table) is the one the index holds for its key. */
  holdsEntry(ptr: number): boolean {
    const mem = this.host.mem;
    mem.locate(ptr);
    const o = mem.off;
    const b = mem.buf;
    const key = decodeKey(b[o + E_KEY_TYPE]!, b, o + E_KEY, keyLength(mem));
    this.host.keys.prepare(key);
    return this.find() >= 0 && this.fPtr === ptr;
  }

  /** @internal Pile bytes of the table: index, header and the payload of each entry record. O(capacity). */
  bytes(): number {
    this.check();
    const idx = this.idx;
    const pile = this.host.pile;
    let n = idx.capacity * 24 + HEADER_WORDS * 8;
    for (let c = 0; c < idx.f64.length; c++) {
      const f = idx.f64[c]!;
      for (let s = 0; s < f.length; s += 3) if (f[s]! > 0) n += pile.sizeOf(f[s]! as PilePointer);
    }
    return n;
  }

  /** @internal Frees the index, the header and every entry (dropTable); the table is unusable after. */
  destroy(): void {
    const pile = this.host.pile;
    const idx = this.idx;
    for (let c = 0; c < idx.f64.length; c++) {
      const f = idx.f64[c]!;
      for (let s = 0; s < f.length; s += 3) if (f[s]! > 0) pile.delete(f[s]! as PilePointer);
    }
    idx.free(pile);
    pile.delete(this.meta.header as PilePointer);
    this.markDropped();
  }

  /** @internal */
  markDropped(): void {
    this.dropped = true;
    // Let go of the pile's memory: the core unmaps a segment only once nothing references it.
    this.header = new Float64Array(HEADER_WORDS);
    this.idx = undefined as unknown as SlotIndex;
  }

  /** @internal Sets the schema codec of a table opened before its schema was known. */
  attachCodec(codec: CompiledSchema<V> | undefined): void {
    this.values = new ValueCodec<V>(codec);
  }

  /** After a hit of find(): the entry (host.mem) was stored before the hook's epoch. */
  private belowEpoch(hook: TableHook): boolean {
    const mem = this.host.mem;
    return mem.view.getFloat64(mem.off + E_SEQ, true) < hook.epoch;
  }

  private check(): void {
    this.host.check();
    if (this.dropped) throw closedTable(this.meta.name);
  }

  private writable(): void {
    this.host.writable();
    if (this.dropped) throw closedTable(this.meta.name);
  }

  /** Writes the entry for the prepared key into the host's scratch; returns its length. */
  private encode(vlen: number, now: number, expiresAt: number, priority: number): number {
    const host = this.host;
    const kc = host.keys;
    const klen = kc.storedLength();
    const voff = E_KEY + align8(klen);
    const len = voff + vlen;
    const { buf, view } = host.scratch(len);
    view.setFloat64(E_SEQ, this.header[H_SEQ]!++, true);
    view.setFloat64(E_CREATED, now, true);
    view.setFloat64(E_EXPIRES, expiresAt, true);
    view.setInt32(E_PRIORITY, priority, true);
    view.setUint32(E_HASH, kc.hash, true);
    buf[E_KEY_TYPE] = kc.type;
    buf[E_VALUE_KIND] = this.values.kind;
    view.setUint16(34, 0, true);
    view.setUint32(E_KEY_LEN, klen, true);
    view.setUint32(E_VALUE_LEN, vlen, true);
    view.setUint32(44, 0, true);
    const kend = kc.write(buf, E_KEY);
    for (let p = kend; p < voff; p++) buf[p] = 0;
    this.values.write(buf, view, voff, vlen);
    return len;
  }

  /** Stores the entry in scratch[0..len) for the prepared key and publishes it in the index. */
  private storeEncoded(len: number, priority: number, expiresAt: number, count: boolean): PutResult {
    const host = this.host;
    this.stores++;
    this.ensureRoom();
    let slot = this.decide(priority);
    if (this.fOutcome === OUTCOME_COLLISION || this.fOutcome === OUTCOME_OVERWRITE) {
      // A full probe window in a table that may still grow and is not nearly empty: grow rather than drop.
      const cap = this.idx.capacity;
      const o = this.meta.options;
      const count = this.header[H_COUNT]!;
      if (cap < o.maxCapacity && count >= cap * o.loadFactorHigh * 0.5 && this.stores >= this.growRetryAt) {
        if (this.rehash(Math.min(o.maxCapacity, Math.max(cap + 1, Math.ceil(cap * o.growthFactor))))) this.header[S_GROWS]!++;
        else this.growRetryAt = this.stores + Math.max(64, Math.ceil(count / 8));
        slot = this.decide(priority);
      }
    }
    if (this.fOutcome === OUTCOME_COLLISION) {
      this.header[S_COLLISIONS]!++;
      return 'collision';
    }
    const epoch = host.evictions;
    const idxBefore = this.idx;
    const ptr = host.store(host.scratch(len).buf.subarray(0, len), this.entryTag);
    if (host.evictions !== epoch || this.idx !== idxBefore) {
      slot = this.decide(priority);
      if (this.fOutcome === OUTCOME_COLLISION) {
        host.pile.delete(ptr);
        this.header[S_COLLISIONS]!++;
        return 'collision';
      }
    }
    const idx = this.idx;
    const c = slot >>> idx.shift;
    const s = slot & idx.mask;
    const old = idx.f64[c]![3 * s]!;
    const oldExp = idx.f64[c]![3 * s + 1]!;
    const h = this.header;
    // The record is complete; caches first, the pointer last: the pointer is what publishes it.
    idx.u32[c]![6 * s + 4] = host.keys.hash;
    idx.i32[c]![6 * s + 5] = priority;
    idx.f64[c]![3 * s + 1] = expiresAt;
    idx.f64[c]![3 * s] = ptr;
    if (expiresAt !== 0) {
      h[H_EXPIRING]!++;
      if (expiresAt < this.expiryKnownUntil) this.expiryKnownUntil = expiresAt;
    }
    if (old > 0) {
      if (oldExp !== 0) h[H_EXPIRING]!--;
      host.pile.delete(old as PilePointer);
    } else {
      if (old === TOMBSTONE) h[H_TOMBS]!--;
      h[H_COUNT]!++;
    }
    switch (this.fOutcome) {
      case OUTCOME_INSERT:
        if (count) h[S_INSERTS]!++;
        return 'inserted';
      case OUTCOME_REPLACE:
        if (count) h[S_REPLACES]!++;
        return 'replaced';
      default:
        h[S_OVERWRITES]!++;
        return 'overwritten';
    }
  }

  /**
   * Where the prepared key goes: its own slot (replace), a free slot (insert), a victim's slot
   * (speculative overwrite), or nowhere (collision). Sets fOutcome; returns the slot.
   */
  private decide(priority: number): number {
    const found = this.find();
    if (found >= 0) {
      this.fOutcome = OUTCOME_REPLACE;
      return found;
    }
    const idx = this.idx;
    const cap = idx.capacity;
    const limit = this.speculative ? Math.min(SPECULATIVE_PROBES, cap) : cap;
    const home = idx.home(this.host.keys.hash);
    let i = home;
    for (let n = 0; n < limit; n++) {
      if (idx.f64[i >>> idx.shift]![3 * (i & idx.mask)]! <= 0) {
        this.fOutcome = OUTCOME_INSERT;
        return i;
      }
      if (++i === cap) i = 0;
    }
    if (!this.speculative) {
      // Full because the pile had no room to grow the index: memory pressure, so evict one of ours.
      if (cap < this.meta.options.maxCapacity && this.evictOne(EVICTION_SAMPLES)) return this.decide(priority);
      throw new PileError('PILE_OUT_OF_SPACE', `durable cache table '${this.meta.name}' is full (${cap} slots, maxCapacity ${this.meta.options.maxCapacity})`);
    }
    // Every probed slot is taken: an expired entry is free for the taking, else the lowest priority not above ours.
    const now = this.host.clock();
    let best = -1;
    let bestPrio = 0;
    i = home;
    for (let n = 0; n < limit; n++) {
      const c = i >>> idx.shift;
      const s = i & idx.mask;
      const e = idx.f64[c]![3 * s + 1]!;
      if (e !== 0 && e <= now) {
        // Refilled at once: a backward shift here could move another entry into slot i.
        this.vacateSlot(i);
        this.header[S_EXPIRED]!++;
        this.fOutcome = OUTCOME_INSERT;
        return i;
      }
      const p = idx.i32[c]![6 * s + 5]!;
      if (p <= priority && (best < 0 || p < bestPrio)) {
        best = i;
        bestPrio = p;
      }
      if (++i === cap) i = 0;
    }
    this.fOutcome = best < 0 ? OUTCOME_COLLISION : OUTCOME_OVERWRITE;
    return best;
  }

  /**
   * The slot holding the prepared key, or -1; on a hit, host.mem is left on the entry's record
   * and fPtr holds its pointer.
   */
  private find(): number {
    const kc = this.host.keys;
    const hash = kc.hash;
    const idx = this.idx;
    const cap = idx.capacity;
    const limit = this.speculative ? Math.min(SPECULATIVE_PROBES, cap) : cap;
    const shift = idx.shift;
    const mask = idx.mask;
    const mem = this.host.mem;
    let i = idx.home(hash);
    for (let n = 0; n < limit; n++) {
      const c = i >>> shift;
      const s = i & mask;
      const p = idx.f64[c]![3 * s]!;
      if (p === 0) return -1;
      if (p > 0 && idx.u32[c]![6 * s + 4] === hash) {
        mem.locate(p);
        const o = mem.off;
        const b = mem.buf;
        const v = mem.view;
        if (v.getUint32(o - 8, true) !== this.entryTag) {
          throw new PileError('PILE_CORRUPT', `cache table '${this.meta.name}': slot ${i} points at a record (${p}) that is not one of its entries`);
        }
        if (kc.equals(b[o + E_KEY_TYPE]!, b, o + E_KEY, v.getUint32(o + E_KEY_LEN, true))) {
          this.fPtr = p;
          return i;
        }
      }
      if (++i === cap) i = 0;
    }
    return -1;
  }

  /** True when slot i holds a live entry; leaves host.mem on it. */
  private liveAt(i: number): boolean {
    const idx = this.idx;
    const p = idx.f64[i >>> idx.shift]![3 * (i & idx.mask)]!;
    if (p <= 0) return false;
    const e = idx.f64[i >>> idx.shift]![3 * (i & idx.mask) + 1]!;
    if (e !== 0 && e <= this.host.clock()) return false;
    this.host.mem.locate(p);
    return true;
  }

  /**
   * Empties slot i by backward-shift deletion (Knuth's algorithm R for linear probing): each later
   * entry of the cluster that may live closer to its home moves back into the hole, so removals
   * leave no tombstones and probe lengths stay those of the live load, however many entries an
   * evicting cache turns over. Then frees the record. A move writes the slot's caches, then its
   * pointer, and only then reuses the source slot: a crash mid-shift can leave one entry in two
   * slots (which {@link recoverIndex} reduces to one), never an unreachable entry; the removed
   * record, no longer referenced, is an orphan that recovery frees.
   */
  private removeSlot(i: number): void {
    const idx = this.idx;
    const c = i >>> idx.shift;
    const s = i & idx.mask;
    const p = idx.f64[c]![3 * s]!;
    const h = this.header;
    h[H_COUNT]!--;
    if (idx.f64[c]![3 * s + 1] !== 0) h[H_EXPIRING]!--;
    this.shiftInto(i);
    this.host.pile.delete(p as PilePointer);
  }

  /** Removes slot i's entry leaving a tombstone, for a slot the caller refills at once. */
  private vacateSlot(i: number): void {
    const idx = this.idx;
    const c = i >>> idx.shift;
    const s = i & idx.mask;
    const p = idx.f64[c]![3 * s]!;
    idx.f64[c]![3 * s] = TOMBSTONE;
    const h = this.header;
    h[H_COUNT]!--;
    h[H_TOMBS]!++;
    if (idx.f64[c]![3 * s + 1] !== 0) h[H_EXPIRING]!--;
    this.host.pile.delete(p as PilePointer);
  }

  /** The backward shift of {@link removeSlot}: fills hole `i` from later slots of its cluster, empties the last hole. */
  private shiftInto(i: number): void {
    const idx = this.idx;
    const cap = idx.capacity;
    const shift = idx.shift;
    const mask = idx.mask;
    let hole = i;
    let j = i;
    for (let n = 1; n < cap; n++) {
      if (++j === cap) j = 0;
      const jc = j >>> shift;
      const js = j & mask;
      const p = idx.f64[jc]![3 * js]!;
      if (p === 0) break;
      // A tombstone (left by recovery or an older version) needs no reaching: probe on past it.
      if (p < 0) continue;
      const home = idx.home(idx.u32[jc]![6 * js + 4]!);
      // The entry stays when its home lies cyclically in (hole, j]: moving it before its home would lose it.
      if (hole <= j ? hole < home && home <= j : hole < home || home <= j) continue;
      const hc = hole >>> shift;
      const hs = hole & mask;
      idx.u32[hc]![6 * hs + 4] = idx.u32[jc]![6 * js + 4]!;
      idx.i32[hc]![6 * hs + 5] = idx.i32[jc]![6 * js + 5]!;
      idx.f64[hc]![3 * hs + 1] = idx.f64[jc]![3 * js + 1]!;
      idx.f64[hc]![3 * hs] = p;
      hole = j;
    }
    const hc = hole >>> shift;
    const hs = hole & mask;
    idx.f64[hc]![3 * hs] = 0;
    idx.f64[hc]![3 * hs + 1] = 0;
    idx.u32[hc]![6 * hs + 4] = 0;
    idx.i32[hc]![6 * hs + 5] = 0;
  }

  private expireSlot(i: number): void {
    if (this.host.readonly) return;
    this.removeSlot(i);
    this.header[S_EXPIRED]!++;
  }

  /**
   * Before an insert would pass loadFactorHigh: grows, or purges tombstones (only recovery and
   * tables written by older versions have any: removals shift entries back instead). A durable
   * table whose index can not grow for lack of memory evicts one of its own entries instead of
   * filling its index past loadFactorHigh, where linear probing slows down sharply.
   */
  private ensureRoom(): void {
    const h = this.header;
    const count = h[H_COUNT]!;
    const tombs = h[H_TOMBS]!;
    const cap = this.idx.capacity;
    const o = this.meta.options;
    const high = cap * o.loadFactorHigh;
    if (count + tombs + 1 <= high) return;
    if (count + 1 > high * 0.75 && cap < o.maxCapacity) {
      if (this.stores >= this.growRetryAt) {
        if (this.grow()) return;
        if (!this.speculative && this.host.makeRoom() && this.grow()) return;
        this.growRetryAt = this.stores + Math.max(64, Math.ceil(count / 8));
      }
      if (tombs > 0 && tombs >= Math.max(1, cap * 0.05, (cap - count) / 2)) this.rehash(cap);
      // Still past loadFactorHigh in a durable table: a batch of memory-pressure evictions, then one of ours.
      if (!this.speculative && h[H_COUNT]! + h[H_TOMBS]! + 1 > high && !(this.host.makeRoom() && h[H_COUNT]! + h[H_TOMBS]! + 1 <= high)) this.evictOne(EVICTION_SAMPLES);
    } else if (tombs >= Math.max(1, cap * 0.05, (cap - count) / 2)) {
      // Tombstones, not live entries, fill the table: rebuild it at the same size (amortised over those removes).
      this.rehash(cap);
    }
  }

  /** One grow step; false when the pile has no room for the bigger index. */
  private grow(): boolean {
    const o = this.meta.options;
    const cap = this.idx.capacity;
    if (!this.rehash(Math.min(o.maxCapacity, Math.max(cap + 1, Math.ceil(cap * o.growthFactor))))) return false;
    this.header[S_GROWS]!++;
    return true;
  }

  private maybeShrink(): void {
    if (this.walkers > 0) return;
    const o = this.meta.options;
    const cap = this.idx.capacity;
    const count = this.header[H_COUNT]!;
    if (cap <= o.minCapacity || count >= cap * o.loadFactorLow) return;
    const target = Math.max(o.minCapacity, Math.ceil(cap * o.shrinkFactor));
    if (target < cap && this.rehash(target)) this.header[S_SHRINKS]!++;
  }

  /**
   * Moves every live slot into a new index of `capacity` slots, publishes it in the catalog
   * (crash-atomic), then frees the old chunks. False when the pile has no room for the new index.
   */
  private rehash(capacity: number): boolean {
    const host = this.host;
    const pile = host.pile;
    const old = this.idx;
    let next: SlotIndex;
    try {
      next = SlotIndex.create(pile, capacity, this.meta.chunkSlots, tagOf(TAG_CHUNK, this.meta.id));
    } catch (err) {
      if (err instanceof PileError && (err.code === 'PILE_OUT_OF_SPACE' || err.code === 'PILE_TOO_LARGE')) return false;
      throw err;
    }
    const limit = this.speculative ? Math.min(SPECULATIVE_PROBES, capacity) : capacity;
    const dropped: number[] = [];
    let count = 0;
    let expiring = 0;
    for (let c = 0; c < old.f64.length; c++) {
      const slots = old.f64[c]!.length / 3;
      for (let s = 0; s < slots; s++) {
        const p = old.f64[c]![3 * s]!;
        if (p <= 0) continue;
        const hash = old.u32[c]![6 * s + 4]!;
        let i = next.home(hash);
        let placed = false;
        for (let n = 0; n < limit; n++) {
          const nc = i >>> next.shift;
          const ns = i & next.mask;
          if (next.f64[nc]![3 * ns] === 0) {
            next.u32[nc]![6 * ns + 4] = hash;
            next.i32[nc]![6 * ns + 5] = old.i32[c]![6 * s + 5]!;
            const e = old.f64[c]![3 * s + 1]!;
            next.f64[nc]![3 * ns + 1] = e;
            next.f64[nc]![3 * ns] = p;
            if (e !== 0) expiring++;
            placed = true;
            break;
          }
          if (++i === capacity) i = 0;
        }
        if (placed) count++;
        else dropped.push(p);
      }
    }
    const meta = this.meta;
    const before = { capacity: meta.capacity, chunks: meta.chunks };
    meta.capacity = capacity;
    meta.chunks = next.blocks.slice();
    try {
      host.saveCatalog();
    } catch (err) {
      meta.capacity = before.capacity;
      meta.chunks = before.chunks;
      next.free(pile);
      if (err instanceof PileError && err.code === 'PILE_OUT_OF_SPACE') return false;
      throw err;
    }
    this.idx = next;
    old.free(pile);
    const h = this.header;
    h[H_COUNT] = count;
    h[H_TOMBS] = 0;
    h[H_EXPIRING] = expiring;
    // Speculative only: an entry with no free slot within its probe window in the new index.
    h[S_COLLISIONS]! += dropped.length;
    for (const p of dropped) pile.delete(p as PilePointer);
    return true;
  }
}

/**
 * The stored key's byte length of the entry `mem` located, checked against the entry's record:
 * a damaged length word must not make a read return a neighbour's bytes.
 * @throws PILE_CORRUPT
 */
function keyLength(mem: PileMemory): number {
  const klen = mem.view.getUint32(mem.off + E_KEY_LEN, true);
  if (klen > mem.len - E_KEY) throw damagedEntry(mem, `key length ${klen}`);
  return klen;
}

/** Where the value of the located entry starts, relative to the entry (key length checked). @throws PILE_CORRUPT */
function valueOffset(mem: PileMemory): number {
  return E_KEY + align8(keyLength(mem));
}

/** The value's byte length of the located entry, checked against the entry's record. @throws PILE_CORRUPT */
function valueLength(mem: PileMemory, voff: number): number {
  const vlen = mem.view.getUint32(mem.off + E_VALUE_LEN, true);
  if (vlen > mem.len - voff) throw damagedEntry(mem, `value length ${vlen}`);
  return vlen;
}

function damagedEntry(mem: PileMemory, what: string): PileError {
  return new PileError('PILE_CORRUPT', `cache entry at segment offset ${mem.off}: ${what} exceeds the entry's ${mem.len} bytes`);
}
