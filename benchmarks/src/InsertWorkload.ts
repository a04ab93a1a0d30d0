import { openPile, type Pile } from '@pile/core';
import { perSecond } from './Measure';
import { Progress, STEP_MASK } from './Progress';
import { person, PersonSchema, string32 } from './Records';
import { makeTempDir, removeDir } from './TempDir';
import { peerRows } from './Targets';
import { fmtBytes, fmtCount, fmtMs, fmtRate } from './Format';
import { num, type Figures, type Params, type PeerResult, type RunContext, type Summary, type Workload } from './Workload';

const PEERS: Record<string, string> = { 'pile-memory': 'pile (in-memory)', 'pile-mapped': 'pile (mapped)' };

const VARIANTS = ['string32', 'personTyped', 'personGeneric'] as const;
type Variant = (typeof VARIANTS)[number];

function insert(pile: Pile, variant: Variant, n: number, progress: Progress): number {
  const t = performance.now();
  if (variant === 'string32') {
    for (let i = 0; i < n; i++) {
      pile.put(string32(i));
      if ((i & STEP_MASK) === 0) progress.update(i);
    }
  } else if (variant === 'personTyped') {
    const view = pile.schema('person', PersonSchema);
    for (let i = 0; i < n; i++) {
      view.put(person(i));
      if ((i & STEP_MASK) === 0) progress.update(i);
    }
  } else {
    for (let i = 0; i < n; i++) {
      pile.put(person(i));
      if ((i & STEP_MASK) === 0) progress.update(i);
    }
  }
  return performance.now() - t;
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  const n = num(params, 'n');
  if (PEERS[peer] === undefined) throw new Error(`insert workload: unknown peer ${peer}`);
  const figures: Figures = {};
  for (const variant of VARIANTS) {
    const dir = peer === 'pile-mapped' ? makeTempDir(`insert-${variant}`) : undefined;
    try {
      const pile = openPile(dir !== undefined ? { dir } : {});
      const progress = new Progress(`insert: ${variant} ${peer}`, n);
      const ms = insert(pile, variant, n, progress);
      progress.stop();
      if (pile.stats.objectCount < n) throw new Error(`insert workload: ${variant} stored ${pile.stats.objectCount} of ${n} records`);
      figures[`${variant}PerSec`] = perSecond(n, ms);
      figures[`${variant}Bytes`] = pile.stats.allocatedBytes;
      const t = performance.now();
      pile.close();
      figures[`${variant}CloseMs`] = performance.now() - t;
    } finally {
      if (dir !== undefined) removeDir(dir);
    }
  }
  return { peer, label: PEERS[peer]!, figures };
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const N = fmtCount(num(params, 'n'));
  const ok = peers.filter((p) => p.error === undefined);
  return {
    ratios: {},
    targets: [],
    tables: [
      {
        title: `${N} inserts of each kind, one thread`,
        columns: [
          'pile',
          'string[32] inserts',
          'bytes allocated',
          'Person (typed) inserts',
          'Person (generic) inserts',
          'close (msync) after Person typed',
        ],
        rows: peerRows(peers, 6, (f) => [
          fmtRate(f['string32PerSec']),
          fmtBytes(f['string32Bytes']),
          fmtRate(f['personTypedPerSec']),
          fmtRate(f['personGenericPerSec']),
          fmtMs(f['personTypedCloseMs']),
        ]),
      },
    ],
    charts: [
      {
        kind: 'bars',
        title: `Inserts per second, ${N} each, one thread`,
        unit: 'inserts/s',
        bars: ok.flatMap((p) => [
          { label: `${p.label} string[32]`, value: p.figures['string32PerSec'] ?? 0, highlight: true },
          { label: `${p.label} Person typed`, value: p.figures['personTypedPerSec'] ?? 0, highlight: true },
          { label: `${p.label} Person generic`, value: p.figures['personGenericPerSec'] ?? 0, highlight: false },
        ]),
      },
    ],
    notes: [
      "The .NET pile's own figure was 200 M string[32] inserts in 24 s on 12 threads (about 8.3 M/s, 0.7 M/s per thread); these are one Node thread.",
      "string[32]: a distinct 32-character ASCII string per insert (made in the loop), stored as UTF-8. Person: `{ id, firstName, lastName, email, born, salary, active }`, 7 fields, made in the loop; typed = `pile.schema('person', zod)`, generic = `pile.put` (msgpackr).",
      'Mapped piles write into fresh files under the OS temp directory; puts do not msync, the close does (its time is shown).',
    ],
  };
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  return Object.keys(PEERS).map((peer) => ctx.child(peer, params));
}

export const insertWorkload: Workload = {
  name: 'insert',
  title: 'Insert throughput',
  description:
    'Inserts per second as the .NET pile reported them: string[32] values and 7-field "Person" objects, single thread, in an in-memory and in a mapped pile.',
  params: (o) => ({ n: o.n ?? (o.smoke ? 20_000 : 2_000_000) }),
  run,
  measure,
  summarize,
};
