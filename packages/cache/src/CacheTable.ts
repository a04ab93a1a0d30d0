import { PileError, clearDeadMark, inReadSession, type CompiledSchema, type PilePointer } from '@pile/core';
import { beginChange, endChange } from './CoreBindings';
import type { CacheHost } from './CacheHost';
import {
  E_CREATED,
  E_SEQ,
  E_KEY,
  E_VALUE_KIND,
  H_COUNT,
  H_EXPIRING,
  H_SEQ,
  H_TOMBS,
  HEADER_WORDS,
  S_COLLISIONS,
  S_EVICTED,
  S_EXPIRED,
  S_HITS,
  S_INSERTS,
  S_MISSES,
  S_OVERWRITES,
  S_REMOVES,
  S_REPLACES,
  TAG_ENTRY,
  addStats,
  align8,
  entryTooLarge,
  tagOf,
  valueLength,
  valueOffset,
  writeEntryHead,
  zeroStats,
} from './EntryFormat';
import { EVICTION_SAMPLES, EvictionPool } from './Eviction';
import type { CacheKey } from './KeyCodec';
import { SLOT_BYTES, SlotIndex, TOMBSTONE } from './SlotIndex';
import { freeTableBlocks, tableBytes } from './TableBlocks';
import { liveCount, rejuvenate, sweepTable, type RenewedTable } from './TableExpiry';
import { checkOptionKeys, expiresAtOption, invalidOption, maxAgeOption, priorityOption } from './TableOptions';
import { SPECULATIVE_PROBES, growForCollision, makeRoomForInsert, probeLimit, shrinkIfSparse } from './TableResize';
import type { TableMeta } from './TableState';
import type { GetOptions, PutOptions, PutResult, TableHook, TableStats } from './TableTypes';
import { walkTable, type WalkedTable } from './TableIteration';
import { readChecked, UNKNOWN_VERSION, type CheckedTable } from './CheckedRead';
import { checkedBytes, checkedCapacity, checkedCount, checkedLoadFactor, checkedStats, liveHeader } from './CheckedHeader';
import { walkChecked } from './CheckedWalk';
import { detachedSeqWords, seqWordsOf } from './TableSeqlock';
import { ValueCodec } from './ValueCodec';

// What a put does, in the low two bits of decide()'s result (slot * 4 + outcome; -1: collision).
const OUTCOME_INSERT = 1;
const OUTCOME_REPLACE = 2;
const OUTCOME_OVERWRITE = 3;
const COLLISION = -1;

function closedTable(name: string): PileError {
  return new PileError('PILE_CLOSED', `cache table '${name}' was dropped`);
}

/**
 * A named table of a {@link PileCache}: keys, values, expiry and priority all live in the pile.
 * Obtained from {@link PileCache.table}; valid until the cache is closed or the table dropped.
 * Its hot paths (put, get, the probing of SlotIndex) stay in this one class; the cold code is
 * functions of its state (TableState): resizing (TableResize), eviction choice (Eviction), expiry
 * sweeps, count and rejuvenate (TableExpiry), its blocks (TableBlocks) and recovery (CacheRecovery).
 */
export class CacheTable<V = unknown> implements RenewedTable, WalkedTable<V>, CheckedTable {
  /** @internal */ idx: SlotIndex;
  /** @internal */ header: Float64Array;
  /** @internal */ seqWords: Uint32Array;
  /**
   * @internal True when another process may change the table while this one reads it: a read-only
   * pile (CheckedRead). A writable open is the one writer of its pile: its reads never meet a change.
   */
  readonly checked: boolean;
  /** @internal The table version (TableSeqlock) `idx` was read at: checked reads only. */
  idxVersion = UNKNOWN_VERSION;
  /** @internal */ values: ValueCodec<V>;
  /** @internal */ readonly entryTag: number;
  /** @internal */ readonly speculative: boolean;
  /** @internal */ stores = 0;
  /** @internal */ growRetryAt = 0;
  /** @internal Dropped: by this cache, or found dropped by the pile's writer (a read-only cache). */ dropped = false;
  private readonly eviction = new EvictionPool();
  /** @internal No live entry expires before this time (ms): until then `count` needs no sweep (TableState). */
  expiryKnownUntil = 0;
  /** @internal */ hook: TableHook | undefined = undefined;

  /** @internal */
  constructor(
    /** @internal */ readonly host: CacheHost,
    /** @internal */ readonly meta: TableMeta,
    header: Float64Array,
    codec: CompiledSchema<V> | undefined,
  ) {
    this.header = header;
    this.values = new ValueCodec<V>(codec);
    this.entryTag = tagOf(TAG_ENTRY, meta.id);
    this.speculative = meta.options.collisionMode === 'speculative';
    this.idx = SlotIndex.open(host.pile, meta.capacity, meta.chunkSlots, meta.chunks as PilePointer[]);
    this.seqWords = seqWordsOf(host.pile, meta.header, meta.name);
    this.checked = host.readonly;
    // A reader's heap copy of the header keeps this process's own hits and misses (checkedStats).
    if (this.checked) header[S_HITS] = header[S_MISSES] = 0;
    // A writer that died in the middle of a change of the index left the seqlock odd: its repair is
    // recovery's, and readers must stop waiting.
    if (!host.readonly) clearDeadMark(this.seqWords);
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
    return this.checked ? checkedCount(this) : liveCount(this);
  }

  /** Slots of the index. @throws PILE_CLOSED */
  get capacity(): number {
    this.check();
    return this.checked ? checkedCapacity(this) : this.idx.capacity;
  }

  /** count / capacity. @throws PILE_CLOSED */
  get loadFactor(): number {
    this.check();
    if (this.checked) return checkedLoadFactor(this);
    return this.header[H_COUNT]! / this.idx.capacity;
  }

  /** A snapshot of the table's counters (persisted across restarts). @throws PILE_CLOSED */
  get stats(): TableStats {
    this.check();
    if (this.checked) return checkedStats(this, this.header);
    const s = zeroStats();
    addStats(s, this.header);
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
    return (this.checked ? liveHeader(this) : this.header)[H_SEQ]!;
  }

  /**
   * Stores `value` under `key`.
   * @returns 'inserted' (new key), 'replaced' (key existed), 'overwritten' (speculative: took the
   *   slot of a lower- or equal-priority entry of another key), 'collision' (speculative: nothing stored)
   * @throws PILE_INVALID_OPTION for a bad key or option, or an option put does not know, naming it
   * @throws PILE_SCHEMA_VIOLATION, PILE_INVALID_VALUE when the value does not match the table's schema, or a part of it (named by its path) would not read back as it was; nothing is written
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
      checkOptionKeys(opts, 'put', 'maxAgeSec', 'expiresAt', 'priority');
      if (opts.priority !== undefined) priority = priorityOption(opts.priority);
      if (opts.maxAgeSec !== undefined && opts.expiresAt !== undefined)
        throw invalidOption('expiresAt', 'give maxAgeSec or expiresAt, not both');
      if (opts.maxAgeSec !== undefined) maxAgeSec = maxAgeOption(opts.maxAgeSec, true);
      if (opts.expiresAt !== undefined) expiresAt = expiresAtOption(opts.expiresAt);
    }
    // Before the write, and before the key is prepared (the hook may use other tables).
    if (this.hook !== undefined) this.hook.changed('put', key);
    const host = this.host;
    // The value before the key: measuring it runs the caller's code, which may read this cache and
    // so replace the prepared key and the lookup state.
    const vroom = this.values.measure(value);
    // Checked before anything is sized from them: an entry must fit in one segment, and past
    // 2^31 the 32-bit align8 of a key length wraps. (A typed value's room is exact past 4 KiB.)
    const room = host.pile.segmentSize;
    if (vroom > room || (key instanceof Uint8Array && key.length > room)) throw entryTooLarge(key, vroom, room);
    const now = host.clock();
    if (expiresAt < 0) expiresAt = maxAgeSec > 0 ? now + maxAgeSec * 1000 : 0;
    const kc = host.keys;
    kc.prepare(key);
    const epoch = kc.epoch;
    const len = this.encode(vroom, now, expiresAt, priority);
    // A typed value is read again while it is written: a get from its getters prepared another key.
    if (kc.epoch !== epoch) kc.prepare(key);
    return this.storeEncoded(len, priority, expiresAt, true);
  }

  /**
   * The value under `key`, or undefined when absent or expired.
   * @throws PILE_INVALID_OPTION for a bad key or maxAgeSec, or an option get does not know
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT when the stored value can not be decoded
   * @throws PILE_CLOSED
   */
  get(key: CacheKey, opts?: GetOptions): V | undefined {
    this.check();
    let maxAge = -1;
    if (opts !== undefined) {
      checkOptionKeys(opts, 'get', 'maxAgeSec', '', '');
      if (opts.maxAgeSec !== undefined) maxAge = maxAgeOption(opts.maxAgeSec, false);
    }
    const host = this.host;
    host.keys.prepare(key);
    if (this.checked) return this.countRead(readChecked(this, maxAge, true)) as V | undefined;
    const hook = this.hook;
    const i = hook === undefined || hook.serving ? this.find() : -1;
    const h = this.header;
    if (i < 0 || (hook !== undefined && hook.epoch > 0 && this.belowEpoch(hook))) {
      h[S_MISSES]!++;
      return undefined;
    }
    const exp = this.idx.expiry(i);
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
    if (this.checked) return readChecked(this, -1, false) !== undefined;
    const hook = this.hook;
    if (hook !== undefined && !hook.serving) return false;
    const i = this.find();
    if (i < 0 || (hook !== undefined && hook.epoch > 0 && this.belowEpoch(hook))) return false;
    const exp = this.idx.expiry(i);
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
    this.host.keys.prepare(key);
    const i = this.find();
    if (i < 0) return false;
    const exp = this.idx.expiry(i);
    const live = exp === 0 || exp > this.host.clock();
    if (live) {
      this.removeSlot(i);
      this.header[S_REMOVES]!++;
    } else this.expireSlot(i);
    shrinkIfSparse(this);
    return live;
  }

  /**
   * @deprecated Use {@link delete}, the name every Pile package and `Map` use; `remove` stays as its alias.
   * @throws as {@link delete}
   */
  remove(key: CacheKey): boolean {
    return this.delete(key);
  }

  /**
   * Resets the age of `key` to zero: its age base becomes now and, when it expires, it expires
   * after the same time to live it was given. False when absent or expired.
   * @throws PILE_INVALID_OPTION for a bad key, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  rejuvenate(key: CacheKey): boolean {
    this.writable();
    return rejuvenate(this, key);
  }

  /**
   * Keys of live (not expired) entries, in the order of their hashes: an order that does not
   * depend on the slots, so an iteration goes on where it was whatever happens between two steps.
   * Every entry present for the whole iteration is seen exactly once, also when the table grows,
   * shrinks or shifts entries meanwhile (puts and deletes during the iteration, of the key just
   * yielded or any other); an entry put or deleted during the iteration may or may not be seen.
   * An iteration holds a read session of the pile (the core's inReadSession) from its first step to
   * its end or its close (break): one left unfinished and never closed holds it until the pile closes. While a `@pile/sync` hook says
   * the table does not serve (see {@link TableHook}), an iteration yields nothing more, and it
   * skips entries below the hook's epoch, as get answers a miss for them.
   * @throws PILE_CLOSED (also when the cache is closed mid-iteration)
   */
  *keys(): IterableIterator<CacheKey> {
    for (const e of inReadSession(this.host.pile, (this.checked ? walkChecked : walkTable)(this, false))) yield e[0];
  }

  /**
   * [key, value] pairs of live entries; same iteration rules as {@link keys}.
   * @throws PILE_SCHEMA_MISMATCH, PILE_CORRUPT when a value can not be decoded; PILE_CLOSED
   */
  *entries(): IterableIterator<[CacheKey, V]> {
    for (const e of inReadSession(this.host.pile, (this.checked ? walkChecked : walkTable)(this, true))) yield e as [CacheKey, V];
  }

  /**
   * {@link entries}, each entry's record checked against its checksum as well (what `verifyOnRead`
   * does, for a pile opened without it: `pile export` copies data out this way). Without
   * `onDamaged` a damaged entry throws PILE_CORRUPT naming file, segment and offset; with it the
   * entry goes to `onDamaged` (with its key when that still decodes) and the iteration goes on.
   * @throws PILE_CORRUPT, PILE_SCHEMA_MISMATCH (without onDamaged); PILE_CLOSED
   */
  *checkedEntries(onDamaged?: (key: CacheKey | undefined, err: PileError) => void): IterableIterator<[CacheKey, V]> {
    for (const e of inReadSession(this.host.pile, (this.checked ? walkChecked : walkTable)(this, true, onDamaged ?? null)))
      yield e as [CacheKey, V];
  }

  // ----------------------------------------------------------------- internals (used by PileCache)

  /** @internal Frees every live entry whose expiry has passed; returns how many (a method: a test counts the sweeps). */
  sweepExpired(now: number, shrink: boolean): number {
    return sweepTable(this, now, shrink);
  }

  /**
   * @internal Memory pressure: evicts the entry {@link EvictionPool} picks (lowest priority, then
   * oldest, of a sample). Returns false when the table is empty.
   */
  evictOne(samples: number): boolean {
    if (this.header[H_COUNT] === 0) return false;
    this.removeSlot(this.eviction.pick(this.idx, this.host.mem, samples));
    this.header[S_EVICTED]!++;
    return true;
  }

  /** @internal Pile bytes of the table: index, header and the payload of each entry record. O(capacity). */
  bytes(): number {
    this.check();
    return this.checked ? checkedBytes(this, SLOT_BYTES) : tableBytes(this);
  }

  /** @internal Frees the index, the header and every entry (dropTable); the table is unusable after. */
  destroy(): void {
    freeTableBlocks(this);
    this.markDropped();
  }

  /** @internal */
  markDropped(): void {
    this.dropped = true;
    // Let go of the pile's memory: the core unmaps a segment only once nothing references it.
    this.header = new Float64Array(HEADER_WORDS);
    this.seqWords = detachedSeqWords();
    this.idx = undefined as unknown as SlotIndex;
  }

  /** @internal Sets the schema codec of a table opened before its schema was known. */
  attachCodec(codec: CompiledSchema<V> | undefined): void {
    this.values = new ValueCodec<V>(codec);
  }

  /** @internal After a hit of find(): the entry (host.mem) was stored before the hook's epoch. */
  belowEpoch(hook: TableHook): boolean {
    const mem = this.host.mem;
    return mem.view.getFloat64(mem.off + E_SEQ, true) < hook.epoch;
  }

  /** A checked read's result, counted as a hit or a miss in this process's counters. */
  private countRead(value: unknown): unknown {
    this.header[value === undefined ? S_MISSES : S_HITS]!++;
    return value;
  }

  /** @internal @throws PILE_CLOSED when the cache is closed or the table dropped */
  check(): void {
    this.host.check();
    if (this.dropped) throw closedTable(this.meta.name);
  }

  private writable(): void {
    this.host.writable();
    if (this.dropped) throw closedTable(this.meta.name);
  }

  /** @internal The slot holding the prepared key, or -1; on a hit, host.mem is left on the entry's record. */
  find(): number {
    const idx = this.idx;
    const cap = idx.capacity;
    // probeLimit() written out: this runs on every get and put (npx -y pnpm@12.4.2 bench cache).
    return idx.find(
      this.host.keys,
      this.host.mem,
      this.entryTag,
      this.speculative ? Math.min(SPECULATIVE_PROBES, cap) : cap,
      this.meta.name,
      false,
    );
  }

  /** Writes the entry for the prepared key into scratch, the value in `vroom` bytes; returns its length. */
  private encode(vroom: number, now: number, expiresAt: number, priority: number): number {
    const host = this.host;
    const kc = host.keys;
    const klen = kc.storedLength();
    const voff = E_KEY + align8(klen);
    const { buf, view } = host.scratch(voff + vroom);
    // The head follows the value (its length is known once written); the key's fields are read
    // first, as the value's getters may prepare another key.
    const seq = this.header[H_SEQ]!++;
    const { hash, type } = kc;
    const kind = this.values.kind;
    const kend = kc.write(buf, E_KEY);
    for (let p = kend; p < voff; p++) buf[p] = 0;
    const vlen = this.values.write(buf, view, voff, vroom);
    writeEntryHead(buf, view, seq, now, expiresAt, priority, hash, type, kind, klen, vlen);
    return voff + vlen;
  }

  /** @internal Stores the entry in scratch[0..len) for the prepared key and publishes it in the index. */
  storeEncoded(len: number, priority: number, expiresAt: number, count: boolean): PutResult {
    const host = this.host;
    this.stores++;
    const h = this.header;
    if (h[H_COUNT]! + h[H_TOMBS]! + 1 > this.idx.capacity * this.meta.options.loadFactorHigh) makeRoomForInsert(this);
    let d = this.decide(priority);
    // A full probe window: grow rather than drop, when the table may.
    if ((d < 0 || d % 4 === OUTCOME_OVERWRITE) && growForCollision(this)) d = this.decide(priority);
    if (d < 0) {
      h[S_COLLISIONS]!++;
      return 'collision';
    }
    const epoch = host.evictions;
    const idxBefore = this.idx;
    const ptr = host.store(host.scratch(len).buf.subarray(0, len), this.entryTag);
    if (host.evictions !== epoch || this.idx !== idxBefore) {
      // Making room moved or removed entries: probe again.
      d = this.decide(priority);
      if (d < 0) {
        host.pile.delete(ptr);
        h[S_COLLISIONS]!++;
        return 'collision';
      }
    }
    const outcome = d % 4;
    const slot = (d - outcome) / 4;
    const idx = this.idx;
    const old = idx.ptr(slot);
    const oldExp = idx.expiry(slot);
    idx.set(slot, ptr, expiresAt, host.keys.hash, priority);
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
    if (outcome === OUTCOME_INSERT) {
      if (count) h[S_INSERTS]!++;
      return 'inserted';
    }
    if (outcome === OUTCOME_REPLACE) {
      if (count) h[S_REPLACES]!++;
      return 'replaced';
    }
    h[S_OVERWRITES]!++;
    return 'overwritten';
  }

  /**
   * Where the prepared key goes, as `slot * 4 + outcome`: its own slot (replace), a free slot
   * (insert), a victim's slot (speculative overwrite); or {@link COLLISION} (-1), nowhere.
   * An encoded number rather than fields set on the side: nothing depends on call order.
   */
  private decide(priority: number): number {
    const found = this.find();
    if (found >= 0) return found * 4 + OUTCOME_REPLACE;
    const idx = this.idx;
    const cap = idx.capacity;
    const limit = probeLimit(this, cap);
    const hash = this.host.keys.hash;
    const free = idx.findFree(hash, limit);
    if (free >= 0) return free * 4 + OUTCOME_INSERT;
    if (!this.speculative) {
      // Full because the pile had no room to grow the index: memory pressure, so evict one of ours.
      if (cap < this.meta.options.maxCapacity && this.evictOne(EVICTION_SAMPLES)) return this.decide(priority);
      throw new PileError(
        'PILE_OUT_OF_SPACE',
        `durable cache table '${this.meta.name}' is full (${cap} slots, maxCapacity ${this.meta.options.maxCapacity})`,
      );
    }
    // Every probed slot is taken: an expired entry is free for the taking, else the lowest priority not above ours.
    const now = this.host.clock();
    let best = -1;
    let bestPrio = 0;
    let i = idx.home(hash);
    for (let n = 0; n < limit; n++) {
      const e = idx.expiry(i);
      if (e !== 0 && e <= now) {
        // Refilled at once: a backward shift here could move another entry into slot i.
        this.vacateSlot(i);
        this.header[S_EXPIRED]!++;
        return i * 4 + OUTCOME_INSERT;
      }
      const p = idx.priority(i);
      if (p <= priority && (best < 0 || p < bestPrio)) {
        best = i;
        bestPrio = p;
      }
      if (++i === cap) i = 0;
    }
    return best < 0 ? COLLISION : best * 4 + OUTCOME_OVERWRITE;
  }

  /**
   * Removes slot i's entry by the index's backward shift (no tombstone), then frees the record:
   * a crash in between leaves an orphan that recovery frees.
   */
  private removeSlot(i: number): void {
    const idx = this.idx;
    const p = idx.ptr(i);
    const h = this.header;
    h[H_COUNT]!--;
    if (idx.expiry(i) !== 0) h[H_EXPIRING]!--;
    // Entries move back one by one: a reader in another process could miss one that moves past
    // it, so the table's seqlock is odd meanwhile (TableSeqlock). The record is freed after.
    const w = this.seqWords;
    const began = beginChange(w);
    idx.shiftOut(i);
    endChange(w, began);
    this.host.pile.delete(p as PilePointer);
  }

  /** Removes slot i's entry leaving a tombstone, for a slot the caller refills at once. */
  private vacateSlot(i: number): void {
    const idx = this.idx;
    const p = idx.ptr(i);
    idx.setPtr(i, TOMBSTONE);
    const h = this.header;
    h[H_COUNT]!--;
    h[H_TOMBS]!++;
    if (idx.expiry(i) !== 0) h[H_EXPIRING]!--;
    this.host.pile.delete(p as PilePointer);
  }

  /** @internal */
  expireSlot(i: number): void {
    if (this.host.readonly) return;
    this.removeSlot(i);
    this.header[S_EXPIRED]!++;
  }
}
