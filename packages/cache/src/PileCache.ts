import {
  Pile,
  PileError,
  compileSchema,
  isPileError,
  encodeGuard,
  openPile,
  reentrantError,
  type CompiledSchema,
  type PileOptions,
  type PilePointer,
} from '@pile/core';
import type { CacheHost } from './CacheHost';
import { CacheTable } from './CacheTable';
import { recoverCache } from './CacheRecovery';
import { EVICTION_SAMPLES } from './Eviction';
import {
  H_COUNT,
  H_STATS,
  H_VERSION,
  HEADER_VERSION,
  HEADER_WORDS,
  MAX_TABLE_ID,
  STAT_NAMES,
  TAG_CHUNK,
  TAG_HEADER,
  tagOf,
} from './EntryFormat';
import { KeyCodec } from './KeyCodec';
import { PileMemory } from './PileMemory';
import { SlotIndex, chunkSlotsFor } from './SlotIndex';
import { type CollisionMode, type ResolvedTableOptions, type TableOptions, invalidOption, resolveTableOptions } from './TableOptions';
import type { TableMeta } from './TableState';
import type { TableHook, TableStats } from './TableTypes';

/** Options the cache adds to those of the pile it opens or is given. */
export interface CacheBehaviourOptions {
  /**
   * Time source in ms since the epoch for ages and expiry; default Date.now. Tests inject a fake
   * clock; a real deployment should leave it, as expiry times are persisted as absolute times.
   */
  clock?: () => number;
  /** Seconds between automatic sweeps of expired entries (an unref'd timer); 0 = only cache.sweep(). Default 30. */
  sweepIntervalSec?: number;
  /**
   * Called during a long open: the pile's recovery after a crash (when the cache opens the pile)
   * and the cache's own check of its indexes (phase 'cache-index', done / total tables) and of
   * the pile's records (phase 'cache-orphans', done / total records).
   */
  onProgress?: (p: { phase: string; done: number; total: number }) => void;
}

/** {@link openCache} over a pile it opens (and owns): the pile's options plus the cache's. */
export interface CacheOptions extends PileOptions, CacheBehaviourOptions {}

/** {@link openCache} over a pile the caller opened: the cache never closes it. */
export interface CacheOverPileOptions extends CacheBehaviourOptions {
  pile: Pile;
}

/** Counters summed over every table, plus sizes. */
export interface CacheStats extends TableStats {
  /** Number of tables. */
  tables: number;
  /** Entries over all tables. */
  count: number;
  /** Slots over all tables. */
  capacity: number;
}

/** Root naming the cache catalog record in the pile. */
export const CACHE_ROOT = 'pile-cache';

/** Returned by {@link PileCache.tableInfo}. */
export interface TableInfo {
  name: string;
  /** True when the table's values are typed by a schema (open it with `table(name, { schema })`). */
  typed: boolean;
  collisionMode: CollisionMode;
  /** Live entries (expired ones are not counted). */
  count: number;
  /** Slots of the index. */
  capacity: number;
}

const CATALOG_VERSION = 1;
const MAX_NAME_LENGTH = 1024;

/** Piles that have a PileCache open on them: two at once would each think they own the index. */
const inUse = new WeakSet<Pile>();

const CACHE_KEYS = new Set(['clock', 'sweepIntervalSec']);

/** The cache catalog: a JSON text record under {@link CACHE_ROOT}. */
interface Catalog {
  v: number;
  /** True while a PileCache has the pile open: found true at open, the last one did not close. */
  open: boolean;
  nextId: number;
  tables: TableMeta[];
}

/**
 * Opens the cache stored in a pile: `openCache({ dir })` opens (and owns) a mapped pile,
 * `openCache()` an in-memory one, `openCache({ pile })` uses a pile the caller opened and
 * will close. Tables, keys, values and expiry times come back as they were; after an unclean
 * shutdown the indexes are checked and orphaned entries freed first (see docs/cache.md).
 * @throws PILE_INVALID_OPTION for a bad option, naming it
 * @throws PILE_LOCKED when another PileCache is open on the same pile (or another process holds `dir`)
 * @throws PILE_CORRUPT when the cache catalog or an index block is damaged
 * @throws PILE_FORMAT_VERSION when the cache was written by a newer format
 * @throws whatever openPile throws for `dir`
 */
export function openCache(options: CacheOptions | CacheOverPileOptions = {}): PileCache {
  return new PileCache(options);
}

/**
 * Named tables of keyed entries stored in one pile, off the V8 heap and warm after a restart.
 * See {@link openCache}.
 */
export class PileCache implements CacheHost {
  /** @internal */ readonly pile: Pile;
  /** @internal */ readonly mem: PileMemory;
  /** @internal */ readonly keys = new KeyCodec();
  /** @internal */ readonly clock: () => number;
  /** True when the pile is read-only: reads work, writes throw PILE_READONLY, nothing is swept. */
  readonly readonly: boolean;
  /**
   * True when this open found the last session unfinished (a crash, or the pile closed without
   * the cache) and checked the indexes and freed orphaned entries; false after a clean close.
   */
  readonly recovered: boolean = false;
  /** @internal */ evictions = 0;
  /** The last error the automatic sweep met (it never throws into the timer). */
  lastSweepError: unknown;
  private closed = false;
  private readonly ownsPile: boolean;
  private timer: NodeJS.Timeout | undefined;
  private catalogPtr: PilePointer | undefined;
  private catalog: Catalog;
  private readonly byName = new Map<string, CacheTable<unknown>>();
  private readonly onProgress: CacheBehaviourOptions['onProgress'];
  private readonly scratchRef: { buf: Buffer; view: DataView };
  private hookFactory: ((table: CacheTable<unknown>) => TableHook | undefined) | undefined;

  /** Use {@link openCache}. */
  constructor(options: CacheOptions | CacheOverPileOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidOption('options', 'expected an object');
    const { clock = Date.now, sweepIntervalSec = 30 } = options;
    if (typeof clock !== 'function') throw invalidOption('clock', 'expected a function returning ms since the epoch');
    if (
      typeof sweepIntervalSec !== 'number' ||
      !Number.isFinite(sweepIntervalSec) ||
      sweepIntervalSec < 0 ||
      sweepIntervalSec > 2 ** 31 / 1000
    ) {
      throw invalidOption('sweepIntervalSec', `expected a number of seconds from 0 to ${2 ** 31 / 1000}, got ${String(sweepIntervalSec)}`);
    }
    if (options.onProgress !== undefined && typeof options.onProgress !== 'function')
      throw invalidOption('onProgress', 'expected a function');
    this.clock = clock;
    this.onProgress = options.onProgress;
    const buf = Buffer.alloc(4096);
    this.scratchRef = { buf, view: new DataView(buf.buffer, buf.byteOffset, buf.length) };
    if ('pile' in options) {
      for (const k of Object.keys(options)) {
        if (k !== 'pile' && k !== 'onProgress' && !CACHE_KEYS.has(k))
          throw invalidOption(
            k,
            "a cache over a given pile takes only pile, clock, sweepIntervalSec and onProgress (the pile's options were given when it was opened)",
          );
      }
      if (!(options.pile instanceof Pile)) throw invalidOption('pile', 'expected a Pile from openPile');
      if (options.pile.isClosed) throw new PileError('PILE_CLOSED', 'option pile: the pile is closed');
      this.pile = options.pile;
      this.ownsPile = false;
    } else {
      const pileOptions: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(options)) if (!CACHE_KEYS.has(k)) pileOptions[k] = v;
      this.pile = openPile(pileOptions as PileOptions);
      this.ownsPile = true;
    }
    if (inUse.has(this.pile)) {
      if (this.ownsPile) this.pile.close();
      throw new PileError(
        'PILE_LOCKED',
        `another PileCache is open on this pile${this.pile.dir === undefined ? '' : ` (${this.pile.dir})`}`,
      );
    }
    this.readonly = this.pile.readonly;
    this.mem = new PileMemory(this.pile);
    try {
      this.catalog = this.loadCatalog();
      const recover = !this.readonly && (this.pile.lastRecovery.ran || this.catalog.open);
      for (const meta of this.catalog.tables) this.byName.set(meta.name, this.openTable(meta, undefined));
      if (recover) {
        recoverCache(this.pile, [...this.byName.values()], this.onProgress);
        this.recovered = true;
      }
      if (!this.readonly) {
        this.catalog.open = true;
        this.saveCatalog();
      }
    } catch (err) {
      this.release();
      throw err;
    }
    inUse.add(this.pile);
    if (sweepIntervalSec > 0 && !this.readonly) {
      this.timer = setInterval(() => this.autoSweep(), sweepIntervalSec * 1000);
      this.timer.unref();
    }
  }

  /**
   * Opens the table `name`, creating it (with `options`) when it does not exist. Reopening a
   * table keeps its data; capacity and expiry options given then replace the stored ones.
   * @throws PILE_INVALID_OPTION for a bad name or option (including a collisionMode other than the table's)
   * @throws PILE_SCHEMA_MISMATCH when the schema differs incompatibly from the table's, or a typed
   *   table is opened without its schema (or an untyped one with a schema)
   * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE when the new table's index does not fit
   * @throws PILE_READONLY when a read-only cache would create or change a table
   * @throws PILE_CLOSED
   */
  table<V = unknown>(name: string, options: TableOptions<V> = {}): CacheTable<V> {
    this.check();
    if (typeof name !== 'string' || name === '' || name.length > MAX_NAME_LENGTH) {
      throw invalidOption('name', `a table name must be a non-empty string of at most ${MAX_NAME_LENGTH} characters`);
    }
    const existing = this.byName.get(name) as CacheTable<V> | undefined;
    if (existing !== undefined) return this.reopenTable(existing, options);
    this.writable();
    const { resolved, initialCapacity } = resolveTableOptions(options as TableOptions<unknown>);
    const id = this.catalog.nextId;
    if (id > MAX_TABLE_ID) throw new PileError('PILE_OUT_OF_SPACE', `a cache holds at most ${MAX_TABLE_ID} tables over its life`);
    const codec = options.schema === undefined ? undefined : this.registerSchema<V>(id, name, options.schema);
    const pile = this.pile;
    const header = pile.allocRaw(HEADER_WORDS * 8, tagOf(TAG_HEADER, id));
    let idx: SlotIndex;
    try {
      idx = SlotIndex.create(pile, initialCapacity, chunkSlotsFor(pile.segmentSize), tagOf(TAG_CHUNK, id));
    } catch (err) {
      pile.delete(header);
      throw err;
    }
    const meta: TableMeta = {
      name,
      id,
      fingerprint: codec?.fingerprint ?? '',
      options: resolved,
      capacity: initialCapacity,
      chunkSlots: idx.chunkSlots,
      chunks: idx.blocks.slice(),
      header,
    };
    const h = this.headerArray(meta);
    h[H_VERSION] = HEADER_VERSION;
    this.catalog.tables.push(meta);
    this.catalog.nextId = id + 1;
    try {
      this.saveCatalog();
    } catch (err) {
      this.catalog.tables.pop();
      this.catalog.nextId = id;
      idx.free(pile);
      pile.delete(header);
      throw err;
    }
    const t = new CacheTable<V>(this, meta, h, codec);
    this.byName.set(name, t as CacheTable<unknown>);
    if (this.hookFactory !== undefined) this.attachHook(t as CacheTable<unknown>);
    return t;
  }

  /**
   * Advanced (used by `@pile/sync`): calls `attach` for every table now and for each table created
   * later, and attaches the {@link TableHook} it returns (undefined: none). The table passed may be
   * one not yet opened with its schema: use it only for `name`, `sequence` and `delete`.
   * `undefined` detaches every hook. Not persisted.
   * @throws PILE_LOCKED when a table already has another hook, PILE_CLOSED
   */
  setHook(attach: ((table: CacheTable<unknown>) => TableHook | undefined) | undefined): void {
    this.check();
    this.hookFactory = attach;
    for (const t of this.byName.values()) {
      if (attach === undefined) t.setHook(undefined);
      else this.attachHook(t);
    }
  }

  private attachHook(t: CacheTable<unknown>): void {
    const hook = this.hookFactory!(t);
    if (hook !== undefined) t.setHook(hook);
  }

  /** Names of the tables. @throws PILE_CLOSED */
  tables(): string[] {
    this.check();
    return [...this.byName.keys()];
  }

  /**
   * What a tool can learn of a table without its schema (a typed table opens only with it):
   * undefined when there is no such table.
   * @throws PILE_CLOSED
   */
  tableInfo(name: string): TableInfo | undefined {
    this.check();
    const t = this.byName.get(name);
    if (t === undefined) return undefined;
    return { name, typed: t.meta.fingerprint !== '', collisionMode: t.meta.options.collisionMode, count: t.count, capacity: t.capacity };
  }

  /**
   * Pile bytes a table holds: its index (24 bytes a slot), its header and the payload of its entry
   * records; undefined for an unknown name. O(capacity): it reads each entry's size.
   * @throws PILE_CLOSED
   */
  tableBytes(name: string): number | undefined {
    this.check();
    const t = this.byName.get(name);
    if (t === undefined) return undefined;
    return t.bytes();
  }

  /**
   * Deletes a table and frees all its entries. Its CacheTable objects throw PILE_CLOSED afterwards.
   * @throws PILE_READONLY, PILE_CLOSED
   */
  dropTable(name: string): boolean {
    this.writable();
    const t = this.byName.get(name);
    if (t === undefined) return false;
    const i = this.catalog.tables.indexOf(t.meta);
    this.catalog.tables.splice(i, 1);
    try {
      this.saveCatalog();
    } catch (err) {
      this.catalog.tables.splice(i, 0, t.meta);
      throw err;
    }
    // The catalog no longer names it: a crash from here on leaves blocks recovery frees by their tag.
    this.byName.delete(name);
    t.destroy();
    return true;
  }

  /**
   * Frees every expired entry of every table now, and shrinks tables that fell below loadFactorLow.
   * Costs one pass over the expiry slots of tables that hold entries with an expiry.
   * @throws PILE_CLOSED
   */
  sweep(): void {
    this.check();
    if (this.readonly) return;
    const now = this.clock();
    for (const t of this.byName.values()) t.sweepExpired(now, true);
  }

  /** Counters summed over all tables. @throws PILE_CLOSED */
  get stats(): CacheStats {
    this.check();
    const s = { tables: this.byName.size, count: 0, capacity: 0 } as CacheStats;
    for (const n of STAT_NAMES) s[n] = 0;
    for (const t of this.byName.values()) {
      s.count += t.count;
      s.capacity += t.idx.capacity;
      STAT_NAMES.forEach((n, i) => {
        s[n] += t.header[H_STATS + i]!;
      });
    }
    return s;
  }

  /** msync the pile: what was stored before survives power loss. @throws PILE_CLOSED */
  flush(): void {
    this.check();
    this.pile.flush();
  }

  /**
   * Stops the sweep timer, marks the cache cleanly closed (the next open does not check the
   * indexes) and closes the pile when the cache opened it. Idempotent.
   */
  close(): void {
    if (this.closed) return;
    try {
      if (!this.readonly && !this.pile.isClosed) {
        this.catalog.open = false;
        this.saveCatalog();
      }
    } finally {
      this.release();
    }
  }

  /** True once close() ran. */
  get isClosed(): boolean {
    return this.closed;
  }

  // ---------------------------------------------------------------- CacheHost (internal)

  /** @internal */
  check(): void {
    if (this.closed) throw new PileError('PILE_CLOSED', 'the cache is closed');
    if (this.pile.isClosed) {
      this.release();
      throw new PileError('PILE_CLOSED', 'the pile under this cache was closed');
    }
  }

  /** @internal */
  writable(): void {
    this.check();
    if (this.readonly) throw new PileError('PILE_READONLY', `the cache's pile ${this.pile.dir ?? ''} is open read-only`);
    if (encodeGuard.depth !== 0) throw reentrantError();
  }

  /** @internal */
  scratch(n: number): { buf: Buffer; view: DataView } {
    const r = this.scratchRef;
    if (r.buf.length < n) {
      r.buf = Buffer.alloc(2 ** Math.ceil(Math.log2(n)));
      r.view = new DataView(r.buf.buffer, r.buf.byteOffset, r.buf.length);
    }
    return r;
  }

  /** @internal */
  store(bytes: Uint8Array, tag: number): PilePointer {
    // The common case without the closure withRoom() takes: this runs on every put.
    try {
      return this.pile.putRaw(bytes, tag);
    } catch (err) {
      if (!(err instanceof PileError) || err.code !== 'PILE_OUT_OF_SPACE') throw err;
    }
    return this.withRoom(() => this.pile.putRaw(bytes, tag));
  }

  /** @internal */
  saveCatalog(): void {
    // JSON text, not a generic record: opening a cache then needs no msgpackr.
    const text = JSON.stringify(this.catalog);
    const ptr = this.catalogPtr;
    if (ptr === undefined) {
      const created = this.withRoom(() => this.pile.put(text));
      this.withRoom(() => this.pile.setRoot(CACHE_ROOT, created));
      this.catalogPtr = created;
    } else {
      // set() needs room for its journal too.
      this.withRoom(() => this.pile.set(ptr, text));
    }
  }

  /** Runs a pile write; when the pile is full, makes room as a put does and tries again. */
  private withRoom<R>(write: () => R): R {
    for (;;) {
      try {
        return write();
      } catch (err) {
        if (!(err instanceof PileError) || err.code !== 'PILE_OUT_OF_SPACE' || !this.makeRoom()) throw err;
      }
    }
  }

  // ------------------------------------------------------------------------ internals

  /**
   * The pile is full: frees expired entries of all tables, or else evicts a batch of entries,
   * each the lowest-priority then oldest of 8 sampled from a table picked in proportion to its
   * size. False when there is nothing left to free.
   * @internal
   */
  makeRoom(): boolean {
    this.evictions++;
    const tables = [...this.byName.values()];
    const now = this.clock();
    let freed = 0;
    for (const t of tables) freed += t.sweepExpired(now, false);
    if (freed > 0) return true;
    let total = 0;
    for (const t of tables) total += t.header[H_COUNT]!;
    if (total === 0) return false;
    const batch = Math.max(8, Math.min(1024, Math.ceil(total / 256)));
    let evicted = 0;
    for (let n = 0; n < batch && total > 0; n++) {
      let r = Math.random() * total;
      let pick = tables[0]!;
      for (const t of tables) {
        pick = t;
        r -= t.header[H_COUNT]!;
        if (r < 0) break;
      }
      if (!pick.evictOne(EVICTION_SAMPLES)) continue;
      evicted++;
      total--;
    }
    return evicted > 0;
  }

  private autoSweep(): void {
    try {
      if (!this.closed) this.sweep();
    } catch (err) {
      this.lastSweepError = err;
      if (this.closed && this.timer !== undefined) clearInterval(this.timer);
    }
  }

  private loadCatalog(): Catalog {
    const ptr = this.pile.getRoot(CACHE_ROOT);
    if (ptr === undefined) return { v: CATALOG_VERSION, open: false, nextId: 1, tables: [] };
    const text = this.pile.get<unknown>(ptr);
    let c: Catalog | null = null;
    try {
      if (typeof text === 'string') c = JSON.parse(text) as Catalog;
    } catch {
      // reported below as a malformed catalog
    }
    if (c === null || typeof c !== 'object' || typeof c.v !== 'number') {
      throw new PileError('PILE_CORRUPT', `cache catalog (root '${CACHE_ROOT}', pointer ${ptr}) is not a catalog record`);
    }
    if (c.v > CATALOG_VERSION) {
      throw new PileError(
        'PILE_FORMAT_VERSION',
        `cache catalog (root '${CACHE_ROOT}') has version ${c.v}; this build reads up to ${CATALOG_VERSION}`,
      );
    }
    if (
      !Array.isArray(c.tables) ||
      typeof c.nextId !== 'number' ||
      c.tables.some((t) => typeof t?.name !== 'string' || typeof t.id !== 'number' || !Array.isArray(t.chunks))
    ) {
      throw new PileError('PILE_CORRUPT', `cache catalog (root '${CACHE_ROOT}', pointer ${ptr}) is malformed`);
    }
    this.catalogPtr = ptr;
    return c;
  }

  private headerArray(meta: TableMeta): Float64Array {
    let b: Buffer;
    try {
      b = this.pile.rawBuffer(meta.header as PilePointer);
    } catch (err) {
      throw new PileError(
        'PILE_CORRUPT',
        `cache table '${meta.name}': header block ${meta.header} is not readable: ${(err as Error).message}`,
      );
    }
    if (b.length !== HEADER_WORDS * 8)
      throw new PileError('PILE_CORRUPT', `cache table '${meta.name}': header block ${meta.header} holds ${b.length} bytes`);
    const h = new Float64Array(b.buffer, b.byteOffset, HEADER_WORDS);
    // A read-only mapping can not be written: count this process's hits and misses on the heap.
    return this.readonly ? Float64Array.from(h) : h;
  }

  private openTable(meta: TableMeta, codec: CompiledSchema<unknown> | undefined): CacheTable<unknown> {
    const h = this.headerArray(meta);
    if (h[H_VERSION] !== HEADER_VERSION) {
      throw new PileError(
        h[H_VERSION]! > HEADER_VERSION ? 'PILE_FORMAT_VERSION' : 'PILE_CORRUPT',
        `cache table '${meta.name}': header version ${h[H_VERSION]}`,
      );
    }
    return new CacheTable<unknown>(this, meta, h, codec);
  }

  private reopenTable<V>(t: CacheTable<V>, options: TableOptions<V>): CacheTable<V> {
    const meta = t.meta;
    const { resolved } = resolveTableOptions(options as TableOptions<unknown>, meta.options);
    if (options.schema === undefined && meta.fingerprint !== '') {
      throw new PileError('PILE_SCHEMA_MISMATCH', `cache table '${meta.name}' stores typed values: open it with its schema`);
    }
    if (options.schema !== undefined && meta.fingerprint === '') {
      throw new PileError('PILE_SCHEMA_MISMATCH', `cache table '${meta.name}' was created without a schema; it can not be given one`);
    }
    let changed = (Object.keys(resolved) as (keyof ResolvedTableOptions)[]).some((k) => resolved[k] !== meta.options[k]);
    if (options.schema !== undefined) {
      const codec = this.registerSchema<V>(meta.id, meta.name, options.schema);
      if (codec.fingerprint !== meta.fingerprint) changed = true;
      t.attachCodec(codec);
      if (changed && !this.readonly) meta.fingerprint = codec.fingerprint;
    }
    if (changed && !this.readonly) {
      const before = meta.options;
      meta.options = resolved;
      try {
        this.saveCatalog();
      } catch (err) {
        meta.options = before;
        throw err;
      }
    }
    return t;
  }

  /** Registers the values' schema with the pile (which persists it and refuses an incompatible change) and compiles the codec. */
  private registerSchema<V>(id: number, name: string, schema: unknown): CompiledSchema<V> {
    if (schema === null || typeof schema !== 'object' || typeof (schema as { safeParse?: unknown }).safeParse !== 'function') {
      throw invalidOption('schema', `table '${name}': expected a zod schema`);
    }
    try {
      this.pile.schema(`pile-cache:${id}`, schema as never);
    } catch (err) {
      // The pile names the schema by its internal name; the user knows the table.
      if (isPileError(err, 'PILE_SCHEMA_MISMATCH')) {
        throw new PileError(
          'PILE_SCHEMA_MISMATCH',
          `cache table '${name}': ${err.message.replace(/^PILE_SCHEMA_MISMATCH: schema 'pile-cache:\d+' does not match the one stored in the pile/, 'the schema given does not match the one the table was created with')}`,
        );
      }
      throw err;
    }
    return compileSchema(schema as never) as CompiledSchema<V>;
  }

  private release(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    if (!this.closed) {
      this.closed = true;
      inUse.delete(this.pile);
      for (const t of this.byName.values()) t.markDropped();
      this.byName.clear();
      this.mem.release();
      if (this.ownsPile && !this.pile.isClosed) this.pile.close();
    }
  }
}
