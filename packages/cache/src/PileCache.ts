import { type Pile, PileError, openPile, reentrantError, type CompiledSchema, type PilePointer } from '@pile/core';
import { encodeGuard } from './CoreBindings';
import { CACHE_ROOT, loadCatalog, readCatalog, type Catalog } from './CacheCatalog';
import type { CacheHost, StoredIndex } from './CacheHost';
import { resolveCacheOptions, type CacheBehaviourOptions, type CacheOptions, type CacheOverPileOptions } from './CacheOptions';
import { CacheTable } from './CacheTable';
import { recoverCache } from './CacheRecovery';
import { H_VERSION, HEADER_VERSION, MAX_TABLE_ID, STAT_NAMES, zeroStats } from './EntryFormat';
import { KeyCodec } from './KeyCodec';
import { freeOrEvict } from './MemoryPressure';
import { PileMemory } from './PileMemory';
import { allocTableBlocks, existingHeader, headerWords } from './TableBlocks';
import { type ResolvedTableOptions, type TableOptions, invalidOption, resolveTableOptions } from './TableOptions';
import type { TableMeta } from './TableState';
import type { CacheStats, TableHook, TableInfo } from './TableTypes';
import { registerSchema } from './ValueCodec';

const MAX_NAME_LENGTH = 1024;

/** Piles that have a PileCache open on them: two at once would each think they own the index. */
const inUse = new WeakSet<Pile>();

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
    const o = resolveCacheOptions(options);
    this.clock = o.clock;
    this.onProgress = o.onProgress;
    const buf = Buffer.alloc(4096);
    this.scratchRef = { buf, view: new DataView(buf.buffer, buf.byteOffset, buf.length) };
    this.ownsPile = o.pile === undefined;
    this.pile = o.pile ?? openPile(o.pileOptions);
    if (inUse.has(this.pile)) {
      if (this.ownsPile) this.pile.close();
      throw new PileError(
        'PILE_LOCKED',
        `another PileCache is open on this pile${this.pile.dir === undefined ? '' : ` (${this.pile.dir})`}`,
      );
    }
    try {
      this.pile.claimStructures('a cache', true); // read-only tables check their reads (CheckedRead.ts)
    } catch (err) {
      if (this.ownsPile) this.pile.close();
      throw err;
    }
    this.readonly = this.pile.readonly;
    this.mem = new PileMemory(this.pile);
    try {
      const loaded = loadCatalog(this.pile);
      this.catalog = loaded.catalog;
      this.catalogPtr = loaded.ptr;
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
    if (o.sweepIntervalSec > 0 && !this.readonly) {
      this.timer = setInterval(() => this.autoSweep(), o.sweepIntervalSec * 1000);
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
    let existing = this.byName.get(name) as CacheTable<V> | undefined;
    if (this.readonly && existing !== undefined && (existing.dropped || !this.pile.has(existing.meta.header as PilePointer))) {
      // Dropped by the pile's writer (found by a read, or its header block freed): a table made again under the name is another table.
      this.byName.delete(name);
      existing.markDropped();
      existing = undefined;
    }
    if (existing === undefined && this.readonly) existing = this.tableMadeSince(name) as CacheTable<V> | undefined;
    if (existing !== undefined) return this.reopenTable(existing, options);
    this.writable();
    const { resolved, initialCapacity } = resolveTableOptions(options as TableOptions<unknown>);
    const id = this.catalog.nextId;
    if (id > MAX_TABLE_ID) throw new PileError('PILE_OUT_OF_SPACE', `a cache holds at most ${MAX_TABLE_ID} tables over its life`);
    const codec = options.schema === undefined ? undefined : registerSchema<V>(this.pile, id, name, options.schema);
    const { header, idx } = allocTableBlocks(this.pile, id, initialCapacity);
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
    const h = headerWords(this.pile, meta, this.readonly);
    h[H_VERSION] = HEADER_VERSION;
    this.catalog.tables.push(meta);
    this.catalog.nextId = id + 1;
    try {
      this.saveCatalog();
    } catch (err) {
      this.catalog.tables.pop();
      this.catalog.nextId = id;
      idx.free(this.pile);
      this.pile.delete(header);
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
    const typed = t.meta.fingerprint !== '';
    const info: TableInfo = { name, typed, collisionMode: t.meta.options.collisionMode, count: t.count, capacity: t.capacity };
    if (typed) info.schemaName = `pile-cache:${t.meta.id}`;
    return info;
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
    const s: CacheStats = { tables: this.byName.size, count: 0, capacity: 0, ...zeroStats() };
    for (const t of this.byName.values()) {
      s.count += t.count;
      s.capacity += t.capacity;
      const ts = t.stats;
      for (const n of STAT_NAMES) s[n] += ts[n];
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
  storedIndex(id: number): StoredIndex | undefined {
    const catalog = this.catalogPtr === undefined ? loadCatalog(this.pile).catalog : readCatalog(this.pile, this.catalogPtr);
    return catalog.tables.find((m) => m.id === id);
  }

  /**
   * A read-only cache: the table `name` that the pile's writer (another process) created after this
   * open, opened; undefined when the catalog has none of that name.
   */
  private tableMadeSince(name: string): CacheTable<unknown> | undefined {
    for (let attempt = 1; ; attempt++) {
      const loaded = loadCatalog(this.pile);
      const meta = loaded.catalog.tables.find((m) => m.name === name);
      if (meta === undefined) return undefined;
      this.catalogPtr = loaded.ptr;
      let t: CacheTable<unknown>;
      try {
        t = this.openTable(meta, undefined);
      } catch (err) {
        // The writer dropped or resized the table after the catalog was read (its header or chunks
        // freed): the catalog names something else now, read it again. The same entry: damage.
        const now = loadCatalog(this.pile).catalog.tables.find((m) => m.name === name);
        if (attempt < 100 && JSON.stringify(now) !== JSON.stringify(meta)) continue;
        throw err;
      }
      this.byName.set(name, t);
      return t;
    }
  }

  /** @internal */
  saveCatalog(evict = true): void {
    // JSON text, not a generic record: opening a cache then needs no msgpackr.
    const text = JSON.stringify(this.catalog);
    const ptr = this.catalogPtr;
    const write = evict ? <R>(w: () => R): R => this.withRoom(w) : <R>(w: () => R): R => w();
    if (ptr === undefined) {
      const created = write(() => this.pile.put(text));
      write(() => this.pile.setRoot(CACHE_ROOT, created));
      this.catalogPtr = created;
    } else {
      // set() needs room for its journal too.
      write(() => this.pile.set(ptr, text));
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
   * The pile is full: {@link freeOrEvict} over every table (expired entries first, else a batch of
   * evictions), counted in `evictions` so that a put in progress probes again. False when there is
   * nothing left to free.
   * @internal
   */
  makeRoom(): boolean {
    this.evictions++;
    return freeOrEvict([...this.byName.values()], this.clock());
  }

  private autoSweep(): void {
    try {
      if (!this.closed) this.sweep();
    } catch (err) {
      this.lastSweepError = err;
      if (this.closed && this.timer !== undefined) clearInterval(this.timer);
    }
  }

  private openTable(meta: TableMeta, codec: CompiledSchema<unknown> | undefined): CacheTable<unknown> {
    return new CacheTable<unknown>(this, meta, existingHeader(this.pile, meta, this.readonly), codec);
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
      const codec = registerSchema<V>(this.pile, meta.id, meta.name, options.schema);
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
