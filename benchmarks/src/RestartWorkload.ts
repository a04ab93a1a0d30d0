import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openPile } from '@pile/core';
import { RESULT_MARKER } from './ChildRunner';
import { loadPileCache } from './PileCacheLoader';
import { median, perSecond } from './Measure';
import { Progress, STEP_MASK } from './Progress';
import { cacheKey, product, ProductSchema } from './Records';
import { PILE_STORES, RESTART_FILES } from './RestartFiles';
import { makeTempDir, removeDir } from './TempDir';
import { figure, peerRows, target } from './Targets';
import { fmtBytes, fmtCount, fmtMs } from './Format';
import {
  num,
  str,
  type Figures,
  type Params,
  type PeerResult,
  type RunContext,
  type Summary,
  type TargetResult,
  type Workload,
} from './Workload';

const STORES: Record<string, string> = {
  node: 'node, nothing opened (floor)',
  pile: 'mapped pile, typed records, 64 MiB segments',
  'pile-256m': 'mapped pile, typed records, 256 MiB segments',
  'pile-1g': 'mapped pile, typed records, 1 GiB segments',
  generic: 'mapped pile, generic records, 64 MiB segments',
  'generic-256m': 'mapped pile, generic records, 256 MiB segments',
  'generic-1g': 'mapped pile, generic records, 1 GiB segments',
  cache: '@pile/cache (durable table)',
  json: 'rebuild Map from JSON file',
  lmdb: 'lmdb',
};

/** The bar on the time from openPile's return to the first record in hand (schema and index root included). */
const FIRST_GET_BAR_MS = 5;

/** Owner tag of the pointer-index raw block the setup writes. */
const INDEX_TAG = 0x42454e43;
const MiB = 1 << 20;

function diskBytes(p: string): number {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.size;
  return fs.readdirSync(p).reduce((sum, f) => sum + diskBytes(path.join(p, f)), 0);
}

/** Child side: writes one store's copy of the N records under params.dir and closes it cleanly. */
async function setup(store: string, n: number, dir: string): Promise<Figures> {
  const progress = new Progress(`restart: write ${store}`, n);
  const t = performance.now();
  let target: string;
  switch (PILE_STORES.includes(store) ? 'pile' : store) {
    case 'pile': {
      target = path.join(dir, store);
      // The index is one raw block, so it must fit a segment: grow the segment for large N.
      let segmentSize = (store.endsWith('-1g') ? 1024 : store.endsWith('-256m') ? 256 : 64) * MiB;
      while (segmentSize < n * 8 * 2) segmentSize *= 2;
      const pile = openPile({ dir: target, segmentSize });
      const indexPtr = pile.allocRaw(n * 8, INDEX_TAG);
      const raw = pile.rawBuffer(indexPtr);
      const index = new Float64Array(raw.buffer, raw.byteOffset, n);
      const typed = store.startsWith('generic') ? undefined : pile.schema('product', ProductSchema);
      for (let i = 0; i < n; i++) {
        index[i] = typed === undefined ? pile.put(product(i)) : typed.put(product(i));
        if ((i & STEP_MASK) === 0) progress.update(i);
      }
      pile.setRoot(RESTART_FILES.indexRoot, indexPtr);
      pile.close();
      break;
    }
    case 'cache': {
      target = path.join(dir, RESTART_FILES.cache);
      const cache = loadPileCache().openCache({ dir: target });
      const table = cache.table(RESTART_FILES.cacheTable, { schema: ProductSchema, collisionMode: 'durable' });
      for (let i = 0; i < n; i++) {
        table.put(cacheKey(i), product(i));
        if ((i & STEP_MASK) === 0) progress.update(i);
      }
      cache.close();
      break;
    }
    case 'json': {
      target = path.join(dir, RESTART_FILES.json);
      const rows = [];
      for (let i = 0; i < n; i++) rows.push(product(i));
      fs.writeFileSync(target, JSON.stringify(rows));
      break;
    }
    case 'lmdb': {
      target = path.join(dir, RESTART_FILES.lmdb);
      const { open } = await import('lmdb');
      const db = open<ReturnType<typeof product>, number>({ path: target, compression: false, noSync: true });
      for (let b = 0; b < n; b += 10_000) {
        db.transactionSync(() => {
          for (let i = b; i < Math.min(n, b + 10_000); i++) db.putSync(i, product(i));
        });
        progress.update(b);
      }
      await db.close();
      break;
    }
    default:
      throw new Error(`restart workload: unknown store ${store}`);
  }
  progress.stop();
  const writeMs = performance.now() - t;
  return { writeMs, writePerSec: perSecond(n, writeMs), diskBytes: diskBytes(target) };
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  if (!peer.startsWith('setup-')) throw new Error(`restart workload: unknown peer ${peer}`);
  const store = peer.slice('setup-'.length);
  return { peer: store, label: STORES[store] ?? store, figures: await setup(store, num(params, 'n'), str(params, 'dir')) };
}

/** Parent side: one probe process, timed from its own start to its first served get. */
interface ProbeTimes {
  startMs: number;
  loadedMs: number;
  openedMs: number;
  /** Schema registered and index root looked up (a pile; the open for the others). */
  readyMs: number;
  firstGetMs: number;
  /** How long a get of the record beside the first took, after it. */
  secondGetMs: number;
}

function probe(store: string, dir: string, id: number): ProbeTimes {
  const res = spawnSync(process.execPath, ['--max-old-space-size=8192', path.join(__dirname, 'RestartProbe.js'), store, dir, String(id)], {
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    timeout: 600_000,
  });
  const line = (res.stdout ?? '').split('\n').find((l) => l.startsWith(RESULT_MARKER));
  if (res.status !== 0 || line === undefined)
    throw new Error(`restart probe of ${store} failed: ${res.error?.message ?? `exit status ${String(res.status)}`}`);
  return JSON.parse(line.slice(RESULT_MARKER.length)) as ProbeTimes;
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  const n = num(params, 'n');
  const repeats = num(params, 'repeats');
  const dir = makeTempDir('restart');
  const out: PeerResult[] = [];
  try {
    for (const store of Object.keys(STORES)) {
      let written: PeerResult = { peer: store, label: STORES[store]!, figures: {} };
      if (store !== 'node') {
        written = ctx.child(`setup-${store}`, { ...params, dir });
        if (written.error !== undefined) {
          out.push(written);
          continue;
        }
      }
      const runs = [];
      try {
        // The first probe reads the last record: the farthest into its segment.
        for (let r = 0; r < repeats; r++) runs.push(probe(store, dir, r === 0 ? n - 1 : Math.floor((n * r) / repeats)));
      } catch (err) {
        out.push({ ...written, error: err instanceof Error ? err.message : String(err) });
        continue;
      }
      ctx.log(`${store.padEnd(22)} first get at ${median(runs.map((x) => x.firstGetMs)).toFixed(1)} ms after process start`);
      out.push({
        ...written,
        figures: {
          ...written.figures,
          firstGetMs: median(runs.map((x) => x.firstGetMs)),
          bootMs: median(runs.map((x) => x.startMs)),
          loadMs: median(runs.map((x) => x.loadedMs - x.startMs)),
          openMs: median(runs.map((x) => x.openedMs - x.loadedMs)),
          readyMs: median(runs.map((x) => x.readyMs - x.openedMs)),
          getMs: median(runs.map((x) => x.firstGetMs - x.readyMs)),
          secondGetMs: median(runs.map((x) => x.secondGetMs)),
          afterOpenMs: median(runs.map((x) => x.firstGetMs - x.openedMs)),
          worstAfterOpenMs: Math.max(...runs.map((x) => x.firstGetMs - x.openedMs)),
          netMs: median(runs.map((x) => x.firstGetMs - x.startMs)),
        },
      });
    }
  } finally {
    removeDir(dir);
  }
  return out;
}

/** The bar on one pile store's open → first record, as a target: an absolute bound, not a ratio. */
function firstGetBar(peers: readonly PeerResult[], store: string): TargetResult {
  const statement = `Restart, ${STORES[store]}: openPile's return to the first record in hand (schema and index root included) ≤ ${FIRST_GET_BAR_MS} ms, in every probe`;
  const worst = figure(peers, store, 'worstAfterOpenMs');
  const required = `≤ ${FIRST_GET_BAR_MS} ms`;
  if (worst === undefined) return { statement, measured: 'not measured', ratio: Number.NaN, required, met: null, fatal: true };
  const second = figure(peers, store, 'secondGetMs');
  return {
    statement,
    measured: `worst ${fmtMs(worst)}, median ${fmtMs(figure(peers, store, 'afterOpenMs') ?? Number.NaN)}; the get itself ${fmtMs(figure(peers, store, 'getMs') ?? Number.NaN)}, the next get ${second === undefined ? 'not measured' : fmtMs(second)}`,
    ratio: worst / FIRST_GET_BAR_MS,
    required,
    met: worst <= FIRST_GET_BAR_MS,
    fatal: true,
  };
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const N = fmtCount(num(params, 'n'));
  return {
    ratios: {},
    targets: [
      target(
        `Warm restart to first get, ${N} records: mapped pile ≥ 20x faster than rebuilding from JSON`,
        peers,
        'pile',
        'json',
        'firstGetMs',
        '<=',
        1 / 20,
        fmtMs,
      ),
      target(
        `Warm restart to first get, ${N} generic records: mapped pile ≥ 20x faster than rebuilding from JSON`,
        peers,
        'generic',
        'json',
        'firstGetMs',
        '<=',
        1 / 20,
        fmtMs,
      ),
      target(
        `Warm restart to first get, ${N} entries: @pile/cache ≥ 20x faster than rebuilding from JSON`,
        peers,
        'cache',
        'json',
        'firstGetMs',
        '<=',
        1 / 20,
        fmtMs,
      ),
      ...PILE_STORES.map((store) => firstGetBar(peers, store)),
    ],
    tables: [
      {
        title: `${N} records, median of ${num(params, 'repeats')} process starts each (the first reads the last record)`,
        columns: [
          'store',
          'process start → first get',
          'Node boot',
          'require() of the store',
          'open / rebuild',
          'schema + index root',
          'first get',
          'next get',
          'open → first record',
          'written in',
          'on disk',
        ],
        rows: peerRows(peers, 11, (f) => [
          fmtMs(f['firstGetMs']),
          fmtMs(f['bootMs']),
          fmtMs(f['loadMs']),
          fmtMs(f['openMs']),
          fmtMs(f['readyMs']),
          fmtMs(f['getMs']),
          fmtMs(f['secondGetMs']),
          fmtMs(f['afterOpenMs']),
          fmtMs(f['writeMs']),
          fmtBytes(f['diskBytes']),
        ]),
      },
    ],
    charts: [
      {
        kind: 'bars',
        title: `Process start to first served get, ${N} records`,
        unit: 'ms',
        bars: peers
          .filter((p) => p.error === undefined && p.figures['firstGetMs'] !== undefined)
          .map((p) => ({ label: p.label, value: p.figures['firstGetMs']!, highlight: PILE_STORES.includes(p.peer) || p.peer === 'cache' })),
      },
    ],
    notes: [
      "Each figure is a fresh `node` process that loads only its store's modules, opens the data left by a clean close (or reads and parses the JSON file and builds a Map), and serves one get; the time is `performance.now()` at the get's return, which counts from the process's start, so Node's own boot (the \"node\" row) is in every figure.",
      'For a mapped pile the open is split: openPile() (which for generic records also loads msgpackr and the record structures the catalog lists), then the schema registration and the index root, then the first get and a second get of the record beside it. A restart whose open → first record is over 5 ms in any probe fails the run (`pnpm bench restart` exits non-zero).',
      'The files were just written, so they are in the OS page cache for every store alike: this is a warm restart, not a cold disk read.',
      'The mapped pile keeps its id → pointer index in one raw block named by a root; @pile/cache keeps its keyed index in the pile itself.',
    ],
  };
}

export const restartWorkload: Workload = {
  name: 'restart',
  title: 'Warm restart',
  description:
    'Time from process start to the first served get, for a mapped pile and a @pile/cache of N entries after a clean close, vs rebuilding the same data from a JSON file, vs opening lmdb.',
  params: (o) => ({ n: o.n ?? (o.smoke ? 5_000 : 2_000_000), repeats: o.smoke ? 1 : 5 }),
  run,
  measure,
  summarize,
};
