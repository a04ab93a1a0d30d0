import { EventEmitter } from 'node:events';
import type { CacheTable, PileCache, TableOptions } from '@pile/cache';
import { PileError } from '@pile/core';
import type { CacheLease } from './CacheRegistry';
import { leaseCache } from './CacheRegistry';
import { invalidKeyvOption, resolveKeyvPileOptions, type KeyvPileOptions, type ResolvedKeyvPileOptions } from './KeyvPileOptions';

/** What a KeyvPile shows Keyv as `store.opts`: its resolved options, a dialect and a url. */
export interface KeyvPileStoreOptions extends ResolvedKeyvPileOptions {
  /** `'pile'`. Keyv 5 attaches `keyv.iterator` only to the dialects it lists: see {@link attachIterator}. */
  dialect: 'pile';
  /** `pile://` and the directory. */
  url: string;
  /** Anything Keyv or a caller keeps here (Keyv's test suite sets `deserialize`); the store does not read it. */
  [other: string]: unknown;
}

/** One entry of {@link KeyvPile.setMany}, as Keyv hands it (its key already prefixed with the namespace). */
export interface KeyvPileEntry {
  key: string;
  value: unknown;
  /** Time to live in milliseconds; undefined or 0: no expiry. */
  ttl?: number | undefined;
}

function checkKey(key: unknown): string {
  if (typeof key !== 'string') throw invalidKeyvOption('key', `expected a string (Keyv's keys are strings), got ${typeof key}`);
  return key;
}

/**
 * A Keyv storage adapter over one `@pile/cache` table: `new Keyv({ store: new KeyvPile({ dir }) })`.
 * Keys, values and expiry times live in the pile's mapped files, off the V8 heap, and are there
 * again when a process opens the directory after a restart; expiry is the table's own (an expired
 * entry is never returned and is freed by the cache's sweep). Keyv's namespace prefixes the keys
 * (`namespace:key`); {@link KeyvPile.clear} and {@link KeyvPile.iterator} keep to the namespace. The
 * KeyvPiles of one directory in a process share its cache; see docs/keyv.md for several processes.
 *
 * Events: `'error'` with an error no returned promise carries (a shared turn that failed to close),
 * and with the error of a failed `get` before its promise rejects (Keyv discards a store's get
 * rejection unless `throwOnErrors`).
 */
export class KeyvPile extends EventEmitter {
  /** The options, as Keyv reads them (`dialect`, `url`), and the store's own, checked. */
  readonly opts: KeyvPileStoreOptions;
  /** Keyv's namespace, set by Keyv on the store: keys start with `namespace:`; undefined: none. */
  namespace?: string | undefined;
  private readonly lease: CacheLease;
  private readonly tableOptions: TableOptions<unknown>;
  private tableCache: PileCache | undefined;
  private tableOf: CacheTable<unknown> | undefined;
  private disconnected = false;

  /**
   * Checks the options and opens the directory's cache (with `shared: true`, at the first operation).
   * @throws PILE_INVALID_OPTION naming the option: an unknown key, a missing dir, a wrong type or
   *   range (the pile's and cache's checks of segmentSize, maxMemory, sweepIntervalSec and the
   *   capacities too), or open options that differ from another KeyvPile of the directory in this process
   * @throws PILE_LOCKED when another process holds the directory's cache (give every KeyvPile of it `shared: true`)
   * @throws PILE_CORRUPT, PILE_FORMAT_VERSION, PILE_IO when the pile in `dir` is damaged, newer, or refused by the system
   * @throws PILE_SCHEMA_MISMATCH when the table exists as a typed table (made by other code)
   */
  constructor(options: KeyvPileOptions) {
    super();
    const o = resolveKeyvPileOptions(options);
    this.opts = { ...o, dialect: 'pile', url: `pile://${o.dir}` };
    const t: TableOptions<unknown> = { collisionMode: 'durable' };
    if (o.initialCapacity !== undefined) t.initialCapacity = o.initialCapacity;
    if (o.maxCapacity !== undefined) t.maxCapacity = o.maxCapacity;
    this.tableOptions = t;
    this.lease = leaseCache(o, (err) => this.emitError(err));
    const held = this.lease.access.held;
    if (held !== undefined) {
      try {
        this.table(held); // a table that can not be opened fails here, not at the first call
      } catch (err) {
        this.lease.release();
        throw err;
      }
    }
  }

  /**
   * The stored value of `key` (a Keyv-prefixed key), undefined when absent or expired.
   * @throws PILE_INVALID_OPTION for a key that is not a string
   * @throws PILE_CLOSED after {@link KeyvPile.disconnect}; PILE_LOCKED when a shared turn is not had in time
   * @throws PILE_CORRUPT when the entry is damaged
   */
  async get<Value>(key: string): Promise<Value | undefined> {
    try {
      checkKey(key);
      return (await this.run((t) => t.get(key))) as Value | undefined;
    } catch (err) {
      this.emitError(err);
      throw err;
    }
  }

  /**
   * The stored values of `keys`, in order, undefined for each absent or expired one.
   * @throws PILE_INVALID_OPTION, PILE_CLOSED, PILE_LOCKED, PILE_CORRUPT as {@link KeyvPile.get}
   */
  async getMany<Value>(keys: string[]): Promise<Array<Value | undefined>> {
    this.checkKeys(keys);
    return this.run((t) => keys.map((k) => t.get(k) as Value | undefined));
  }

  /**
   * Stores `value` under `key`, expiring `ttl` ms from now (undefined or 0: never). Resolves true.
   * @throws PILE_INVALID_OPTION for a key that is not a string or a bad ttl
   * @throws PILE_INVALID_VALUE (without `raw`) for a value that is not a string; with `raw`, for a value
   *   the cache's codec would not give back as it was (a lone surrogate, a function, a Map), naming the path
   * @throws PILE_TOO_LARGE when the value does not fit in one segment (raise segmentSize when the pile is created)
   * @throws PILE_OUT_OF_SPACE when the disk is full, or maxMemory is reached and nothing is left to evict
   * @throws PILE_CLOSED, PILE_LOCKED as {@link KeyvPile.get}
   */
  async set(key: string, value: unknown, ttl?: number): Promise<boolean> {
    const expiresAt = this.checkEntry(key, value, ttl);
    return this.run((t) => this.put(t, key, value, expiresAt));
  }

  /**
   * Stores every entry in one turn; resolves to one boolean per entry (true: stored).
   * @throws as {@link KeyvPile.set}; entries are checked before any is stored
   */
  async setMany(entries: KeyvPileEntry[]): Promise<boolean[]> {
    if (!Array.isArray(entries)) throw invalidKeyvOption('entries', 'expected an array of { key, value, ttl }');
    const expiries = entries.map((e) => this.checkEntry(e.key, e.value, e.ttl));
    return this.run((t) => entries.map((e, i) => this.put(t, e.key, e.value, expiries[i])));
  }

  /**
   * Deletes `key`; resolves true when it was there (and not expired).
   * @throws PILE_INVALID_OPTION, PILE_CLOSED, PILE_LOCKED as {@link KeyvPile.get}
   */
  async delete(key: string): Promise<boolean> {
    checkKey(key);
    return this.run((t) => t.delete(key));
  }

  /**
   * Deletes every key of `keys`; resolves true when at least one was there (as @keyv/sqlite and @keyv/redis do).
   * @throws PILE_INVALID_OPTION, PILE_CLOSED, PILE_LOCKED as {@link KeyvPile.get}
   */
  async deleteMany(keys: string[]): Promise<boolean> {
    this.checkKeys(keys);
    return this.run((t) => {
      let any = false;
      for (const k of keys) if (t.delete(k)) any = true;
      return any;
    });
  }

  /**
   * Whether `key` is there and not expired.
   * @throws PILE_INVALID_OPTION, PILE_CLOSED, PILE_LOCKED as {@link KeyvPile.get}
   */
  async has(key: string): Promise<boolean> {
    checkKey(key);
    return this.run((t) => t.has(key));
  }

  /**
   * {@link KeyvPile.has} for each of `keys`, in order.
   * @throws PILE_INVALID_OPTION, PILE_CLOSED, PILE_LOCKED as {@link KeyvPile.get}
   */
  async hasMany(keys: string[]): Promise<boolean[]> {
    this.checkKeys(keys);
    return this.run((t) => keys.map((k) => t.has(k)));
  }

  /**
   * Deletes the entries of the store's namespace (keys starting with `namespace:`), or, without a
   * namespace, every entry of the table. Other tables of the directory are left alone. O(entries of
   * the table): it walks the table once.
   * @throws PILE_CLOSED, PILE_LOCKED as {@link KeyvPile.get}
   */
  async clear(): Promise<void> {
    const prefix = this.namespace === undefined || this.namespace === '' ? undefined : `${this.namespace}:`;
    await this.run((t) => {
      for (const k of t.keys()) {
        if (typeof k === 'string' && (prefix === undefined || k.startsWith(prefix))) t.delete(k);
      }
    });
  }

  /**
   * The entries whose key starts with `namespace:` (every entry without one), as `[key, stored value]`
   * with the key as stored (prefixed); expired entries are skipped. Each entry present for the whole
   * iteration is yielded once; one set or deleted meanwhile may or may not be. With `shared: true` the
   * matching entries are read in one turn first, then yielded. Keyv 5 wires `keyv.iterator()` to this
   * only for the adapters it names: call {@link attachIterator} on the Keyv.
   * @throws PILE_CLOSED, PILE_LOCKED, PILE_CORRUPT as {@link KeyvPile.get}
   */
  async *iterator<Value>(namespace?: string): AsyncGenerator<[string, Value], void> {
    const prefix = namespace === undefined || namespace === '' ? undefined : `${namespace}:`;
    const wanted = (k: unknown): k is string => typeof k === 'string' && (prefix === undefined || k.startsWith(prefix));
    if (this.opts.shared) {
      const all = await this.run((t) => {
        const out: [string, Value][] = [];
        for (const [k, v] of t.entries()) if (wanted(k)) out.push([k, v as Value]);
        return out;
      });
      yield* all;
      return;
    }
    const entries = await this.run((t) => t.entries());
    for (const [k, v] of entries) {
      if (this.disconnected) throw new PileError('PILE_CLOSED', 'the KeyvPile store is disconnected');
      if (wanted(k)) yield [k, v as Value];
    }
  }

  /**
   * msync the pile: what was stored before survives power loss (a process crash loses nothing without it).
   * @throws PILE_CLOSED, PILE_LOCKED as {@link KeyvPile.get}; PILE_IO when the system refuses the sync
   */
  async flush(): Promise<void> {
    await this.lease.access.run((cache) => cache.flush());
  }

  /**
   * Lets go of the directory's cache: the last KeyvPile of it in this process closes the cache
   * cleanly (the next open needs no recovery). Later calls of the store reject with PILE_CLOSED. Idempotent.
   * @throws PILE_IO when the system refuses the final sync of a segment
   */
  async disconnect(): Promise<void> {
    if (this.disconnected) return;
    this.disconnected = true;
    this.tableOf = undefined;
    this.tableCache = undefined;
    this.lease.release();
  }

  // ------------------------------------------------------------------------ internals

  private run<T>(fn: (table: CacheTable<unknown>) => T): Promise<T> {
    if (this.disconnected) return Promise.reject(new PileError('PILE_CLOSED', 'the KeyvPile store is disconnected'));
    return this.lease.access.run((cache) => fn(this.table(cache)));
  }

  /** The table in `cache` (this turn's cache, with `shared`), opened once per cache object. */
  private table(cache: PileCache): CacheTable<unknown> {
    if (this.tableCache !== cache || this.tableOf === undefined) {
      this.tableOf = cache.table(this.opts.table, this.tableOptions);
      this.tableCache = cache;
    }
    return this.tableOf;
  }

  private put(t: CacheTable<unknown>, key: string, value: unknown, expiresAt: number | undefined): boolean {
    const r = expiresAt === undefined ? t.put(key, value) : t.put(key, value, { expiresAt });
    return r !== 'collision';
  }

  /** Checks one entry before anything is stored; its expiry time (ms since the epoch), undefined for none. */
  private checkEntry(key: unknown, value: unknown, ttl: unknown): number | undefined {
    checkKey(key);
    if (!this.opts.raw && typeof value !== 'string') {
      throw new PileError(
        'PILE_INVALID_VALUE',
        `value: KeyvPile stores the strings Keyv serializes, got ${value === null ? 'null' : typeof value}; to store values without Keyv's JSON step give KeyvPile raw: true and Keyv serialize: undefined, deserialize: undefined (docs/keyv.md)`,
      );
    }
    if (ttl === undefined || ttl === 0) return undefined;
    if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl < 0) {
      throw invalidKeyvOption('ttl', `expected a time to live in milliseconds (a finite number >= 0), got ${String(ttl)}`);
    }
    return Date.now() + ttl;
  }

  private checkKeys(keys: unknown): void {
    if (!Array.isArray(keys)) throw invalidKeyvOption('keys', 'expected an array of strings');
    for (const k of keys) checkKey(k);
  }

  private emitError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}
