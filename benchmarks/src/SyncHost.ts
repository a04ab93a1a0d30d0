/**
 * One host of the `sync` workload, in its own process and pile directory:
 * `node dist/SyncHost.js <dir> <redis url>`. Driven over IPC ({ id, op, ... } → { id, result }).
 */
import { openCache } from '@pile/cache';
import { serveHost, type HostRequest } from './HostProcess';
import { syncCache } from '@pile/sync';

const [dir = '', url = ''] = process.argv.slice(2);
const now = (): number => performance.timeOrigin + performance.now();
/** When each watched key was dropped here: propagation is measured against the writer's clock of the same machine. */
const dropped = new Map<string, number>();
const cache = openCache({ dir, sweepIntervalSec: 0 });
const started = now();
const synced = syncCache(cache, {
  redis: url,
  maxLag: 2000,
  onInvalidate: (_table, key) => {
    if (typeof key === 'string' && key.startsWith('w')) dropped.set(key, now());
  },
});
const t = synced.table<string>('t', { collisionMode: 'durable', initialCapacity: 1024 });
const table = t.table;
const applied0 = synced.stats.applied;
let caughtUp: { ms: number; replayed: number } | undefined;
void synced.ready.then(() => {
  caughtUp = { ms: now() - started, replayed: synced.stats.applied - applied0 };
});

interface Msg extends HostRequest {
  from?: number;
  to?: number;
  gen?: number;
  n?: number;
  ms?: number;
  keys?: string[];
}

async function handle(m: Msg): Promise<unknown> {
  const from = m.from ?? 0;
  const to = m.to ?? 0;
  switch (m.op) {
    case 'fill':
      for (let i = from; i < to; i++) await t.getOrLoad(`k${i}`, () => `${i}:${m.gen}`);
      return table.count;
    case 'put':
      for (let i = from; i < to; i++) {
        table.put(`k${i}`, `${i}:${m.gen}`);
        if ((i & 15) === 15) await new Promise((r) => setImmediate(r));
      }
      return to - from;
    case 'watchPut': {
      // Lone writes, spaced out: each is its own entry; returns when each was written.
      const at: number[] = [];
      for (let i = 0; i < (m.n ?? 0); i++) {
        at.push(now());
        table.put(`w${i}`, 'v');
        await new Promise((r) => setTimeout(r, m.ms ?? 2));
      }
      return at;
    }
    case 'watchSeed':
      for (let i = 0; i < (m.n ?? 0); i++) table.put(`w${i}`, 'seed');
      dropped.clear();
      return true;
    case 'watched': {
      const out: (number | null)[] = [];
      for (let i = 0; i < (m.n ?? 0); i++) out.push(dropped.get(`w${i}`) ?? null);
      return out;
    }
    case 'read': {
      let present = 0;
      const bad: number[] = [];
      for (let i = from; i < to; i++) {
        const v = table.get(`k${i}`);
        if (v === undefined) continue;
        present++;
        if (m.gen !== undefined && i < (m.n ?? 0) && v !== `${i}:${m.gen}`) bad.push(i);
      }
      return { present, stale: bad.length };
    }
    case 'hitRatio': {
      // Uniform random reads through getOrLoad for m.ms milliseconds.
      const end = now() + (m.ms ?? 1000);
      let hits = 0;
      let total = 0;
      while (now() < end) {
        for (let j = 0; j < 256; j++) {
          const i = Math.floor(Math.random() * to);
          const hit = table.get(`k${i}`) !== undefined;
          if (hit) hits++;
          else await t.getOrLoad(`k${i}`, () => `${i}:loaded`);
          total++;
        }
        await new Promise((r) => setImmediate(r));
      }
      return { hits, total };
    }
    case 'stats':
      return { sync: synced.stats, caughtUp };
    default:
      return undefined; // ready, drain, close: serveHost
  }
}

serveHost({ synced, cache }, handle);
