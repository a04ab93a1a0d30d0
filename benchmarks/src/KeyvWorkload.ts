import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { gcPauses, median, memoryAfterGc, perSecond } from './Measure';
import { Progress } from './Progress';
import { childWithRedis } from './RedisServer';
import { makeTempDir, removeDir } from './TempDir';
import { peerRows, ratios, target } from './Targets';
import { fmtBytes, fmtCount, fmtMs, fmtRate } from './Format';
import { num, type Params, type PeerResult, type RunContext, type Summary, type Workload } from './Workload';

const PEERS: Record<string, string> = {
  'keyv-pile': '@pile/keyv (KeyvPile)',
  'keyv-map': "Keyv's default Map store",
  'keyv-redis': '@keyv/redis (loopback)',
};

/** What a Keyv user caches: a small object, serialized by Keyv's JSON step. */
const value = (i: number): { id: number; name: string; tags: string[]; score: number } => ({
  id: i,
  name: `user ${i}`,
  tags: ['a', 'b'],
  score: i * 0.5,
});

interface KeyvLike {
  set(key: string, value: unknown, ttl?: number): Promise<boolean>;
  setMany(entries: { key: string; value: unknown }[]): Promise<boolean[]>;
  get(key: string): Promise<unknown>;
  disconnect(): Promise<void>;
}

async function openKeyv(peer: string, dir: string, redisPort: number): Promise<KeyvLike> {
  const { Keyv } = await import('keyv');
  if (peer === 'keyv-pile') {
    const { KeyvPile } = await import('@pile/keyv');
    return new Keyv({ store: new KeyvPile({ dir }) }) as unknown as KeyvLike;
  }
  if (peer === 'keyv-redis') {
    const { default: KeyvRedis } = await import('@keyv/redis');
    return new Keyv({ store: new KeyvRedis(`redis://127.0.0.1:${redisPort}`) }) as unknown as KeyvLike;
  }
  return new Keyv() as unknown as KeyvLike;
}

/**
 * A new Node process opens the directory through Keyv and reads one entry: what a restarted server
 * pays before its first cache hit. Timed from the process's spawn (wall) and from its first line
 * (requires, open and get); the child prints its own figures.
 */
function restartToFirstHit(dir: string, key: string): { wallMs: number; inProcessMs: number; openMs: number; getMs: number } {
  const script = `
    const t0 = performance.now();
    const { Keyv } = require(${JSON.stringify(require.resolve('keyv'))});
    const { KeyvPile } = require(${JSON.stringify(require.resolve('@pile/keyv'))});
    const t1 = performance.now();
    const keyv = new Keyv({ store: new KeyvPile({ dir: process.argv[1] }) });
    const t2 = performance.now();
    keyv.get(process.argv[2]).then(async (v) => {
      const t3 = performance.now();
      if (v === undefined) throw new Error('no hit after the restart');
      await keyv.disconnect();
      process.stdout.write(JSON.stringify({ inProcessMs: t3 - t0, openMs: t2 - t1, getMs: t3 - t2 }));
    });`;
  const start = performance.now();
  const r = spawnSync(process.execPath, ['-e', script, dir, key], { encoding: 'utf8', cwd: path.dirname(dir) });
  const wallMs = performance.now() - start;
  if (r.status !== 0) throw new Error(`keyv workload: the restarted process failed: ${r.stderr}`);
  return { wallMs, ...(JSON.parse(r.stdout) as { inProcessMs: number; openMs: number; getMs: number }) };
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  const n = num(params, 'n');
  const ops = peer === 'keyv-redis' ? Math.min(num(params, 'ops'), num(params, 'redisOps')) : num(params, 'ops');
  const tmp = makeTempDir(peer);
  const dir = path.join(tmp, 'pile');
  try {
    const keyv = await openKeyv(peer, dir, num(params, 'redisPort'));
    const progress = new Progress(`keyv: fill ${PEERS[peer] ?? peer}`, n);
    let t = performance.now();
    for (let from = 0; from < n; from += 1000) {
      const entries: { key: string; value: unknown }[] = [];
      for (let i = from; i < Math.min(n, from + 1000); i++) entries.push({ key: `k${i}`, value: value(i) });
      await keyv.setMany(entries);
      if ((from & 0xffff) === 0) progress.update(from);
    }
    const fillMs = performance.now() - t;
    progress.stop();
    // Each call awaited before the next, as a request handler makes them.
    t = performance.now();
    for (let i = 0; i < ops; i++) await keyv.set(`k${(i * 7919) % n}`, value(i));
    const setMs = performance.now() - t;
    t = performance.now();
    for (let i = 0; i < ops; i++) {
      const k = (i * 104729) % n;
      const v = (await keyv.get(`k${k}`)) as { id: number } | undefined;
      // The entry is value(k) or, when a set replaced it, value(i) with (i * 7919) % n === k.
      if (v === undefined || (v.id !== k && (v.id * 7919) % n !== k))
        throw new Error(`keyv workload: ${peer} get(k${k}) missed or was wrong`);
    }
    const getMs = performance.now() - t;
    const mem = memoryAfterGc();
    const pauses = gcPauses(num(params, 'gcRuns'));
    await keyv.disconnect();
    const restart = peer === 'keyv-pile' ? restartToFirstHit(dir, `k${n >> 1}`) : undefined;
    return {
      peer,
      label: PEERS[peer] ?? peer,
      figures: {
        fillMs,
        fillPerSec: perSecond(n, fillMs),
        setPerSec: perSecond(ops, setMs),
        getPerSec: perSecond(ops, getMs),
        heapUsed: mem.heapUsed,
        rss: mem.rss,
        gcPauseMs: median(pauses),
        ops,
        ...(restart === undefined
          ? {}
          : {
              restartWallMs: restart.wallMs,
              restartInProcessMs: restart.inProcessMs,
              restartOpenMs: restart.openMs,
              restartGetMs: restart.getMs,
            }),
      },
    };
  } finally {
    removeDir(tmp);
  }
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  return [
    ctx.child('keyv-pile', params),
    ctx.child('keyv-map', params),
    await childWithRedis(ctx, 'keyv-redis', PEERS['keyv-redis']!, params),
  ];
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const N = fmtCount(num(params, 'n'));
  const pile = peers.find((p) => p.peer === 'keyv-pile');
  const ok = peers.filter((p) => p.error === undefined && p.skipped === undefined);
  return {
    ratios: ratios(peers, ['keyv-pile'], ['gcPauseMs', 'heapUsed', 'setPerSec', 'getPerSec']),
    targets: [
      target(
        `Full-GC pause with ${N} Keyv entries alive: @pile/keyv ≤ 1/50 of Keyv's Map store`,
        peers,
        'keyv-pile',
        'keyv-map',
        'gcPauseMs',
        '<=',
        1 / 50,
        fmtMs,
      ),
      target(`Keyv get: @pile/keyv ≥ 3x @keyv/redis over loopback`, peers, 'keyv-pile', 'keyv-redis', 'getPerSec', '>=', 3, fmtRate),
    ],
    tables: [
      {
        title: `${N} entries through Keyv 5 (its JSON step), each call awaited`,
        columns: ['store', 'fill (setMany)', 'set', 'get', 'heapUsed', 'RSS', 'full GC (median)'],
        rows: peerRows(peers, 7, (f) => [
          fmtRate(f['fillPerSec']),
          fmtRate(f['setPerSec']),
          fmtRate(f['getPerSec']),
          fmtBytes(f['heapUsed']),
          fmtBytes(f['rss']),
          fmtMs(f['gcPauseMs']),
        ]),
      },
      {
        title: `@pile/keyv restart to first hit, ${N} entries (a new Node process)`,
        columns: ['spawn to first hit', 'first line to first hit', 'of which open (new KeyvPile)', 'of which the get'],
        rows: [
          [
            fmtMs(pile?.figures['restartWallMs']),
            fmtMs(pile?.figures['restartInProcessMs']),
            fmtMs(pile?.figures['restartOpenMs']),
            fmtMs(pile?.figures['restartGetMs']),
          ],
        ],
      },
    ],
    charts: [
      {
        kind: 'bars',
        title: `Keyv get per second, ${N} entries`,
        unit: 'gets/s',
        bars: ok.map((p) => ({ label: p.label, value: p.figures['getPerSec'] ?? 0, highlight: p.peer === 'keyv-pile' })),
      },
    ],
    notes: [
      `Each store in its own child process: ${N} entries filled with setMany in batches of 1,000, then ${fmtCount(num(params, 'ops'))} sets and as many gets on spread keys (${fmtCount(num(params, 'redisOps'))} for Redis, one round trip each), every get checked. Memory and GC pause are taken with the entries alive; Redis's are the client's (the data lives in the server).`,
      'Restart: after the writer disconnected, a new Node process requires keyv and @pile/keyv, opens the directory and gets one entry; "first line" excludes the process start itself.',
    ],
  };
}

export const keyvWorkload: Workload = {
  name: 'keyv',
  title: 'Keyv stores',
  description:
    "@pile/keyv beside Keyv's default Map store and @keyv/redis on a redis-server the runner starts on a loopback port, all through Keyv: set / get rates, heap and a forced full-GC pause with the entries alive, and @pile/keyv's restart to its first hit.",
  params: (o) => ({
    n: o.n ?? (o.smoke ? 5_000 : 1_000_000),
    ops: o.ops ?? (o.smoke ? 2_000 : 100_000),
    redisOps: o.smoke ? 1_000 : 50_000,
    gcRuns: o.smoke ? 3 : 5,
    redisPort: 0,
  }),
  run,
  measure,
  summarize,
};
