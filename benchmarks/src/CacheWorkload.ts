import { LRUCache } from 'lru-cache';
import { open as openLmdb } from 'lmdb';
import { pack, unpack } from 'msgpackr';
import { loadPileCache } from './PileCacheLoader';
import { consume, gcPauses, median, memoryAfterGc, perSecond, quantile, randomIndexes } from './Measure';
import { Progress, STEP_MASK } from './Progress';
import { cacheKey, product, ProductSchema, type Product } from './Records';
import { childWithRedis } from './RedisServer';
import { makeTempDir, removeDir } from './TempDir';
import { runAlternating } from './Alternation';
import { peerRows, ratios, target } from './Targets';
import { fmtBytes, fmtCount, fmtMs, fmtRate, fmtUs } from './Format';
import { num, type Figures, type Params, type PeerResult, type RunContext, type Summary, type Workload } from './Workload';

const PEERS: Record<string, string> = {
  'pile-cache': '@pile/cache (memory)',
  'pile-cache-mapped': '@pile/cache (mapped)',
  'lru-cache': 'lru-cache',
  lmdb: 'lmdb',
  redis: 'Redis (ioredis, loopback)',
};

/** A keyed store as a cache user sees it; Redis's calls are asynchronous. */
interface KeyedStore {
  /** Inserts entries [from, to) (lmdb and Redis batch them). */
  fill(from: number, to: number): void | Promise<void>;
  get(key: string): Product | undefined | Promise<Product | undefined>;
  put(key: string, value: Product): void | Promise<void>;
  close(): void | Promise<void>;
  figures?(): Promise<Figures>;
}

async function openStore(peer: string, n: number, dir: string | undefined, redisPort: number): Promise<KeyedStore> {
  switch (peer) {
    case 'pile-cache':
    case 'pile-cache-mapped': {
      const { openCache } = loadPileCache();
      const cache = peer === 'pile-cache' ? openCache() : openCache({ dir: dir! });
      const table = cache.table<Product>('products', { schema: ProductSchema, collisionMode: 'durable' });
      return {
        fill(from, to) {
          for (let i = from; i < to; i++) table.put(cacheKey(i), product(i));
        },
        get: (key) => table.get(key),
        put(key, value) {
          table.put(key, value);
        },
        close: () => cache.close(),
      };
    }
    case 'lru-cache': {
      const c = new LRUCache<string, Product>({ max: n });
      return {
        fill(from, to) {
          for (let i = from; i < to; i++) c.set(cacheKey(i), product(i));
        },
        get: (key) => c.get(key),
        put(key, value) {
          c.set(key, value);
        },
        close: () => c.clear(),
      };
    }
    case 'lmdb': {
      const db = openLmdb<Product, string>({ path: dir!, compression: false, noSync: true });
      return {
        fill(from, to) {
          db.transactionSync(() => {
            for (let i = from; i < to; i++) db.putSync(cacheKey(i), product(i));
          });
        },
        get: (key) => db.get(key),
        put(key, value) {
          db.putSync(key, value);
        },
        close: () => db.close(),
      };
    }
    case 'redis': {
      const { Redis } = await import('ioredis');
      const redis = new Redis({ port: redisPort, host: '127.0.0.1', lazyConnect: true, enableAutoPipelining: false });
      await redis.connect();
      await redis.flushdb();
      return {
        async fill(from, to) {
          const p = redis.pipeline();
          for (let i = from; i < to; i++) p.set(cacheKey(i), pack(product(i)));
          await p.exec();
        },
        async get(key) {
          const b = await redis.getBuffer(key);
          return b === null ? undefined : (unpack(b) as Product);
        },
        async put(key, value) {
          await redis.set(key, pack(value));
        },
        async close() {
          await redis.flushdb();
          await redis.quit();
        },
        async figures() {
          const info = await redis.info('memory');
          const m = /used_memory:(\d+)/.exec(info);
          return m === null ? {} : { serverUsedMemory: Number(m[1]) };
        },
      };
    }
    default:
      throw new Error(`cache workload: unknown peer ${peer}`);
  }
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  const n = num(params, 'n');
  const isRedis = peer === 'redis';
  // Redis answers one awaited round trip at a time, tens of µs each: fewer operations keep its run short.
  const ops = isRedis ? Math.min(num(params, 'ops'), num(params, 'redisOps')) : num(params, 'ops');
  const samples = Math.min(ops, num(params, 'latencySamples'));
  const dir = peer === 'lmdb' || peer === 'pile-cache-mapped' ? makeTempDir(`cache-${peer}`) : undefined;
  try {
    const store = await openStore(peer, n, dir, num(params, 'redisPort'));
    const progress = new Progress(`cache: fill ${PEERS[peer] ?? peer}`, n);
    const batch = peer === 'lmdb' ? 10_000 : STEP_MASK + 1;
    let t = performance.now();
    for (let from = 0; from < n; from += batch) {
      await store.fill(from, Math.min(n, from + batch));
      progress.update(from);
    }
    const fillMs = performance.now() - t;
    progress.stop();

    const mem = memoryAfterGc();
    const pauses = gcPauses(num(params, 'gcRuns'));

    // Keys are made after the memory figures so that they do not count in them.
    const idx = randomIndexes(n, ops, 7);
    const keys = Array.from(idx, cacheKey);
    const check = (v: Product | undefined, i: number): void => {
      if (v === undefined || v.id !== idx[i]) throw new Error(`cache workload: ${peer} get(${keys[i]}) missed or returned the wrong entry`);
      consume(v.price);
    };
    for (let i = 0; i < Math.min(ops, 10_000); i++) check(await store.get(keys[i]!), i);

    t = performance.now();
    if (isRedis) for (let i = 0; i < ops; i++) check(await store.get(keys[i]!), i);
    else for (let i = 0; i < ops; i++) check(store.get(keys[i]!) as Product | undefined, i);
    const getMs = performance.now() - t;

    const getLat = new Float64Array(samples);
    for (let i = 0; i < samples; i++) {
      const s = performance.now();
      const v = await store.get(keys[i]!);
      getLat[i] = performance.now() - s;
      check(v, i);
    }

    // Puts replace existing entries with a new value of the same shape (a cache refresh).
    t = performance.now();
    if (isRedis) for (let i = 0; i < ops; i++) await store.put(keys[i]!, product(idx[i]!));
    else for (let i = 0; i < ops; i++) store.put(keys[i]!, product(idx[i]!));
    const putMs = performance.now() - t;

    const putLat = new Float64Array(samples);
    for (let i = 0; i < samples; i++) {
      const v = product(idx[i]!);
      const s = performance.now();
      await store.put(keys[i]!, v);
      putLat[i] = performance.now() - s;
    }
    const extra = store.figures !== undefined ? await store.figures() : {};
    await store.close();
    const us = (a: Float64Array): number[] => Array.from(a, (x) => x * 1000);
    const g = us(getLat);
    const p = us(putLat);
    return {
      peer,
      label: PEERS[peer] ?? peer,
      figures: {
        fillMs,
        fillPerSec: perSecond(n, fillMs),
        getPerSec: perSecond(ops, getMs),
        putPerSec: perSecond(ops, putMs),
        getP50Us: median(g),
        getP99Us: quantile(g, 0.99),
        putP50Us: median(p),
        putP99Us: quantile(p, 0.99),
        heapUsed: mem.heapUsed,
        external: mem.external,
        rss: mem.rss,
        gcPauseMs: median(pauses),
        ops,
        ...extra,
      },
    };
  } finally {
    if (dir !== undefined) removeDir(dir);
  }
}

/**
 * The in-process stores run in alternating child processes (see runAlternating); Redis, whose
 * server the runner starts for it and which no target compares against, runs once.
 */
async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  const inProcess = Object.keys(PEERS).filter((peer) => peer !== 'redis');
  return [
    ...runAlternating(ctx, inProcess, params, num(params, 'processes'), 'getPerSec', 'get rate'),
    await childWithRedis(ctx, 'redis', PEERS['redis']!, params),
  ];
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const N = fmtCount(num(params, 'n'));
  const ok = peers.filter((p) => p.error === undefined && p.skipped === undefined);
  const redis = peers.find((p) => p.peer === 'redis');
  return {
    ratios: ratios(
      peers,
      ['pile-cache', 'pile-cache-mapped'],
      ['gcPauseMs', 'heapUsed', 'fillPerSec', 'getPerSec', 'putPerSec', 'getP99Us'],
    ),
    targets: [
      target(
        `Full-GC pause with ${N} cache entries alive: @pile/cache ≤ 1/50 of lru-cache's`,
        peers,
        'pile-cache',
        'lru-cache',
        'gcPauseMs',
        '<=',
        1 / 50,
        fmtMs,
      ),
      target("Cache get hits/s: @pile/cache ≥ 3x lmdb's get", peers, 'pile-cache', 'lmdb', 'getPerSec', '>=', 3, fmtRate),
      target(
        `Heap used with ${N} cache entries: @pile/cache ≤ 1/20 of lru-cache's`,
        peers,
        'pile-cache',
        'lru-cache',
        'heapUsed',
        '<=',
        1 / 20,
        fmtBytes,
      ),
    ],
    tables: [
      {
        title: `${N} entries (string keys, 5-field values)`,
        columns: [
          'cache',
          'fill',
          'get hits',
          'get p50',
          'get p99',
          'put (replace)',
          'put p50',
          'put p99',
          'heapUsed',
          'RSS',
          'full GC (median)',
        ],
        rows: peerRows(peers, 11, (f) => [
          fmtRate(f['fillPerSec']),
          fmtRate(f['getPerSec']),
          fmtUs(f['getP50Us']),
          fmtUs(f['getP99Us']),
          fmtRate(f['putPerSec']),
          fmtUs(f['putP50Us']),
          fmtUs(f['putP99Us']),
          fmtBytes(f['heapUsed']),
          fmtBytes(f['rss']),
          fmtMs(f['gcPauseMs']),
        ]),
      },
    ],
    charts: [
      {
        kind: 'bars',
        title: `Cache get hits per second, ${N} entries`,
        unit: 'gets/s',
        bars: ok.map((p) => ({ label: p.label, value: p.figures['getPerSec'] ?? 0, highlight: p.peer.startsWith('pile') })),
      },
      {
        kind: 'bars',
        title: `Cache put (replace) per second, ${N} entries`,
        unit: 'puts/s',
        bars: ok.map((p) => ({ label: p.label, value: p.figures['putPerSec'] ?? 0, highlight: p.peer.startsWith('pile') })),
      },
      {
        kind: 'bars',
        title: `Full-GC pause with ${N} entries alive`,
        unit: 'ms',
        bars: ok.map((p) => ({ label: p.label, value: p.figures['gcPauseMs'] ?? 0, highlight: p.peer.startsWith('pile') })),
      },
    ],
    notes: [
      `@pile/cache, lru-cache and lmdb each run in ${num(params, 'processes')} child processes, taking turns; each of their figures is the median over those processes. Redis runs once.`,
      `Gets: ${fmtCount(num(params, 'ops'))} hits on uniformly random keys, each checked; p50 / p99 from ${fmtCount(num(params, 'latencySamples'))} individually timed calls (performance.now() around each, so sub-µs figures carry its overhead). Puts replace existing entries with fresh values.`,
      '@pile/cache: a durable table with the zod schema (compiled codec), no capacity hint, so the fill includes its growth. lru-cache: `max: N`. lmdb: `compression: false, noSync: true` (like the pile, a write reaches the OS, not the disk, before it returns), fill in transactions of 10,000, each later put its own synchronous transaction (`putSync`).',
      redis?.skipped !== undefined
        ? `Redis: skipped (${redis.skipped}).`
        : `Redis: a redis-server started by the runner on a loopback port (no persistence); values packed with msgpackr; each get / put awaited before the next (${fmtCount(num(params, 'redisOps'))} operations), as a request handler would; the fill is pipelined in batches of 65,536. Its heapUsed and GC figures are the client's; the data lives in the server (its used_memory: ${fmtBytes(redis?.figures['serverUsedMemory'])}).`,
    ],
  };
}

export const cacheWorkload: Workload = {
  name: 'cache',
  title: 'Cache',
  description:
    'get / put per second and p50 / p99 latency of @pile/cache vs lru-cache vs lmdb, and vs Redis over loopback (ioredis) when a redis-server binary is on the PATH; memory and a forced full-GC pause with the entries alive.',
  params: (o) => ({
    n: o.n ?? (o.smoke ? 20_000 : 2_000_000),
    ops: o.ops ?? (o.smoke ? 20_000 : 1_000_000),
    redisOps: o.smoke ? 5_000 : 100_000,
    latencySamples: o.smoke ? 5_000 : 100_000,
    gcRuns: o.smoke ? 3 : 5,
    processes: o.smoke ? 1 : 3,
    redisPort: 0,
  }),
  run,
  measure,
  summarize,
};
