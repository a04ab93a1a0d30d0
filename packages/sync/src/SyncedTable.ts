import type { CacheKey, CacheTable, PutOptions } from '@pile/cache';
import type { L2Read } from './SecondTier';

/** Load in flight in getOrLoad; `stale` is set when its key changes meanwhile. */
export interface Load {
  stale: boolean;
}

/** What a {@link SyncedTable} needs of its {@link SyncedCache} (internal). */
export interface LoadOwner {
  readonly l2: unknown;
  beginLoad(table: string, key: CacheKey): { load: Load; slot: string };
  endLoad(slot: string, load: Load): void;
  fill<V>(table: CacheTable<V>, key: CacheKey, value: V, opts: PutOptions | undefined): void;
  discarded(): void;
  l2Read(table: string, key: CacheKey): Promise<{ read: L2Read; redisKey: string; usable: boolean } | undefined>;
  l2Decode(bytes: Buffer): unknown;
  l2Hit(): void;
  l2Store(redisKey: string, read: L2Read, value: unknown, ttlMs: number): Promise<void>;
}

/** A cache table with a read-through that never stores a value its key changed under. */
export class SyncedTable<V> {
  /** @internal */
  constructor(
    private readonly owner: LoadOwner,
    /** The cache table (synced through its hook whichever way it is used). */
    readonly table: CacheTable<V>,
  ) {}

  /**
   * The value under `key`; on a miss (or while this host does not serve local hits), `loader(key)`'s
   * value, stored unless `key` was changed (locally or by another host) after the load started:
   * then it is returned but not stored (the fill race), counted in `stats.discardedFills`.
   * An undefined result is returned and not stored.
   *
   * With the `l2` option, a miss first reads the key's value in Redis: one found there (loaded by any
   * host after the key's last invalidation in the stream) is returned and stored locally without
   * calling `loader`, unless this host has changes not yet published or the key changes during the
   * read. A value `loader` returns is then stored in Redis too, unless an invalidation of the key
   * entered the stream since the read (see docs/distributed.md, "The L2 tier"). Redis errors are
   * not thrown: the loader is used, the L2 store skipped.
   * @throws whatever `loader` throws (nothing is stored), and as CacheTable get/put
   */
  async getOrLoad(
    key: CacheKey,
    loader: (key: CacheKey) => V | undefined | Promise<V | undefined>,
    opts?: PutOptions,
  ): Promise<V | undefined> {
    const hit = this.table.get(key);
    if (hit !== undefined) return hit;
    const owner = this.owner;
    const { load, slot } = owner.beginLoad(this.table.name, key);
    let value: V | undefined;
    let l2: Awaited<ReturnType<LoadOwner['l2Read']>>;
    try {
      if (owner.l2 !== undefined) {
        // Registered before the read: a change of the key while it is in flight marks the load.
        l2 = await owner.l2Read(this.table.name, key);
        if (l2 !== undefined && l2.usable && l2.read.bytes !== undefined && !load.stale) {
          const v = owner.l2Decode(l2.read.bytes) as V | undefined;
          if (v !== undefined) {
            owner.l2Hit();
            const left = l2.read.leftMs;
            owner.fill(
              this.table,
              key,
              v,
              left === undefined
                ? opts
                : { ...(opts?.priority === undefined ? {} : { priority: opts.priority }), expiresAt: Date.now() + left },
            );
            return v;
          }
        }
      }
      value = await loader(key);
    } finally {
      owner.endLoad(slot, load);
    }
    if (value === undefined) return undefined;
    if (load.stale) {
      owner.discarded();
      return value;
    }
    owner.fill(this.table, key, value, opts);
    if (l2 !== undefined) await owner.l2Store(l2.redisKey, l2.read, value, ttlOf(this.table, opts));
    return value;
  }
}

/** Ms a value put with `opts` lives in `table` (0: no expiry), for its L2 copy. */
function ttlOf(table: CacheTable<unknown>, opts: PutOptions | undefined): number {
  if (opts?.expiresAt !== undefined) {
    const at = opts.expiresAt instanceof Date ? opts.expiresAt.getTime() : opts.expiresAt;
    return Math.max(1, at - Date.now());
  }
  const sec = opts?.maxAgeSec ?? (table as unknown as { meta: { options: { defaultMaxAgeSec: number } } }).meta.options.defaultMaxAgeSec;
  return sec > 0 ? sec * 1000 : 0;
}
