import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type PilePointer } from '@pile/core';
import { consume, gcPauses, median, perSecond, randomIndexes } from './Measure';
import { Progress, STEP_MASK } from './Progress';
import { makeTempDir, removeDir } from './TempDir';
import { fmtBytes, fmtCount, fmtMs, fmtRate } from './Format';
import { num, str, type Figures, type Params, type PeerResult, type RunContext, type Summary, type Workload } from './Workload';

const MiB = 1 << 20;
/** Writes after the clean open that the killed writer makes before its SIGKILL. */
const KILL_AFTER_WRITES = 10_000;
/** Random gets per timed batch. */
const GET_BATCH = 1_000_000;
/** lmdb, the peer, is measured at this size at most. */
const LMDB_MAX = 10_000_000;
const LMDB_BATCH = 10_000;

/** Record i: a 32-character string. */
function record(i: number): string {
  return `record-${i}`.padEnd(32, '.');
}

function diskBytes(p: string): number {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.blocks * 512;
  return fs.readdirSync(p).reduce((sum, f) => sum + diskBytes(path.join(p, f)), 0);
}

/** Appends pointers to the file of f64 beside the pile (the benchmark's index of records 0..n-1, not the pile's). */
function writePointers(fd: number, ptrs: Float64Array, count: number): void {
  fs.writeSync(fd, new Uint8Array(ptrs.buffer, 0, count * 8));
}

function readPointers(file: string): Float64Array {
  const b = fs.readFileSync(file);
  return new Float64Array(b.buffer, b.byteOffset, b.length / 8);
}

/** A writer's figures once its n records are in: the put rate of each tenth (ms) and overall, then a full GC's pause and the RSS. */
function writtenFigures(tenths: number[], n: number): Figures {
  const f: Figures = {};
  tenths.forEach((t, i) => {
    f[`putTenth${i + 1}PerSec`] = perSecond(n / 10, t);
  });
  f['putPerSec'] = perSecond(
    n,
    tenths.reduce((a, b) => a + b, 0),
  );
  f['gcMs'] = median(gcPauses(5));
  f['rssBytes'] = process.memoryUsage().rss;
  return f;
}

/** Child: writes n records into a new mapped pile, timing each tenth, then GC, RSS, disk; closes cleanly. */
function writePile(n: number, dir: string, segmentSize: number): Figures {
  const target = path.join(dir, 'pile');
  const pile = openPile({ dir: target, segmentSize });
  const fd = fs.openSync(path.join(dir, 'pointers.f64'), 'w');
  const chunk = new Float64Array(1 << 20);
  const tenths: number[] = [];
  const progress = new Progress('scale: write pile', n);
  let c = 0;
  for (let t = 0; t < 10; t++) {
    const from = Math.floor((n * t) / 10);
    const to = Math.floor((n * (t + 1)) / 10);
    const t0 = performance.now();
    for (let i = from; i < to; i++) {
      chunk[c++] = pile.put(record(i));
      if (c === chunk.length) {
        writePointers(fd, chunk, c);
        c = 0;
      }
      if ((i & STEP_MASK) === 0) progress.update(i);
    }
    tenths.push(performance.now() - t0);
  }
  writePointers(fd, chunk, c);
  fs.closeSync(fd);
  progress.stop();
  const written = writtenFigures(tenths, n);
  const t0 = performance.now();
  pile.close();
  const closeMs = performance.now() - t0;
  return { ...written, closeMs, diskBytes: diskBytes(target) };
}

/** Child: the open of the pile as it is (clean, or left by a killed writer), then random gets, warm-up, verify. */
function probePile(dir: string, n: number, what: string, warmMs: number): Figures {
  const target = path.join(dir, 'pile');
  const t0 = performance.now();
  const pile = openPile({ dir: target });
  const openMs = performance.now() - t0;
  const r = pile.lastRecovery;
  const f: Figures = {
    openMs,
    recoveryFull: r.full ? 1 : 0,
    regionsScanned: r.regionsScanned,
    bytesScanned: r.bytesScanned,
    blocksScanned: r.blocksScanned,
  };
  if (what === 'gets') {
    const ptrs = readPointers(path.join(dir, 'pointers.f64'));
    const ids = randomIndexes(n, GET_BATCH, 12345);
    const t1 = performance.now();
    for (let i = 0; i < ids.length; i++) consume((pile.get(ptrs[ids[i]!]! as PilePointer) as string).length);
    f['getColdPerSec'] = perSecond(ids.length, performance.now() - t1);
    // Warm-up: random gets for warmMs, then a batch of ids not read before.
    const until = performance.now() + warmMs;
    let seed = 777;
    while (performance.now() < until) {
      const w = randomIndexes(n, 100_000, seed++);
      for (let i = 0; i < w.length; i++) consume((pile.get(ptrs[w[i]!]! as PilePointer) as string).length);
    }
    const ids2 = randomIndexes(n, GET_BATCH, 54321);
    const t2 = performance.now();
    for (let i = 0; i < ids2.length; i++) consume((pile.get(ptrs[ids2[i]!]! as PilePointer) as string).length);
    f['getWarmPerSec'] = perSecond(ids2.length, performance.now() - t2);
    const t3 = performance.now();
    const v = pile.verify();
    f['verifyMs'] = performance.now() - t3;
    if (!v.ok) throw new Error(`scale: verify failed: ${JSON.stringify(v).slice(0, 500)}`);
  }
  pile.close();
  return f;
}

/** Child: opens the pile, writes KILL_AFTER_WRITES records and kills itself with SIGKILL. */
function killedWriter(dir: string): never {
  const pile = openPile({ dir: path.join(dir, 'pile') });
  for (let i = 0; i < KILL_AFTER_WRITES; i++) pile.put(record(i));
  process.kill(process.pid, 'SIGKILL');
  throw new Error('not killed');
}

async function writeLmdb(n: number, dir: string): Promise<Figures> {
  const { open } = await import('lmdb');
  const target = path.join(dir, 'lmdb');
  const db = open<string, number>({ path: target, compression: false, noSync: true });
  const tenths: number[] = [];
  for (let t = 0; t < 10; t++) {
    const from = Math.floor((n * t) / 10);
    const to = Math.floor((n * (t + 1)) / 10);
    const t0 = performance.now();
    for (let b = from; b < to; b += LMDB_BATCH) {
      db.transactionSync(() => {
        for (let i = b; i < Math.min(to, b + LMDB_BATCH); i++) db.putSync(i, record(i));
      });
    }
    tenths.push(performance.now() - t0);
  }
  const written = writtenFigures(tenths, n);
  await db.close();
  const t0 = performance.now();
  const db2 = open<string, number>({ path: target, compression: false, readOnly: true });
  const openMs = performance.now() - t0;
  const ids = randomIndexes(n, GET_BATCH, 12345);
  const t1 = performance.now();
  for (let i = 0; i < ids.length; i++) consume(db2.get(ids[i]!)!.length);
  const getColdPerSec = perSecond(ids.length, performance.now() - t1);
  await db2.close();
  return { ...written, diskBytes: diskBytes(target), openMs, getColdPerSec };
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  const n = num(params, 'n');
  const dir = str(params, 'dir');
  switch (peer) {
    case 'write-pile':
      return { peer, label: 'pile', figures: writePile(n, dir, num(params, 'segmentSize')) };
    case 'open-clean':
    case 'open-killed':
      return { peer, label: 'pile', figures: probePile(dir, n, 'open', 0) };
    case 'kill':
      return killedWriter(dir);
    case 'gets':
      return { peer, label: 'pile', figures: probePile(dir, n, 'gets', num(params, 'warmMs')) };
    case 'lmdb':
      return { peer, label: 'lmdb', figures: await writeLmdb(n, dir) };
    default:
      throw new Error(`scale workload: unknown peer ${peer}`);
  }
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  const sizes = str(params, 'sizes').split(',').map(Number);
  const out: PeerResult[] = [];
  for (const n of sizes) {
    const dir = makeTempDir('scale');
    try {
      const p = { ...params, n, dir };
      const label = `pile ${fmtCount(n)}`;
      const w = ctx.child('write-pile', p);
      if (w.error !== undefined) {
        out.push({ ...w, peer: `pile-${n}`, label });
        continue;
      }
      // Rounds of a clean open, then a writer that opens, puts KILL_AFTER_WRITES records and dies by
      // SIGKILL, then the open that recovers (and closes cleanly, for the next round's clean open).
      const clean: PeerResult[] = [];
      const killed: PeerResult[] = [];
      const loads = [os.loadavg()[0]!];
      for (let round = 0; round < num(params, 'opens'); round++) {
        clean.push(ctx.child('open-clean', p));
        // The killed writer reports nothing: it must end by its own SIGKILL.
        const k = spawnSync(process.execPath, [path.join(__dirname, 'child.js'), 'scale', 'kill', JSON.stringify(p)], {
          stdio: ['ignore', 'ignore', 'inherit'],
          timeout: 600_000,
        });
        if (k.signal !== 'SIGKILL')
          throw new Error(`scale: the writer to be killed ended with status ${String(k.status)} signal ${String(k.signal)}`);
        killed.push(ctx.child('open-killed', p));
      }
      loads.push(os.loadavg()[0]!);
      const gets = ctx.child('gets', p);
      const err = [...clean, ...killed, gets].find((r) => r.error !== undefined)?.error;
      const opens = (rs: PeerResult[]): number[] => rs.map((r) => r.figures['openMs']!);
      const last = killed[killed.length - 1]!.figures;
      const figures: Figures = {
        n,
        ...w.figures,
        cleanOpenMs: median(opens(clean)),
        cleanOpenFastestMs: Math.min(...opens(clean)),
        killedOpenMs: median(opens(killed)),
        killedOpenFastestMs: Math.min(...opens(killed)),
        killedRecoveryFull: Math.max(...killed.map((r) => r.figures['recoveryFull']!)),
        killedBlocksScanned: last['blocksScanned']!,
        killedBytesScanned: last['bytesScanned']!,
        getColdPerSec: gets.figures['getColdPerSec']!,
        getWarmPerSec: gets.figures['getWarmPerSec']!,
        verifyMs: gets.figures['verifyMs']!,
        loadAverage: Math.max(...loads),
      };
      figures['killedOpenRatio'] = figures['killedOpenMs']! / figures['cleanOpenMs']!;
      figures['killedOpenFastestRatio'] = figures['killedOpenFastestMs']! / figures['cleanOpenFastestMs']!;
      ctx.log(
        `${label}: put ${fmtRate(figures['putPerSec'])}, clean open ${fmtMs(figures['cleanOpenFastestMs'])} / ${fmtMs(figures['cleanOpenMs'])}, open after kill -9 ${fmtMs(figures['killedOpenFastestMs'])} / ${fmtMs(figures['killedOpenMs'])} (fastest / median of ${clean.length}; ${figures['killedRecoveryFull'] ? 'full scan' : `${figures['killedBlocksScanned']} blocks scanned`}), load ${loads.map((l) => l.toFixed(1)).join(' to ')}`,
      );
      out.push({ peer: `pile-${n}`, label, figures, ...(err !== undefined ? { error: err } : {}) });
    } finally {
      removeDir(dir);
    }
    if (n <= LMDB_MAX && params['lmdb'] !== false) {
      const ldir = makeTempDir('scale-lmdb');
      try {
        const l = ctx.child('lmdb', { ...params, n, dir: ldir });
        out.push({ ...l, peer: `lmdb-${n}`, label: `lmdb ${fmtCount(n)}`, figures: { n, ...l.figures, loadAverage: os.loadavg()[0]! } });
      } finally {
        removeDir(ldir);
      }
    }
  }
  return out;
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const rows = peers
    .filter((p) => p.error === undefined)
    .map((p) => {
      const f = p.figures;
      const tenths = Array.from({ length: 10 }, (_, i) => f[`putTenth${i + 1}PerSec`]);
      return [
        p.label,
        fmtBytes(f['diskBytes']),
        fmtRate(tenths[0]),
        fmtRate(tenths[9]),
        fmtMs(f['gcMs']),
        fmtBytes(f['rssBytes']),
        f['cleanOpenFastestMs'] === undefined ? fmtMs(f['openMs']) : `${fmtMs(f['cleanOpenFastestMs'])} / ${fmtMs(f['cleanOpenMs'])}`,
        f['killedOpenMs'] === undefined ? '–' : `${fmtMs(f['killedOpenFastestMs'])} / ${fmtMs(f['killedOpenMs'])}`,
        f['killedOpenRatio'] === undefined ? '–' : `${f['killedOpenFastestRatio']!.toFixed(1)} / ${f['killedOpenRatio'].toFixed(1)}`,
        f['killedOpenMs'] === undefined ? '–' : f['killedRecoveryFull'] ? 'whole pile' : `${fmtCount(f['killedBlocksScanned']!)} blocks`,
        fmtRate(f['getColdPerSec']),
        fmtRate(f['getWarmPerSec']),
        fmtMs(f['verifyMs']),
        (f['loadAverage'] ?? 0).toFixed(1),
      ];
    });
  const pileRows = peers.filter((p) => p.peer.startsWith('pile-') && p.error === undefined);
  return {
    ratios: {},
    targets: [],
    tables: [
      {
        title: 'string[32] records in a mapped pile (segmentSize 256 MiB), one writer; lmdb the peer',
        columns: [
          'store',
          'disk',
          'put rate, first tenth',
          'put rate, last tenth',
          'full GC',
          'RSS after writing',
          `clean open (fastest / median of ${num(params, 'opens')})`,
          `open after kill -9 (≤ ${fmtCount(KILL_AFTER_WRITES)} writes; fastest / median)`,
          'after kill / clean (fastest / median)',
          'recovery scanned',
          'random get, new process',
          `random get after ${num(params, 'warmMs') / 1000} s warm-up`,
          'verify',
          'load avg (highest seen)',
        ],
        rows,
      },
      {
        title: 'Put rate per tenth of the records (M/s)',
        columns: ['store', ...Array.from({ length: 10 }, (_, i) => `${i + 1}`)],
        rows: peers
          .filter((p) => p.error === undefined)
          .map((p) => [p.label, ...Array.from({ length: 10 }, (_, i) => fmtRate(p.figures[`putTenth${i + 1}PerSec`]))]),
      },
    ],
    charts:
      pileRows.length === 0
        ? []
        : [
            {
              kind: 'bars',
              title: 'Open of the pile, median: clean, and after a kill -9 that followed 10 k writes',
              unit: 'ms',
              bars: pileRows.flatMap((p) => [
                { label: `${p.label} clean`, value: p.figures['cleanOpenMs']! },
                { label: `${p.label} after kill -9`, value: p.figures['killedOpenMs']!, highlight: true },
              ]),
            },
          ],
    notes: [
      `Each row is a new pile of N records \`record-<i>\` padded to 32 characters, put by one writer into a mapped pile of 256 MiB segments (lmdb: transactions of ${LMDB_BATCH} puts, no sync). Every figure but the writer's is a fresh process.`,
      `"open after kill -9": a process opens the cleanly closed pile, puts 10 000 records and kills itself with SIGKILL; the figure is the next open, which recovers (and then closes cleanly). ${num(params, 'opens')} rounds of a clean open, such a kill and the open after it, each open a fresh process; the fastest and the median of each, and their ratios. "recovery scanned" is what that recovery walked (\`lastRecovery\`): since checkpoints (docs/durability.md) it is the blocks written after the last checkpoint, not the pile.`,
      `"random get": ${fmtCount(GET_BATCH)} gets of random records in a new process right after its open (pointers from a file written by the writer, read before the clock starts), then random gets for ${num(params, 'warmMs') / 1000} s, then ${fmtCount(GET_BATCH)} gets of other random records. The files were just written, so they are in the page cache: the cold figure counts page-table faults, not disk reads.`,
      'The machine is shared and loaded (the load average is given per row): figures vary from run to run by tens of percent.',
      `Parameters: ${JSON.stringify(params)}.`,
    ],
  };
}

export const scaleWorkload: Workload = {
  name: 'scale',
  title: 'Scale: 10 M to 100 M records',
  description:
    'N string[32] records in a mapped pile (segmentSize 256 MiB): put rate per tenth, full GC, RSS, disk, clean open, open after a kill -9 that followed 10 k writes, random gets in a new process at once and after warm-up, verify; lmdb at 10 M as the peer.',
  params: (o) => ({
    sizes: o.n !== undefined ? String(o.n) : o.smoke ? '20000' : '10000000,50000000,100000000',
    segmentSize: o.smoke ? 16 * MiB : 256 * MiB,
    warmMs: o.smoke ? 200 : 10_000,
    opens: o.smoke ? 2 : 7,
  }),
  run,
  measure,
  summarize,
};
