/**
 * The pile peers of the `multiprocess` workload: gets and puts of one mapped
 * pile from one and from two processes (`pileProcesses`), and in one process what taking turns
 * through pile.coord costs a put and what the check costs a get (`pileCosts`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile, type PilePointer, type TypedView } from '@pile/core';
import { consume, median, randomIndexes } from './Measure';
import { ProductSchema, product, type Product } from './Records';
import { makeTempDir, removeDir } from './TempDir';
import { num, type Figures, type Params } from './Workload';

/** What a loop of a contender took. */
interface Took {
  ms: number;
  cpuMs: number;
}

/** A PileContender process: one JSON command line in, one JSON answer line out. */
class Contender {
  private readonly child: ChildProcess;
  private readonly answers: string[] = [];
  private waiting: (() => void) | undefined;
  private buf = '';
  private readonly exited: Promise<number | null>;

  constructor(dir: string, pointersFile: string) {
    const script = path.join(__dirname, 'PileContender.js');
    this.child = spawn(process.execPath, [script, dir, pointersFile], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.buf += d;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        this.answers.push(this.buf.slice(0, nl));
        this.buf = this.buf.slice(nl + 1);
      }
      this.waiting?.();
    });
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
    void this.exited.then(() => this.waiting?.());
  }

  private async answer(): Promise<Record<string, number | boolean>> {
    for (;;) {
      const line = this.answers.shift();
      if (line !== undefined) return JSON.parse(line) as Record<string, number | boolean>;
      if (this.child.exitCode !== null) throw new Error(`multiprocess: a pile process exited with ${this.child.exitCode}`);
      await new Promise<void>((r) => (this.waiting = r));
    }
  }

  async ready(): Promise<void> {
    if ((await this.answer())['ready'] !== true) throw new Error('multiprocess: a pile process did not say it was ready');
  }

  send(cmd: Record<string, number | string>): Promise<Took> {
    this.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
    return this.answer() as Promise<unknown> as Promise<Took>;
  }

  async close(): Promise<void> {
    this.child.stdin!.end(`${JSON.stringify({ op: 'close' })}\n`);
    const code = await this.exited;
    if (code !== 0) throw new Error(`multiprocess: a pile process exited with ${String(code)}`);
  }
}

function load1(): number {
  return os.loadavg()[0]!;
}

/** Builds a mapped pile of `n` typed products in `dir` and writes their pointers to `file`. */
function buildPile(dir: string, n: number, file: string): void {
  const pile = openPile({ dir, checkpointInterval: 0 });
  try {
    const view = pile.schema('product', ProductSchema);
    const ptrs = new Float64Array(n);
    for (let i = 0; i < n; i++) ptrs[i] = view.put(product(i));
    fs.writeFileSync(file, new Uint8Array(ptrs.buffer));
  } finally {
    pile.close();
  }
}

/**
 * Gets and puts of one pile from one process, then from two at once, in alternating rounds; the
 * pile is checked (verify, exact count) at the end.
 */
export async function pileProcesses(params: Params): Promise<Figures> {
  const n = num(params, 'n');
  const getOps = num(params, 'getOps');
  const putOps = num(params, 'putOps');
  const rounds = num(params, 'pileRounds');
  const batch = num(params, 'batch');
  const tmp = makeTempDir('multiprocess-pile');
  const dir = path.join(tmp, 'pile');
  const file = path.join(tmp, 'pointers');
  const loadStart = load1();
  try {
    buildPile(dir, n, file);
    const cs = [new Contender(dir, file), new Contender(dir, file)] as const;
    await Promise.all(cs.map((c) => c.ready()));
    let base = n;
    const next = (): number => (base += putOps) - putOps;
    const one: Record<string, number[]> = { get: [], put: [], batched: [] };
    const two: Record<string, number[]> = { get: [], put: [], batched: [] };
    const cpuOne: Record<string, number[]> = { get: [], put: [], batched: [] };
    const cpuTwo: Record<string, number[]> = { get: [], put: [], batched: [] };
    const kinds: [string, (k: number, r: number) => Record<string, number | string>, number][] = [
      ['get', (k, r) => ({ op: 'get', count: getOps, seed: 1000 * r + k + 1 }), getOps],
      ['put', () => ({ op: 'put', count: putOps, base: next(), batch: 1 }), putOps],
      ['batched', () => ({ op: 'put', count: putOps, base: next(), batch }), putOps],
    ];
    for (let r = 0; r < rounds; r++) {
      for (const [kind, cmd, ops] of kinds) {
        // Alternating which comes first, so that neither always meets a warmer cache or a calmer machine.
        for (const both of r % 2 === 0 ? [false, true] : [true, false]) {
          if (!both) {
            const t = await cs[0].send(cmd(0, r));
            one[kind]!.push((ops * 1000) / t.ms);
            cpuOne[kind]!.push((t.cpuMs * 1e6) / ops);
          } else {
            const ts = await Promise.all([cs[0].send(cmd(0, r)), cs[1].send(cmd(1, r))]);
            two[kind]!.push((2 * ops * 1000) / Math.max(ts[0].ms, ts[1].ms));
            cpuTwo[kind]!.push(((ts[0].cpuMs + ts[1].cpuMs) * 1e6) / (2 * ops));
          }
        }
      }
    }
    await Promise.all(cs.map((c) => c.close()));
    const expected = n + rounds * 6 * putOps;
    const pile = openPile({ dir });
    try {
      if (pile.stats.objectCount !== expected)
        throw new Error(`multiprocess: ${pile.stats.objectCount} records in the pile, expected ${expected}`);
      const report = pile.verify();
      if (!report.ok) throw new Error(`multiprocess: verify failed: ${JSON.stringify(report).slice(0, 500)}`);
    } finally {
      pile.close();
    }
    const f: Figures = { loadStart, loadEnd: load1(), records: expected };
    for (const kind of ['get', 'put', 'batched']) {
      f[`${kind}PerSec1`] = median(one[kind]!);
      f[`${kind}PerSec2`] = median(two[kind]!);
      // Rounds alternate, so the ratio of each round's pair is taken: both halves met the same load.
      f[`${kind}Scaling`] = median(two[kind]!.map((v, i) => v / one[kind]![i]!));
      f[`${kind}CpuNs1`] = median(cpuOne[kind]!);
      f[`${kind}CpuNs2`] = median(cpuTwo[kind]!);
    }
    return f;
  } finally {
    removeDir(tmp);
  }
}

/**
 * A mapped pile opened as a process alone with it would open it when it can not map pile.coord
 * as shared memory (`--jitless`, valgrind): it writes without the turn and reads without the
 * check, as every mapped pile did before the writer turn and checked reads. Made here by hiding WebAssembly (which
 * SharedMapping needs) for this one open, so that both piles run in one process with the same JIT.
 */
function openAlone(dir: string): Pile {
  const g = globalThis as unknown as { WebAssembly: unknown };
  const real = g.WebAssembly;
  g.WebAssembly = undefined;
  try {
    return openPile({ dir, checkpointInterval: 0 });
  } finally {
    g.WebAssembly = real;
  }
}

function cpuNow(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Wall and CPU ns per operation of `fn(ops)`. */
async function timed(ops: number, fn: () => void | Promise<void>): Promise<[number, number]> {
  const c0 = cpuNow();
  const t0 = performance.now();
  await fn();
  return [((performance.now() - t0) * 1e6) / ops, ((cpuNow() - c0) * 1e6) / ops];
}

/**
 * In one process: a pile that takes turns through pile.coord (as every read-write open of a mapped
 * pile does now) and one that writes alone, alternating in each round: random typed gets (checked
 * against unchecked, the `gc` workload's random get), typed puts in a loop (the turn held across
 * them), and one typed put per event-loop turn (the turn taken and released around each).
 */
export async function pileCosts(params: Params): Promise<Figures> {
  const n = num(params, 'n');
  const getOps = num(params, 'getOps');
  const putOps = num(params, 'putOps');
  const turnOps = num(params, 'turnOps');
  const rounds = num(params, 'costRounds');
  const tmp = makeTempDir('multiprocess-costs');
  const loadStart = load1();
  const piles: { pile: Pile; view: TypedView<Product>; ptrs: Float64Array }[] = [];
  try {
    for (const alone of [false, true]) {
      const dir = path.join(tmp, alone ? 'alone' : 'shared');
      const pile = alone ? openAlone(dir) : openPile({ dir, checkpointInterval: 0 });
      const view = pile.schema('product', ProductSchema);
      const ptrs = new Float64Array(n);
      for (let i = 0; i < n; i++) ptrs[i] = view.put(product(i));
      piles.push({ pile, view, ptrs });
    }
    const ns: Record<string, number[]> = {};
    const add = (k: string, v: number): void => void (ns[k] ??= []).push(v);
    const keys = randomIndexes(n, getOps, 7);
    let base = n;
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [0, 1] : [1, 0];
      const seen: Record<string, number[]> = {};
      for (const which of order) {
        const { pile, view, ptrs } = piles[which]!;
        const name = which === 0 ? 'shared' : 'alone';
        const [getWall, getCpu] = await timed(getOps, () => {
          for (let i = 0; i < keys.length; i++) consume(view.get(ptrs[keys[i]!] as PilePointer).price);
        });
        const b = base;
        const [putWall, putCpu] = await timed(putOps, () => {
          for (let i = 0; i < putOps; i++) view.put(product(b + i));
        });
        const [turnWall, turnCpu] = await timed(turnOps, async () => {
          for (let i = 0; i < turnOps; i++) {
            view.put(product(b + putOps + i));
            await new Promise((resolve) => setImmediate(resolve));
          }
        });
        if (pile.stats.objectCount !== n + (r + 1) * (putOps + turnOps))
          throw new Error(`multiprocess: the ${name} pile holds ${pile.stats.objectCount} records`);
        for (const [k, v] of Object.entries({ getWall, getCpu, putWall, putCpu, turnWall, turnCpu })) {
          add(`${k}_${name}`, v);
          (seen[k] ??= []).push(v);
        }
      }
      base += putOps + turnOps;
      // Each round's shared / alone ratio, and difference: both met the machine as it was then.
      for (const [k, [a, b]] of Object.entries(seen)) {
        const [shared, alone] = order[0] === 0 ? [a!, b!] : [b!, a!];
        add(`${k}Ratio`, shared / alone);
        add(`${k}Extra`, shared - alone);
      }
    }
    const f: Figures = { loadStart, loadEnd: load1() };
    for (const [k, v] of Object.entries(ns)) f[k] = median(v);
    return f;
  } finally {
    for (const p of piles) p.pile.close();
    removeDir(tmp);
  }
}
