import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { openCache, type PileCache } from '@pile/cache';
import { HostProcess } from '../../../benchmarks/src/HostProcess';
import { findRedisServer, RedisServer } from '../../../benchmarks/src/RedisServer';
import { syncCache, type SyncedCache, type SyncOptions } from '../src';

export { HostProcess, RedisServer };

/**
 * A redis-server from PATH on a free loopback port, persistence off. Without one the suite fails
 * (it never skips): CI installs it (.ci/run).
 */
export async function startRedis(): Promise<RedisServer> {
  return RedisServer.start(findRedisServerOrFail());
}

/** A fresh temp dir, removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-sync-'));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Polls `cond` every 2 ms until true or `ms` passed; false on timeout. */
export async function until(cond: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 2));
  }
  return true;
}

/** A sync host in a child process (test/fixtures/host.ts) on `dir`, following Redis at `url`; resolves once it runs. */
export function startHost(dir: string, url: string, maxLag = 1000, env: Record<string, string> = {}): Promise<HostProcess> {
  return HostProcess.start(path.join(__dirname, 'fixtures', 'host.ts'), [dir, url, String(maxLag)], {
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    env,
  });
}

/** A host of the in-process tests: a cache on its own pile directory, synced. */
export interface SyncHost {
  cache: PileCache;
  synced: SyncedCache;
  dir: string;
}

/** What {@link syncSuite} gives a describe block: its Redis, an admin connection and its hosts. */
export interface SyncSuite {
  redis: RedisServer;
  url: string;
  admin: Redis;
  /** A fresh pile directory, removed after the suite. */
  tempDir(): string;
  /** Opens a synced cache on `dir` (a fresh one by default); waits until it caught up unless `wait` is false. Closed after each test. */
  host(o?: { dir?: string; maxLag?: number; wait?: boolean; sync?: Partial<SyncOptions> }): Promise<SyncHost>;
  /** Closes a host before the end of its test. */
  shut(h: SyncHost): Promise<void>;
  /** Starts a new redis-server on `port` (after the test killed this one). */
  restartRedis(port: number): Promise<void>;
}

/**
 * The setup every in-process sync test file shares, registered as mocha hooks of the calling
 * describe block: one redis-server for the block, hosts closed and Redis flushed after each test.
 */
export function syncSuite(adminOptions: RedisOptions = {}): SyncSuite {
  const cleanups: (() => void)[] = [];
  const live = new Set<SyncHost>();
  const env = {
    tempDir(): string {
      const t = tempDir();
      cleanups.push(t.cleanup);
      return t.dir;
    },
    async host(o: { dir?: string; maxLag?: number; wait?: boolean; sync?: Partial<SyncOptions> } = {}): Promise<SyncHost> {
      const dir = o.dir ?? env.tempDir();
      const cache = openCache({ dir, segmentSize: 1 << 22, sweepIntervalSec: 0 });
      const synced = syncCache(cache, { redis: env.url, maxLag: o.maxLag ?? 2000, ...o.sync });
      const h = { cache, synced, dir };
      live.add(h);
      if (o.wait !== false) await synced.ready;
      return h;
    },
    async shut(h: SyncHost): Promise<void> {
      live.delete(h);
      await h.synced.close();
      h.cache.close();
    },
    async restartRedis(port: number): Promise<void> {
      env.redis = await RedisServer.start(findRedisServerOrFail(), port);
    },
  } as SyncSuite;
  before(async () => {
    env.redis = await startRedis();
    env.url = `redis://127.0.0.1:${env.redis.port}`;
    env.admin = new Redis(env.url, adminOptions);
    env.admin.on('error', () => undefined);
  });
  after(async () => {
    env.admin?.disconnect();
    await env.redis?.stop();
    for (const c of cleanups) c();
  });
  afterEach(async () => {
    for (const h of live) await env.shut(h);
    await env.admin.flushall();
  });
  return env;
}

/** The redis-server binary, or a plain failure saying it is missing. */
export function findRedisServerOrFail(): string {
  const bin = findRedisServer();
  if (bin === undefined)
    throw new Error(
      'redis-server is not on PATH: the @pile/sync tests need a real Redis (apt-get install -y redis-server); they are not skipped',
    );
  return bin;
}
