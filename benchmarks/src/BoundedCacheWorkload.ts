import { LRUCache } from 'lru-cache';
import { loadPileCache } from './PileCacheLoader';
import { perSecond } from './Measure';
import { Progress } from './Progress';
import { makeTempDir, removeDir } from './TempDir';
import { fmtBytes, fmtCount, fmtRate, fmtRatio } from './Format';
import { peerRows } from './Targets';
import { num, type Params, type PeerResult, type RunContext, type Summary, type TargetResult, type Workload } from './Workload';

const PEERS: Record<string, string> = {
  'pile-durable': "@pile/cache 'durable' (mapped)",
  'pile-speculative': "@pile/cache 'speculative' (mapped)",
  'lru-cache': 'lru-cache (maxSize)',
};

/** Puts between two clock readings and two "has it started evicting" checks. */
const STEP = 1024;
/** The bar of the issue: the last tenth's put rate at least this share of the first tenth's. */
const FLAT = 0.7;

/** A store bounded by bytes, as a cache user sees it. */
interface BoundedStore {
  put(key: string, value: string): void;
  /** Entries held now. */
  count(): number;
  /** True once the store has dropped an entry to stay within its memory. */
  evicting(): boolean;
  close(): void;
}

function openStore(peer: string, params: Params, dir: string | undefined): BoundedStore {
  const maxMemory = num(params, 'maxMemory');
  if (peer === 'lru-cache') {
    // Sized by the bytes of keys and values, the same budget the pile gets for everything.
    const c = new LRUCache<string, string>({ maxSize: maxMemory, sizeCalculation: (v, k) => v.length + k.length });
    let puts = 0;
    // Every key is new: it holds fewer than were put once it evicted.
    return {
      put: (k, v) => {
        c.set(k, v);
        puts++;
      },
      count: () => c.size,
      evicting: () => c.size < puts,
      close: () => c.clear(),
    };
  }
  const { openCache } = loadPileCache();
  const cache = openCache({ dir: dir!, maxMemory, segmentSize: num(params, 'segmentSize'), sweepIntervalSec: 0 });
  const table = cache.table<string>('bounded', { collisionMode: peer === 'pile-durable' ? 'durable' : 'speculative' });
  // A speculative table also drops entries when a probe window is full; the memory limit is what is measured.
  return {
    put: (k, v) => {
      table.put(k, v);
    },
    count: () => table.count,
    evicting: () => table.stats.evicted > 0,
    close: () => cache.close(),
  };
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  const dir = peer === 'lru-cache' ? undefined : makeTempDir(`cache-bounded-${peer}`);
  try {
    const store = openStore(peer, params, dir);
    const pad = 'v'.repeat(Math.max(0, num(params, 'valueBytes') - 8));
    // times[s] = ms since the start after (s + 1) * STEP puts.
    const times: number[] = [];
    const t0 = performance.now();
    let i = 0;
    // Fill until the store first evicts to stay within its memory: what it holds then is what fits.
    let fit = 0;
    while (fit === 0) {
      for (const end = i + STEP; i < end; i++) store.put(`key:${i}`, pad + i);
      times.push(performance.now() - t0);
      if (store.evicting()) fit = store.count();
      if (i > 1e9) throw new Error(`cache-bounded: ${peer} never evicted`);
    }
    const total = Math.ceil((10 * fit) / STEP) * STEP;
    const progress = new Progress(`cache-bounded: ${PEERS[peer] ?? peer}`, total);
    while (i < total) {
      for (const end = i + STEP; i < end; i++) store.put(`key:${i}`, pad + i);
      times.push(performance.now() - t0);
      progress.update(i);
    }
    progress.stop();
    const held = store.count();
    store.close();
    // Put rate of each tenth of the run, from the readings closest to its bounds.
    const steps = times.length;
    const tenths: [number, number][] = [];
    for (let k = 0; k < 10; k++) {
      const a = Math.round((k * steps) / 10);
      const b = Math.round(((k + 1) * steps) / 10);
      const ms = times[b - 1]! - (a === 0 ? 0 : times[a - 1]!);
      tenths.push([k + 1, perSecond((b - a) * STEP, ms)]);
    }
    const first = tenths[0]![1];
    const last = tenths[9]![1];
    return {
      peer,
      label: PEERS[peer] ?? peer,
      figures: {
        fit,
        puts: total,
        held,
        totalMs: times[steps - 1]!,
        firstTenthPerSec: first,
        lastTenthPerSec: last,
        minTenthPerSec: Math.min(...tenths.map((t) => t[1])),
        lastOverFirst: last / first,
      },
      series: { putsPerSec: tenths },
    };
  } finally {
    if (dir !== undefined) removeDir(dir);
  }
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  return Object.keys(PEERS).map((peer) => ctx.child(peer, params));
}

function flatTarget(peers: readonly PeerResult[], peer: string): TargetResult {
  const p = peers.find((r) => r.peer === peer);
  const statement = `${PEERS[peer]} at its memory limit: last tenth's put rate ≥ ${FLAT * 100} % of the first tenth's`;
  const required = `≥ ${fmtRatio(FLAT)}`;
  const first = p?.figures['firstTenthPerSec'];
  const last = p?.figures['lastTenthPerSec'];
  if (p === undefined || p.error !== undefined || p.skipped !== undefined || first === undefined || last === undefined) {
    return { statement, measured: 'not measured', ratio: Number.NaN, required, met: null };
  }
  const ratio = last / first;
  return { statement, measured: `first tenth ${fmtRate(first)}, last tenth ${fmtRate(last)}`, ratio, required, met: ratio >= FLAT };
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const ok = peers.filter((p) => p.error === undefined && p.skipped === undefined);
  return {
    ratios: {},
    targets: [flatTarget(peers, 'pile-durable'), flatTarget(peers, 'pile-speculative')],
    tables: [
      {
        title: `Put rate per tenth of a run of 10x more puts than fit in ${fmtBytes(num(params, 'maxMemory'))}`,
        columns: ['cache', 'entries that fit', 'puts', 'first tenth', 'last tenth', 'slowest tenth', 'last / first'],
        rows: peerRows(peers, 7, (f) => [
          fmtCount(f['fit'] ?? 0),
          fmtCount(f['puts'] ?? 0),
          fmtRate(f['firstTenthPerSec']),
          fmtRate(f['lastTenthPerSec']),
          fmtRate(f['minTenthPerSec']),
          fmtRatio(f['lastOverFirst'] ?? Number.NaN),
        ]),
      },
    ],
    charts: [
      {
        kind: 'lines',
        title: 'Puts per second in each tenth of the run',
        xLabel: 'tenth of the run',
        yLabel: 'puts/s',
        lines: ok.map((p) => ({ label: p.label, points: p.series?.['putsPerSec'] ?? [] })),
      },
    ],
    notes: [
      `Each store gets the same byte budget: @pile/cache \`maxMemory: ${fmtBytes(num(params, 'maxMemory'))}\` (segments of ${fmtBytes(num(params, 'segmentSize'))}) for its index, entries and headers; lru-cache \`maxSize\` of the same number, counting only key and value lengths, so it holds more entries.`,
      `String keys \`key:<i>\`, string values of about ${num(params, 'valueBytes')} bytes, every key new: the store fills, then evicts one entry per put. "Entries that fit" is the count when it first evicted; the run is 10 times that many puts, timed every ${fmtCount(STEP)} puts, split into tenths.`,
      'The first tenth is the fill (with the index growing); the last is the steady state at the limit, where every put also evicts. Each store runs once, in its own child process.',
    ],
  };
}

export const boundedCacheWorkload: Workload = {
  name: 'cache-bounded',
  title: 'Bounded cache',
  description:
    'Put rate of a cache at its memory limit: @pile/cache durable and speculative tables under `maxMemory`, and lru-cache with `maxSize`, each given 10x more puts than fit; the put rate of each tenth of the run shows whether it stays flat.',
  params: (o) => ({
    maxMemory: o.smoke ? 4 << 20 : 32 << 20,
    segmentSize: o.smoke ? 1 << 20 : 4 << 20,
    valueBytes: 48,
  }),
  run,
  measure,
  summarize,
};
