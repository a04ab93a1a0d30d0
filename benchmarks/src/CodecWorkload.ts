import { openPile, type Pile, type PilePointer, type TypedView } from '@pile/core';
import { runAlternating } from './Alternation';
import { consume, median, perSecond } from './Measure';
import { Progress, STEP_MASK } from './Progress';
import { product, ProductSchema, type Product } from './Records';
import { peerRows, ratios, target } from './Targets';
import { fmtCount, fmtRate } from './Format';
import { num, type Params, type PeerResult, type RunContext, type Summary, type Workload } from './Workload';

const PEERS: Record<string, string> = {
  'pile-typed': 'pile typed (compiled codec)',
  'pile-generic': 'pile generic (msgpackr)',
  map: 'Map of objects',
};

// Each timed loop is a function of its own, as a benchmark library runs each task: one large
// function holding every loop would exhaust TurboFan's inlining budget on the first loops and
// measure calls that no user's loop would leave un-inlined.

function timeTypedPut(view: TypedView<Product>, ptrs: Float64Array, n: number, progress: Progress): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    ptrs[i] = view.put(product(i));
    if ((i & STEP_MASK) === 0) progress.update(i);
  }
  return performance.now() - t;
}

function timeTypedGet(view: TypedView<Product>, ptrs: Float64Array, n: number): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    const v = view.get(ptrs[i] as PilePointer);
    if (v.id !== i) throw new Error(`codec workload: typed get of record ${i} returned record ${v.id}`);
    consume(v.price);
  }
  return performance.now() - t;
}

function timeTypedField(view: TypedView<Product>, ptrs: Float64Array, n: number): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) consume(view.field(ptrs[i] as PilePointer, 'price'));
  return performance.now() - t;
}

function timeGenericPut(pile: Pile, ptrs: Float64Array, n: number, progress: Progress): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    ptrs[i] = pile.put(product(i));
    if ((i & STEP_MASK) === 0) progress.update(i);
  }
  return performance.now() - t;
}

function timeGenericGet(pile: Pile, ptrs: Float64Array, n: number): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    const v = pile.get<Product>(ptrs[i] as PilePointer);
    if (v.id !== i) throw new Error(`codec workload: generic get of record ${i} returned record ${v.id}`);
    consume(v.price);
  }
  return performance.now() - t;
}

/** One peer's records: filled by a timed build, then read by timed passes. */
interface Store {
  readonly putMs: number;
  getMs(): number;
  /** NaN for the peers without field(). */
  fieldMs(): number;
  close(): void;
}

function pileStore(peer: string, n: number, progress: Progress): Store {
  const pile: Pile = openPile({});
  const ptrs = new Float64Array(n);
  const close = (): void => pile.close();
  try {
    if (peer === 'pile-typed') {
      const view = pile.schema('product', ProductSchema);
      const putMs = timeTypedPut(view, ptrs, n, progress);
      return { putMs, getMs: () => timeTypedGet(view, ptrs, n), fieldMs: () => timeTypedField(view, ptrs, n), close };
    }
    const putMs = timeGenericPut(pile, ptrs, n, progress);
    return { putMs, getMs: () => timeGenericGet(pile, ptrs, n), fieldMs: () => Number.NaN, close };
  } catch (err) {
    pile.close();
    throw err;
  }
}

function timeMapBuild(m: Map<number, Product>, n: number, progress: Progress): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    m.set(i, product(i));
    if ((i & STEP_MASK) === 0) progress.update(i);
  }
  return performance.now() - t;
}

function timeMapGet(m: Map<number, Product>, n: number): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) consume(m.get(i)!.price);
  return performance.now() - t;
}

function mapStore(n: number, progress: Progress): Store {
  const m = new Map<number, Product>();
  const putMs = timeMapBuild(m, n, progress);
  return { putMs, getMs: () => timeMapGet(m, n), fieldMs: () => Number.NaN, close: () => m.clear() };
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  const n = num(params, 'n');
  const rounds = num(params, 'rounds');
  if (PEERS[peer] === undefined) throw new Error(`codec workload: unknown peer ${peer}`);
  const build = (count: number, label: string): Store => {
    const progress = new Progress(`codec: ${peer} ${label}`, count);
    try {
      return peer === 'map' ? mapStore(count, progress) : pileStore(peer, count, progress);
    } finally {
      progress.stop();
    }
  };
  // One untimed build and read first, for every peer alike, so that the figures are of
  // optimised code (as tinybench warms up) rather than of the JIT's first tiers.
  const warm = build(Math.min(n, 200_000), 'warm-up');
  warm.getMs();
  warm.fieldMs();
  warm.close();
  // Builds each start from an empty store. Reads are passes over the last store built, as a
  // server reads a store it keeps: a fresh store per read pass would time the JIT dropping code
  // tied to the previous one rather than the read.
  const puts: number[] = [];
  let store: Store | undefined;
  for (let r = 0; r < rounds; r++) {
    store?.close();
    store = build(n, `build ${r + 1}/${rounds}`);
    puts.push(store.putMs);
  }
  const gets: number[] = [];
  const fields: number[] = [];
  for (let r = 0; r < rounds; r++) {
    gets.push(store!.getMs());
    fields.push(store!.fieldMs());
  }
  store!.close();
  const rate = (ms: number[]): number => median(ms.map((x) => perSecond(n, x)));
  const figures: Record<string, number> = { putPerSec: rate(puts), getPerSec: rate(gets) };
  if (peer === 'pile-typed') figures['fieldPerSec'] = rate(fields);
  return { peer, label: PEERS[peer]!, figures };
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const N = fmtCount(num(params, 'n'));
  return {
    ratios: ratios(peers, ['pile-typed'], ['putPerSec', 'getPerSec']),
    targets: [
      target('Typed put ≥ 2x the generic (msgpackr) put', peers, 'pile-typed', 'pile-generic', 'putPerSec', '>=', 2, fmtRate),
      target('Typed put ≥ 1.5x building the same objects into a Map', peers, 'pile-typed', 'map', 'putPerSec', '>=', 1.5, fmtRate),
      target('Typed get (full decode) ≥ 2x the generic get', peers, 'pile-typed', 'pile-generic', 'getPerSec', '>=', 2, fmtRate),
      {
        ...target("view.field(ptr, 'price') ≥ 5x a full typed get", peers, 'pile-typed', 'pile-typed', 'fieldPerSec', '>=', 5, fmtRate),
        ...fieldVsGet(peers),
      },
    ],
    tables: [
      {
        title: `${N} records { id: int, name: string(~30), price, score, active }, median of ${num(params, 'rounds')} rounds in each of ${num(params, 'processes')} processes per path`,
        columns: ['path', 'put (build) rate', 'get rate (full decode)', "field(ptr, 'price') rate"],
        rows: peerRows(peers, 4, (f) => [fmtRate(f['putPerSec']), fmtRate(f['getPerSec']), fmtRate(f['fieldPerSec'])]),
      },
    ],
    charts: [
      {
        kind: 'bars',
        title: `Put / build rate, ${N} records`,
        unit: 'records/s',
        bars: peers
          .filter((p) => p.error === undefined)
          .map((p) => ({ label: p.label, value: p.figures['putPerSec'] ?? 0, highlight: p.peer === 'pile-typed' })),
      },
      {
        kind: 'bars',
        title: `Read rate, ${N} records`,
        unit: 'reads/s',
        bars: peers
          .filter((p) => p.error === undefined)
          .flatMap((p) => [
            { label: `${p.label} get`, value: p.figures['getPerSec'] ?? 0, highlight: p.peer === 'pile-typed' },
            ...(p.figures['fieldPerSec'] !== undefined
              ? [{ label: 'pile typed field()', value: p.figures['fieldPerSec'], highlight: true }]
              : []),
          ]),
      },
    ],
    notes: [
      'Every path builds the same fresh objects (`product(i)`), so object creation is part of each put rate, as it is of the Map build.',
      'Gets read every record once in id order through the pointer array and check the id; `field()` reads one float64 without decoding the record. The Map "get" is `map.get(id)` of a live object, shown for scale.',
      'Each path runs in its own child processes, the paths taking turns (typed, generic, Map, typed, ...); each figure is the median over the processes of the median of the rounds within each, so that a change of load on the machine between two processes does not decide a ratio.',
      'Each build starts from an empty store (a fresh in-memory pile, a new Map); the read passes are made over the last store built, after an untimed warm-up build and read of 200 k records.',
    ],
  };
}

/** field() vs get() are two figures of the same peer. */
function fieldVsGet(peers: PeerResult[]): { measured: string; ratio: number; met: boolean | null } {
  const p = peers.find((x) => x.peer === 'pile-typed' && x.error === undefined);
  const f = p?.figures['fieldPerSec'];
  const g = p?.figures['getPerSec'];
  if (f === undefined || g === undefined) return { measured: 'not measured', ratio: Number.NaN, met: null };
  return { measured: `field() ${fmtRate(f)} vs typed get ${fmtRate(g)}`, ratio: f / g, met: f / g >= 5 };
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  return runAlternating(ctx, Object.keys(PEERS), params, num(params, 'processes'), 'putPerSec', 'put rate');
}

export const codecWorkload: Workload = {
  name: 'codec',
  title: 'Typed codec',
  description:
    "Typed put (a codec compiled from the zod schema) vs the generic msgpackr put vs building the same objects into a Map; typed get (full decode) vs generic get; `view.field(ptr, 'price')` vs a full typed get.",
  params: (o) => ({ n: o.n ?? (o.smoke ? 20_000 : 1_000_000), rounds: o.smoke ? 1 : 5, processes: o.smoke ? 1 : 3 }),
  run,
  measure,
  summarize,
};
