import { PileError } from '@pile/core';
import type { CacheKey, CacheTable, PileCache, PutOptions, TableHook, TableOptions } from '@pile/cache';
import { Redis, type RedisOptions } from 'ioredis';
import { resolveSyncOptions, type ResolvedSyncOptions, type SyncOptions } from './SyncOptions';
import { SYNC_TABLE_PREFIX, SyncState } from './SyncState';
import { keyId, packKey, unpackKey, type Op } from './WireFormat';
import { SecondTier, type L2Read } from './SecondTier';
import { SyncedTable, type Load, type LoadOwner } from './SyncedTable';

/** Counters and state of a {@link SyncedCache}. */
export interface SyncStats {
  /** This host's identity in the stream. */
  origin: string;
  /** True while both Redis connections are ready. */
  connected: boolean;
  /** True while tables serve local hits (caught up within maxLag, no pending catch-up). */
  serving: boolean;
  /** Milliseconds since this host was last known caught up with the stream (Infinity before the first time). */
  lagMs: number;
  /** Id of the last stream entry applied (persisted). */
  lastId: string;
  /** Local changes waiting in the outbox to be published. */
  outbox: number;
  /** Remote changes applied (persisted). */
  applied: number;
  /** Local changes published (persisted). */
  published: number;
  /** Remote changes not applied because the local value's version was newer (persisted). */
  keptNewer: number;
  /** Gaps found: the log lost entries this host had not read (trimmed, or Redis lost its data); each bumped the epochs (persisted). */
  gaps: number;
  /** getOrLoad results not stored because the key changed while they loaded (this session). */
  discardedFills: number;
  /** With l2: getOrLoad misses served from Redis without calling the loader (this session). */
  l2Hits: number;
  /** With l2: loaded values stored in Redis (this session). */
  l2Stores: number;
}

/** The hook @pile/sync attaches to each table of the cache. */
class TableSync implements TableHook {
  serving = false;
  epoch: number;
  constructor(
    private readonly owner: SyncedCache,
    readonly table: CacheTable<unknown>,
    epoch: number,
  ) {
    this.epoch = epoch;
  }

  changed(op: 'put' | 'delete' | 'expiry', key: CacheKey): void {
    this.owner.localChange(this.table.name, op, key);
  }
}

const OPS: Record<'put' | 'delete' | 'expiry', Op> = { put: 'p', delete: 'd', expiry: 'e' };
/** Keys per XADD when the outbox holds many (a burst of writes, or writes made while Redis was down). */
const PUBLISH_BATCH = 256;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Keeps `cache` coherent with the other hosts that follow the same stream. Every table of the cache
 * (and every table created later) is synced. Tables serve no local hit until this host has caught
 * up with the stream: await {@link SyncedCache.ready} to know when.
 * @throws PILE_INVALID_OPTION naming the option
 * @throws PILE_READONLY when the cache is read-only
 * @throws PILE_LOCKED when the cache is already synced (a table has a hook)
 * @throws PILE_CORRUPT, PILE_FORMAT_VERSION when the sync state stored in the pile is damaged or newer
 * @throws PILE_CLOSED
 */
export function syncCache(cache: PileCache, options: SyncOptions): SyncedCache {
  return new SyncedCache(cache, options);
}

/** A {@link PileCache} attached to an invalidation log in a Redis Stream. See docs/distributed.md. */
export class SyncedCache implements LoadOwner {
  /**
   * Resolves the first time this host has caught up with the stream (tables serve local hits from then
   * on). Rejects with PILE_UNAVAILABLE, naming the Redis address and the last connection error, when
   * that did not happen within `connectTimeoutMs` (the connections go on retrying).
   */
  readonly ready: Promise<void>;
  /** The last Redis error met (they are retried, never thrown). */
  lastError: unknown;
  private readonly opts: ResolvedSyncOptions;
  private readonly state: SyncState;
  private readonly pub: Redis;
  private readonly sub: Redis;
  private readonly identityKey: string;
  private readonly hooks = new Map<string, TableSync>();
  private readonly loads = new Map<string, Load[]>();
  private readonly timer: NodeJS.Timeout;
  private readonly tick: number;
  private readonly block: number;
  private applying = false;
  private filling = false;
  private serving = false;
  private lastSynced = -Infinity;
  private publishing = false;
  private pubEpoch: number | undefined;
  private publishQueued = false;
  private closed = false;
  private discardedFills = 0;
  private l2Hits = 0;
  private l2Stores = 0;
  /** @internal The second tier, when the l2 option is on. */
  readonly l2: SecondTier | undefined;
  private resolveReady!: () => void;
  private readyTimer: NodeJS.Timeout | undefined;
  private readonly following: Promise<void>;

  /** Use {@link syncCache}. */
  constructor(
    /** The cache kept coherent. */
    readonly cache: PileCache,
    options: SyncOptions,
  ) {
    this.opts = resolveSyncOptions(options);
    if (cache.readonly) throw new PileError('PILE_READONLY', 'a read-only cache can not be synced: it could not apply invalidations');
    this.state = new SyncState(cache, cache.pile, this.opts.origin, Date.now);
    this.identityKey = `${this.opts.stream}:identity`;
    this.tick = Math.max(5, Math.min(100, Math.floor(this.opts.maxLag / 10)));
    this.block = Math.max(10, Math.min(1000, Math.floor(this.opts.maxLag / 4)));
    cache.setHook((t) => {
      if (t.name.startsWith(SYNC_TABLE_PREFIX)) return undefined;
      const h = new TableSync(this, t, this.state.epochOf(t.name));
      h.serving = this.serving;
      this.hooks.set(t.name, h);
      return h;
    });
    this.pub = connect(options.redis, 'pile-sync-pub');
    this.l2 = this.opts.l2 ? new SecondTier(this.opts.stream) : undefined;
    this.l2?.define(this.pub);
    this.sub = connect(options.redis, 'pile-sync-sub');
    for (const c of [this.pub, this.sub])
      c.on('error', (err: unknown) => {
        this.lastError = err;
      });
    this.pub.on('ready', () => {
      this.pubEpoch = undefined;
      this.schedulePublish();
    });
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = () => {
        clearTimeout(this.readyTimer);
        resolve();
      };
      if (this.opts.connectTimeoutMs > 0) {
        this.readyTimer = setTimeout(() => {
          const err = this.unavailable(options.redis);
          process.emitWarning(err.message, { type: 'PileWarning', code: err.code });
          reject(err);
        }, this.opts.connectTimeoutMs);
        this.readyTimer.unref();
      }
    });
    // A caller that never awaits ready must not see an unhandled rejection; one that does gets it.
    this.ready.catch(() => undefined);
    this.timer = setInterval(() => this.checkLag(), this.tick);
    this.timer.unref();
    this.following = this.follow();
  }

  /** This host's identity in the stream. */
  get origin(): string {
    return this.state.origin;
  }

  /**
   * A table of the cache (created with `options` when absent, like `cache.table`), with
   * {@link SyncedTable.getOrLoad}. The same CacheTable is reachable through the cache and is synced either way.
   * @throws as `cache.table`
   */
  table<V = unknown>(name: string, options?: TableOptions<V>): SyncedTable<V> {
    if (name.startsWith(SYNC_TABLE_PREFIX))
      throw new PileError('PILE_INVALID_OPTION', `option name: '${SYNC_TABLE_PREFIX}' names @pile/sync's own tables`);
    return new SyncedTable<V>(this, this.cache.table<V>(name, options));
  }

  /** Counters and state. @throws PILE_CLOSED */
  get stats(): SyncStats {
    if (this.closed) throw new PileError('PILE_CLOSED', 'the synced cache is closed');
    const c = this.state.counters;
    return {
      origin: this.state.origin,
      connected: this.pub.status === 'ready' && this.sub.status === 'ready',
      serving: this.serving,
      lagMs: Date.now() - this.lastSynced,
      lastId: `${this.state.lastMs}-${this.state.lastSeq}`,
      outbox: this.state.outboxTail - this.state.outboxHead,
      ...c,
      discardedFills: this.discardedFills,
      l2Hits: this.l2Hits,
      l2Stores: this.l2Stores,
    };
  }

  /**
   * Waits (up to `timeoutMs`) for the outbox to be published, then detaches from the cache and
   * closes both Redis connections. Unpublished changes stay in the outbox and go out at the next
   * syncCache on this pile. The cache stays open. Idempotent.
   */
  async close(timeoutMs = 2000): Promise<void> {
    if (this.closed) return;
    const until = Date.now() + timeoutMs;
    while (this.state.outboxTail > this.state.outboxHead && Date.now() < until && this.pub.status === 'ready') {
      this.schedulePublish();
      await sleep(5);
    }
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.readyTimer);
    if (!this.cache.isClosed) this.cache.setHook(undefined);
    this.sub.disconnect();
    this.pub.disconnect();
    await this.following;
  }

  // ------------------------------------------------------------------ local changes

  /** @internal From a table hook, before the change is written. */
  localChange(table: string, op: 'put' | 'delete' | 'expiry', key: CacheKey): void {
    if (this.applying || this.filling) return;
    const id = keyId(key);
    if (this.loads.size > 0) this.markLoads(table, id);
    const state = this.state;
    const version = state.nextVersion();
    // The outbox first: once it holds the change, a crash can not lose the invalidation.
    state.enqueue(packKey(OPS[op], version, table, id));
    if (op === 'put') state.setVersion(table, key, version);
    else if (op === 'delete') state.setVersion(table, key, 0);
    this.schedulePublish();
  }

  private schedulePublish(): void {
    if (this.publishQueued || this.closed) return;
    this.publishQueued = true;
    // A microtask: every write of the current synchronous run goes out in one XADD.
    queueMicrotask(() => {
      this.publishQueued = false;
      void this.publish();
    });
  }

  private async publish(): Promise<void> {
    if (this.publishing) return;
    this.publishing = true;
    const state = this.state;
    const o = this.opts;
    try {
      while (!this.closed && state.outboxHead < state.outboxTail && this.pub.status === 'ready') {
        if (this.pubEpoch === undefined) this.pubEpoch = await this.identity(this.pub);
        const keys = state.peek(PUBLISH_BATCH);
        // `<epoch>-*`: Redis numbers the entries of the epoch 0, 1, 2, ... so followers see any hole.
        const args: (string | number)[] = [o.stream, 'MAXLEN', '~', o.maxLen, `${this.pubEpoch}-*`, 'g', state.origin];
        for (const k of keys) if (k !== '') args.push('k', k);
        if (args.length > 7) {
          try {
            if (this.l2 === undefined) await this.pub.xadd(...(args as [string]));
            else await this.publishWithTombstones(args.slice(4) as string[], keys);
          } catch (err) {
            // The stream was replaced under a newer epoch: learn it and retry.
            if (err instanceof Error && /equal or smaller/.test(err.message)) this.pubEpoch = undefined;
            throw err;
          }
        }
        state.published(keys.length);
      }
    } catch (err) {
      this.lastError = err;
      // Retried when the connection is ready again, or by the lag timer.
    } finally {
      this.publishing = false;
    }
  }

  /** XADD of the entry and, in the same script, a tombstone in place of each key's L2 record. */
  private publishWithTombstones(fields: string[], keys: string[]): Promise<string> {
    const l2 = this.l2!;
    const l2Keys: string[] = [];
    for (const k of keys) {
      const w = k === '' ? undefined : unpackKey(k);
      if (w !== undefined) l2Keys.push(l2.keyOf(w.table, w.id));
    }
    return l2.publish(this.pub, this.opts.maxLen, fields[0]!, fields.slice(1), l2Keys);
  }

  /**
   * The stream's identity: a number (ms at its creation) kept in `<stream>:identity`, created by the
   * first host that finds it missing. Every id of the stream is `<identity>-<n>`, n = 0, 1, 2, ...
   * A Redis that lost its data gets a new identity, which the followers notice.
   */
  private async identity(conn: Redis): Promise<number> {
    await conn.set(this.identityKey, String(Date.now()), 'NX');
    const v = Number(await conn.get(this.identityKey));
    if (!Number.isSafeInteger(v) || v <= 0)
      throw new PileError('PILE_CORRUPT', `Redis key '${this.identityKey}' does not hold a stream identity`);
    return v;
  }

  // ------------------------------------------------------------------ following the stream

  private async follow(): Promise<void> {
    let backoff = 20;
    let epoch = 0;
    const o = this.opts;
    const state = this.state;
    while (!this.closed) {
      try {
        if (this.sub.status !== 'ready') {
          epoch = 0;
          await sleep(5);
          continue;
        }
        if (epoch === 0) {
          // (Re)connected: the log may have been lost meanwhile.
          epoch = await this.identity(this.sub);
          if (state.identity === undefined) {
            // First attach: what the tables hold was not followed, so it goes below the epoch.
            const top = (await this.sub.xrevrange(o.stream, '+', '-', 'COUNT', 1))[0];
            const [ms, seq] = top === undefined ? [epoch, -1] : parseId(top[0]);
            this.restartFrom(String(epoch), ms, seq, false);
          } else if (String(epoch) !== state.identity || state.lastMs !== epoch) {
            this.restartFrom(String(epoch), epoch, -1, true);
          } else {
            // Entries after this host's position may have been trimmed, with no entry after them to show the hole.
            const resume = await this.trimmedPast(state.lastSeq);
            if (resume !== undefined) this.restartFrom(String(epoch), epoch, resume, true);
          }
        }
        const from = state.readAfter;
        const res = await this.sub.xread('COUNT', o.batch, 'BLOCK', this.block, 'STREAMS', o.stream, from);
        const at = Date.now();
        if (this.closed) break;
        let n = 0;
        if (res !== null) {
          for (const [, entries] of res) {
            for (const [id, f] of entries) {
              const [ms, seq] = parseId(id);
              if (ms !== epoch) {
                // An id of another epoch: the stream was replaced; find out which on the next turn.
                epoch = 0;
                break;
              }
              if (seq !== state.lastSeq + 1) {
                // A hole: entries this host never read were trimmed.
                this.restartFrom(String(epoch), epoch, seq - 1, true);
              }
              this.apply(f);
              state.setLastSeq(seq);
              n++;
            }
          }
        }
        if (epoch !== 0 && n < o.batch) this.synced(at);
        backoff = 20;
      } catch (err) {
        if (this.closed) break;
        this.lastError = err;
        epoch = 0;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 500);
      }
    }
  }

  /**
   * When entries after entry `seq` of the epoch were trimmed (the stream's first entry is past
   * seq + 1, or it is empty and its last generated id is past seq: XINFO STREAM, Redis >= 7), the
   * sequence number of the last entry generated, to resume after; else undefined.
   */
  private async trimmedPast(seq: number): Promise<number | undefined> {
    let info: unknown[];
    try {
      info = (await this.sub.xinfo('STREAM', this.opts.stream)) as unknown[];
    } catch (err) {
      // No stream while this host had read some of it: deleted, so a hole.
      if (err instanceof Error && /no such key/i.test(err.message)) return seq >= 0 ? -1 : undefined;
      throw err;
    }
    const field = (name: string): string => String(info[info.indexOf(name) + 1]);
    const [lastMs, lastSeq] = parseId(field('last-generated-id'));
    if (lastMs !== this.state.lastMs) return undefined;
    if (Number(field('length')) === 0) return lastSeq > seq ? lastSeq : undefined;
    const [firstMs, firstSeq] = parseId(field('recorded-first-entry-id'));
    return firstMs === lastMs && firstSeq > seq + 1 ? lastSeq : undefined;
  }

  /** Bumps every table's epoch to its next sequence number (gap, or first attach), and follows from (ms, seq). */
  private restartFrom(identity: string, ms: number, seq: number, gap: boolean): void {
    const epochs: Record<string, number> = {};
    for (const [name, h] of this.hooks) {
      if (h.table.count === 0 && !gap) continue;
      h.epoch = h.table.sequence;
      epochs[name] = h.epoch;
    }
    if (gap) this.state.countGap();
    this.state.restart(epochs, identity, ms, seq);
  }

  /** Applies one stream entry: drops each key's local copy unless it holds a newer version. Idempotent. */
  private apply(f: string[]): void {
    if (f[0] !== 'g' || f[1] === this.state.origin) return;
    const state = this.state;
    for (let i = 2; i + 1 < f.length; i += 2) {
      if (f[i] !== 'k') continue;
      const w = unpackKey(f[i + 1]!);
      if (w === undefined) continue;
      state.observe(w.version);
      if (this.loads.size > 0) this.markLoads(w.table, w.id);
      const h = this.hooks.get(w.table);
      if (h === undefined) continue;
      if (state.versionOf(w.table, w.key) > w.version) {
        state.countKeptNewer();
        continue;
      }
      this.applying = true;
      try {
        h.table.delete(w.key);
      } finally {
        this.applying = false;
      }
      state.setVersion(w.table, w.key, 0);
      state.countApplied();
      const cb = this.opts.onInvalidate;
      if (cb !== undefined) {
        try {
          cb(w.table, w.key);
        } catch (err) {
          this.lastError = err;
        }
      }
    }
  }

  private synced(at: number): void {
    this.lastSynced = at;
    if (!this.serving) this.setServing(true);
    this.resolveReady();
  }

  private checkLag(): void {
    if (this.serving && Date.now() - this.lastSynced > this.opts.maxLag - this.tick) this.setServing(false);
    if (this.state.outboxTail > this.state.outboxHead && !this.publishing) this.schedulePublish();
  }

  private setServing(on: boolean): void {
    this.serving = on;
    for (const h of this.hooks.values()) h.serving = on;
  }

  // ------------------------------------------------------------------ loads (getOrLoad)

  /** @internal */
  beginLoad(table: string, key: CacheKey): { load: Load; slot: string } {
    const slot = `${table}\u0000${keyId(key)}`;
    const load: Load = { stale: false };
    const list = this.loads.get(slot);
    if (list === undefined) this.loads.set(slot, [load]);
    else list.push(load);
    return { load, slot };
  }

  /** @internal */
  endLoad(slot: string, load: Load): void {
    const list = this.loads.get(slot);
    if (list === undefined) return;
    const i = list.indexOf(load);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.loads.delete(slot);
  }

  /** @internal Stores a loaded value without announcing it (a fill is not a change) and with version 0. */
  fill<V>(table: CacheTable<V>, key: CacheKey, value: V, opts: PutOptions | undefined): void {
    this.filling = true;
    try {
      table.put(key, value, opts);
    } finally {
      this.filling = false;
    }
    this.state.setVersion(table.name, key, 0);
  }

  /** @internal */
  discarded(): void {
    this.discardedFills++;
  }

  /**
   * @internal The key's L2 record, read before the loader runs; `usable` says whether its value may
   * be served here: not while this host has changes not yet in the stream (one of them may be of
   * this key, newer than the L2 value). Undefined when Redis can not be reached (the loader is used).
   */
  async l2Read(table: string, key: CacheKey): Promise<{ read: L2Read; redisKey: string; usable: boolean } | undefined> {
    const l2 = this.l2!;
    const redisKey = l2.keyOf(table, keyId(key));
    const usable = this.state.outboxTail === this.state.outboxHead;
    if (this.pub.status !== 'ready') return undefined;
    try {
      return { read: await l2.read(this.pub, redisKey), redisKey, usable };
    } catch (err) {
      this.lastError = err;
      return undefined;
    }
  }

  /** @internal Decodes an L2 value; undefined (and lastError) when it does not decode. */
  l2Decode(bytes: Buffer): unknown {
    try {
      return this.l2!.decode(bytes);
    } catch (err) {
      this.lastError = new PileError('PILE_CORRUPT', `an L2 value in Redis does not decode as MessagePack: ${(err as Error).message}`);
      return undefined;
    }
  }

  /** @internal Counts a miss served from L2. */
  l2Hit(): void {
    this.l2Hits++;
  }

  /** @internal Stores a loaded value in L2 under the generation it was read at (never replaces a newer one). */
  async l2Store(redisKey: string, read: L2Read, value: unknown, ttlMs: number): Promise<void> {
    const l2 = this.l2!;
    if (this.closed || this.pub.status !== 'ready') return;
    try {
      if ((await l2.fill(this.pub, redisKey, read, l2.encode(value), ttlMs)) === 1) this.l2Stores++;
    } catch (err) {
      this.lastError = err;
    }
  }

  private unavailable(redis: SyncOptions['redis']): PileError {
    const last = this.lastError instanceof Error ? `; last error: ${this.lastError.message}` : '';
    return new PileError(
      'PILE_UNAVAILABLE',
      `Redis at ${redisAddress(redis)} was not reached (or the stream ${this.opts.stream} not caught up with) within connectTimeoutMs ${this.opts.connectTimeoutMs} ms${last}; tables serve no local hit until it is, the connections go on retrying`,
    );
  }

  private markLoads(table: string, id: string): void {
    const list = this.loads.get(`${table}\u0000${id}`);
    if (list !== undefined) for (const l of list) l.stale = true;
  }
}

/** Where `redis` points, as a URL without its password. */
function redisAddress(redis: SyncOptions['redis']): string {
  if (typeof redis === 'string') {
    try {
      const u = new URL(redis);
      if (u.password !== '') u.password = '***';
      return u.toString();
    } catch {
      return redis;
    }
  }
  const o: RedisOptions = redis instanceof Redis ? redis.options : redis;
  if (o.path !== undefined) return `redis+unix://${o.path}`;
  return `redis://${o.host ?? 'localhost'}:${o.port ?? 6379}`;
}

function connect(redis: SyncOptions['redis'], name: string): Redis {
  // Commands fail at once when the connection is down (nothing queues in memory, nothing is resent
  // behind our back): the outbox and the saved id are what carry changes across an outage.
  const override: Partial<RedisOptions> = {
    connectionName: name,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (n: number) => Math.min(20 * n, 500),
  };
  if (redis instanceof Redis) return redis.duplicate(override);
  if (typeof redis === 'string') return new Redis(redis, override);
  return new Redis({ ...redis, ...override });
}

function parseId(id: string): [number, number] {
  const dash = id.indexOf('-');
  return [Number(id.slice(0, dash)), Number(id.slice(dash + 1))];
}
