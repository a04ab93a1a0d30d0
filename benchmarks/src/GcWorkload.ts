import { LRUCache } from 'lru-cache';
import { open as openLmdb } from 'lmdb';
import { openPile, type PilePointer } from '@pile/core';
import { consume, gcPauses, median, memoryAfterGc, perSecond, randomIndexes } from './Measure';
import { Progress, STEP_MASK } from './Progress';
import { product, ProductSchema, type Product } from './Records';
import { makeTempDir, removeDir } from './TempDir';
import { figure, peerRows, ratios, target } from './Targets';
import { fmtBytes, fmtCount, fmtMs, fmtRate } from './Format';
import { num, type Params, type PeerResult, type RunContext, type Summary, type Workload } from './Workload';

/** The N records held in one store, addressed by their id 0..N-1. */
interface Store {
  /** Builds records [from, to). */
  putRange(from: number, to: number): void;
  /** One pass over every record; returns how many were seen. */
  enumerate(): number;
  get(id: number): Product | undefined;
  close(): void | Promise<void>;
}

const PEERS: Record<string, string> = {
  map: 'Map',
  'lru-cache': 'lru-cache',
  'pile-typed': 'pile (memory, typed)',
  'pile-generic': 'pile (memory, generic)',
  'pile-mapped': 'pile (mapped, typed)',
  lmdb: 'lmdb',
};

/** lmdb writes in transactions of this many puts. */
const LMDB_BATCH = 10_000;

/** Map and lru-cache: JS objects on the heap, behind the same four calls. */
function objectStore(m: {
  set(k: number, v: Product): unknown;
  values(): Iterable<Product>;
  get(k: number): Product | undefined;
  clear(): void;
}): Store {
  return {
    putRange(from, to) {
      for (let i = from; i < to; i++) m.set(i, product(i));
    },
    enumerate() {
      let c = 0;
      for (const v of m.values()) {
        consume(v.price);
        c++;
      }
      return c;
    },
    get: (id) => m.get(id),
    close: () => m.clear(),
  };
}

function openStore(peer: string, n: number, dir: string | undefined): Store {
  switch (peer) {
    case 'map':
      return objectStore(new Map<number, Product>());
    case 'lru-cache':
      return objectStore(new LRUCache<number, Product>({ max: n }));
    case 'pile-typed':
    case 'pile-mapped':
    case 'pile-generic': {
      // The user's index: pointers in a Float64Array (pointers are safe integers), nothing per record on the heap.
      const pile = openPile(peer === 'pile-mapped' ? { dir: dir! } : {});
      const ptrs = new Float64Array(n);
      if (peer === 'pile-generic') {
        return {
          putRange(from, to) {
            for (let i = from; i < to; i++) ptrs[i] = pile.put(product(i));
          },
          enumerate() {
            for (let i = 0; i < n; i++) consume(pile.get<Product>(ptrs[i] as PilePointer).price);
            return n;
          },
          get: (id) => pile.get<Product>(ptrs[id] as PilePointer),
          close: () => pile.close(),
        };
      }
      const view = pile.schema('product', ProductSchema);
      return {
        putRange(from, to) {
          for (let i = from; i < to; i++) ptrs[i] = view.put(product(i));
        },
        enumerate() {
          for (let i = 0; i < n; i++) consume(view.get(ptrs[i] as PilePointer).price);
          return n;
        },
        get: (id) => view.get(ptrs[id] as PilePointer),
        close: () => pile.close(),
      };
    }
    case 'lmdb': {
      const db = openLmdb<Product, number>({ path: dir!, compression: false, noSync: true });
      return {
        putRange(from, to) {
          for (let b = from; b < to; b += LMDB_BATCH) {
            const end = Math.min(to, b + LMDB_BATCH);
            db.transactionSync(() => {
              for (let i = b; i < end; i++) db.putSync(i, product(i));
            });
          }
        },
        enumerate() {
          let c = 0;
          for (const { value } of db.getRange()) {
            consume(value.price);
            c++;
          }
          return c;
        },
        get: (id) => db.get(id),
        close: () => db.close(),
      };
    }
    default:
      throw new Error(`gc workload: unknown peer ${peer}`);
  }
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  const n = num(params, 'n');
  const ops = num(params, 'ops');
  const gcRuns = num(params, 'gcRuns');
  const dir = peer === 'pile-mapped' || peer === 'lmdb' ? makeTempDir(`gc-${peer}`) : undefined;
  try {
    const baseline = memoryAfterGc();
    const store = openStore(peer, n, dir);
    // GC pause at N/8, N/4, N/2 for the pause-vs-N curve, measured with the build clock stopped.
    const checkpoints = [n / 8, n / 4, n / 2].map(Math.floor).filter((c) => c > 0 && c < n);
    const curve: [number, number][] = [];
    const progress = new Progress(`gc: build ${PEERS[peer] ?? peer}`, n);
    let buildMs = 0;
    let done = 0;
    while (done < n) {
      const next = Math.min(n, done + STEP_MASK + 1, checkpoints[0] ?? n);
      const t = performance.now();
      store.putRange(done, next);
      buildMs += performance.now() - t;
      done = next;
      progress.update(done);
      if (done === checkpoints[0]) {
        checkpoints.shift();
        curve.push([done, median(gcPauses(3))]);
      }
    }
    progress.stop();

    const mem = memoryAfterGc();
    const pauses = gcPauses(gcRuns);
    curve.push([n, median(pauses)]);

    let t = performance.now();
    const seen = store.enumerate();
    const enumerateMs = performance.now() - t;
    if (seen !== n) throw new Error(`gc workload: ${peer} enumerated ${seen} records, expected ${n}`);

    const keys = randomIndexes(n, ops);
    // A short warm-up so the JIT has compiled the get path before the clock runs.
    for (let i = 0; i < Math.min(ops, 10_000); i++) consume(store.get(keys[i]!)!.price);
    t = performance.now();
    for (let i = 0; i < ops; i++) {
      const v = store.get(keys[i]!);
      if (v === undefined || v.id !== keys[i]) throw new Error(`gc workload: ${peer} get(${keys[i]}) returned the wrong record`);
      consume(v.price);
    }
    const getMs = performance.now() - t;

    // The data is still referenced here, so every figure above was taken with it alive.
    await store.close();
    return {
      peer,
      label: PEERS[peer] ?? peer,
      figures: {
        buildMs,
        buildPerSec: perSecond(n, buildMs),
        enumerateMs,
        enumeratePerSec: perSecond(n, enumerateMs),
        getPerSec: perSecond(ops, getMs),
        heapUsed: mem.heapUsed,
        external: mem.external,
        arrayBuffers: mem.arrayBuffers,
        rss: mem.rss,
        baselineHeapUsed: baseline.heapUsed,
        baselineRss: baseline.rss,
        gcPauseMs: median(pauses),
        gcPauseMaxMs: Math.max(...pauses),
      },
      series: { gcPause: curve },
    };
  } finally {
    if (dir !== undefined) removeDir(dir);
  }
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const n = num(params, 'n');
  const N = fmtCount(n);
  const targets = [];
  for (const pile of ['pile-typed', 'pile-mapped']) {
    targets.push(
      target(`Full-GC pause with ${N} records alive: pile ≤ 1/100 of Map's`, peers, pile, 'map', 'gcPauseMs', '<=', 1 / 100, fmtMs),
      target(`Heap used with ${N} records: pile ≤ 1/50 of Map's`, peers, pile, 'map', 'heapUsed', '<=', 1 / 50, fmtBytes),
      target(`Build rate: pile ≥ 2x Map's`, peers, pile, 'map', 'buildPerSec', '>=', 2, fmtRate),
      target(`Random get: pile ≥ 3x lmdb's`, peers, pile, 'lmdb', 'getPerSec', '>=', 3, fmtRate),
      target(`Random get: pile within 2x of Map's (≥ 1/2 of its rate)`, peers, pile, 'map', 'getPerSec', '>=', 1 / 2, fmtRate),
    );
  }
  const ok = peers.filter((p) => p.error === undefined && p.skipped === undefined);
  return {
    ratios: ratios(
      peers,
      ['pile-typed', 'pile-generic', 'pile-mapped'],
      ['gcPauseMs', 'heapUsed', 'rss', 'buildPerSec', 'enumeratePerSec', 'getPerSec'],
    ),
    targets,
    tables: [
      {
        title: `${N} records of { id, name, price, score, active }`,
        columns: ['store', 'build', 'build rate', 'enumerate', 'random get', 'heapUsed', 'external', 'RSS', 'full GC (median)'],
        rows: peerRows(peers, 9, (f) => [
          fmtMs(f['buildMs']),
          fmtRate(f['buildPerSec']),
          fmtRate(f['enumeratePerSec']),
          fmtRate(f['getPerSec']),
          fmtBytes(f['heapUsed']),
          fmtBytes(f['external']),
          fmtBytes(f['rss']),
          fmtMs(f['gcPauseMs']),
        ]),
      },
    ],
    charts: [
      {
        kind: 'lines',
        title: 'Forced full-GC pause vs records alive',
        xLabel: 'records',
        yLabel: 'ms',
        lines: ok.map((p) => ({ label: p.label, points: p.series?.['gcPause'] ?? [] })),
      },
      {
        kind: 'bars',
        title: `Build rate, ${N} records`,
        unit: 'records/s',
        bars: ok.map((p) => ({ label: p.label, value: p.figures['buildPerSec'] ?? 0, highlight: p.peer.startsWith('pile') })),
      },
      {
        kind: 'bars',
        title: `Random get rate, ${N} records`,
        unit: 'gets/s',
        bars: ok.map((p) => ({ label: p.label, value: p.figures['getPerSec'] ?? 0, highlight: p.peer.startsWith('pile') })),
      },
      {
        kind: 'bars',
        title: `Heap used with ${N} records alive`,
        unit: 'bytes',
        bars: ok.map((p) => ({ label: p.label, value: p.figures['heapUsed'] ?? 0, highlight: p.peer.startsWith('pile') })),
      },
    ],
    notes: [
      "Each store runs in its own child process (`node --expose-gc --max-old-space-size=8192`). A pile's user index is a Float64Array of pointers (one per id), which is counted in `external`, not in the heap.",
      `Full GC: \`gc()\` (a full, non-incremental collection) timed with performance.now(), median of ${num(params, 'gcRuns')} while the data is referenced; the curve's earlier points are medians of 3, taken during the build with its clock stopped.`,
      `Random get: ${fmtCount(num(params, 'ops'))} gets of uniformly random ids, each result checked; the pile decodes the whole record on each get, as do lmdb (msgpackr) and every other peer's read of a live object.`,
      "lmdb: `compression: false, noSync: true` (like the mapped pile, writes reach the OS page cache, not the disk, before returning), puts batched in synchronous transactions of 10,000; its RSS includes the mapped file pages it touched, as does the mapped pile's.",
      figure(peers, 'map', 'baselineHeapUsed') !== undefined
        ? `Heap of an empty child before the build: ${fmtBytes(figure(peers, 'map', 'baselineHeapUsed'))}; the figures above are absolute, not net of it.`
        : '',
    ].filter((s) => s !== ''),
  };
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  return Object.keys(PEERS).map((peer) => ctx.child(peer, params));
}

export const gcWorkload: Workload = {
  name: 'gc',
  title: 'GC and memory',
  description:
    'N records held as plain objects in a Map, in lru-cache, in in-memory piles (typed and generic), in a mapped pile and in lmdb: build, one enumeration pass, random get, memory and a forced full-GC pause with the data alive.',
  params: (o) => ({ n: o.n ?? (o.smoke ? 20_000 : 5_000_000), ops: o.ops ?? (o.smoke ? 20_000 : 1_000_000), gcRuns: o.smoke ? 3 : 5 }),
  run,
  measure,
  summarize,
};
