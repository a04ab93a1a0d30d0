import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { native } from '@pile/native';
import { fmtCount, fmtRate, fmtRatio } from './Format';
import { LAYOUT, lockLoop, openCoordination, pingPong, type Coordination } from './LockLoop';
import { consume } from './Measure';
import { pileCosts, pileProcesses } from './PileProcesses';
import { figure, peerRows } from './Targets';
import { makeTempDir, removeDir } from './TempDir';
import {
  num,
  type Figures,
  type Params,
  type PeerResult,
  type RunContext,
  type Summary,
  type Table,
  type TargetResult,
  type Workload,
} from './Workload';

/** The lock's peers: the native primitives alone. */
const LOCK_PEERS: Record<string, string> = { 'one-process': 'one process', 'two-processes': 'two processes' };
/** The pile's peers (PileProcesses.ts). */
const PILE_PEERS: Record<string, string> = {
  'pile-processes': 'one pile, 1 and 2 processes',
  'pile-costs': 'turn and check costs, one process',
};
const PEERS: Record<string, string> = { ...LOCK_PEERS, ...PILE_PEERS };

/** Nanoseconds per operation. */
function nsPer(ms: number, ops: number): number {
  return (ms * 1e6) / ops;
}

function fmtNs(ns: number | undefined): string {
  if (ns === undefined || !Number.isFinite(ns)) return '–';
  return ns >= 1000 ? `${(ns / 1000).toFixed(2)} µs` : `${ns.toFixed(0)} ns`;
}

/** Best of `runs` timings of `fn(ops)`, in ns per operation: the machine is shared, the minimum is the cost. */
function best(runs: number, ops: number, fn: (ops: number) => number): number {
  let min = Number.POSITIVE_INFINITY;
  for (let r = 0; r < runs; r++) min = Math.min(min, nsPer(fn(ops), ops));
  return min;
}

function uncontended(c: Coordination, ops: number): Figures {
  const { mutex, startFutex, words } = c;
  lockLoop(c, Math.min(ops, 100_000)); // warm-up: optimised code for every loop below
  return {
    lockUnlockNs: best(5, ops, (n) => lockLoop(c, n)),
    tryLockUnlockNs: best(5, ops, (n) => {
      const t = performance.now();
      for (let i = 0; i < n; i++) {
        mutex.tryLock();
        mutex.unlock();
      }
      return performance.now() - t;
    }),
    // What an unlock that finds no waiter adds when it wakes anyway: one futex syscall.
    futexWakeNs: best(5, ops, (n) => {
      const t = performance.now();
      let woken = 0;
      for (let i = 0; i < n; i++) woken += startFutex.wake(1);
      consume(woken);
      return performance.now() - t;
    }),
    // For scale: a JavaScript spin lock's uncontended cost (CAS + store) on the same memory.
    atomicsCasStoreNs: best(5, ops, (n) => {
      const t = performance.now();
      for (let i = 0; i < n; i++) {
        if (Atomics.compareExchange(words, LAYOUT.spin, 0, 1) !== 0) throw new Error('multiprocess: spin lock taken');
        Atomics.store(words, LAYOUT.spin, 0);
      }
      return performance.now() - t;
    }),
  };
}

/** Runs `loop` here and in a second process at once; the second process's milliseconds. */
async function together(
  c: Coordination,
  file: string,
  mode: 'lock' | 'pingpong',
  count: number,
  loop: () => number,
): Promise<{ mine: number; theirs: number }> {
  Atomics.store(c.words, LAYOUT.start, 0);
  Atomics.store(c.words, LAYOUT.ready, 0);
  const script = path.join(__dirname, 'MultiprocessContender.js');
  const child = spawn(process.execPath, [script, file, mode, String(count)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 120_000;
  while (Atomics.load(c.words, LAYOUT.ready) === 0) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error('multiprocess: the second process did not start');
    await new Promise((r) => setTimeout(r, 5));
  }
  Atomics.store(c.words, LAYOUT.start, 1);
  c.startFutex.wake();
  const mine = loop();
  const code = await exited;
  if (code !== 0) throw new Error(`multiprocess: the second process exited with ${String(code)}`);
  return { mine, theirs: (JSON.parse(out) as { ms: number }).ms };
}

async function contended(c: Coordination, file: string, ops: number, rounds: number): Promise<Figures> {
  Atomics.store(c.words, LAYOUT.counter, 0);
  const lock = await together(c, file, 'lock', ops, () => lockLoop(c, ops));
  const counted = Atomics.load(c.words, LAYOUT.counter);
  if (counted !== 2 * ops) throw new Error(`multiprocess: the counter under the mutex is ${counted}, not ${2 * ops}`);
  Atomics.store(c.words, LAYOUT.turn, 0);
  const pp = await together(c, file, 'pingpong', rounds, () => pingPong(c, 0, rounds));
  const wall = Math.max(lock.mine, lock.theirs);
  return {
    lockUnlockNs: nsPer(wall, 2 * ops),
    lockUnlockPerProcessNs: (nsPer(lock.mine, ops) + nsPer(lock.theirs, ops)) / 2,
    lockUnlockPerSec: (2 * ops * 1000) / wall,
    pingPongRoundTripNs: nsPer(Math.max(pp.mine, pp.theirs), rounds),
  };
}

async function measure(peer: string, params: Params): Promise<PeerResult> {
  if (PEERS[peer] === undefined) throw new Error(`multiprocess workload: unknown peer ${peer}`);
  if (peer === 'pile-processes') return { peer, label: PEERS[peer], figures: await pileProcesses(params) };
  if (peer === 'pile-costs') return { peer, label: PEERS[peer], figures: await pileCosts(params) };
  const ops = num(params, 'ops');
  const dir = makeTempDir('multiprocess');
  const file = path.join(dir, 'coord');
  try {
    const fd = fs.openSync(file, 'w+');
    if (native.reserve(fd, LAYOUT.size) !== 0) fs.ftruncateSync(fd, LAYOUT.size);
    const c = openCoordination(fd, file);
    fs.closeSync(fd);
    c.mutex.init();
    const figures = peer === 'one-process' ? uncontended(c, ops) : await contended(c, file, ops, num(params, 'rounds'));
    c.mutex.close();
    c.startFutex.close();
    c.turnFutex.close();
    c.mapping.unmap();
    return { peer, label: PEERS[peer]!, figures };
  } finally {
    removeDir(dir);
  }
}

function fmtLoad(f: Figures | undefined): string {
  return f === undefined ? '' : `${(f['loadStart'] ?? Number.NaN).toFixed(1)} -> ${(f['loadEnd'] ?? Number.NaN).toFixed(1)}`;
}

/** A target on one figure of one peer (a ratio measured within that peer's run). */
function within(
  statement: string,
  peers: readonly PeerResult[],
  peer: string,
  key: string,
  op: '<=' | '>=',
  bound: number,
  measured: (f: Figures) => string,
  required = `${op === '<=' ? '≤' : '≥'} ${fmtRatio(bound)}`,
): TargetResult {
  const v = figure(peers, peer, key);
  const f = peers.find((p) => p.peer === peer)?.figures;
  if (v === undefined || f === undefined) return { statement, measured: 'not measured', ratio: Number.NaN, required, met: null };
  return {
    statement,
    measured: `${measured(f)} (load average ${fmtLoad(f)})`,
    ratio: v,
    required,
    met: op === '<=' ? v <= bound : v >= bound,
  };
}

/** The bar on the uncontended put: at most 100 ns more than a pile writing alone; the ratio column shows shared / alone. */
function putTarget(peers: readonly PeerResult[]): TargetResult {
  const statement = 'Uncontended typed put in a loop with the writer turn: at most 100 ns more than a pile that writes alone';
  const f = peers.find((p) => p.peer === 'pile-costs' && p.error === undefined)?.figures;
  const extra = f?.['putWallExtra'];
  if (f === undefined || extra === undefined)
    return { statement, measured: 'not measured', ratio: Number.NaN, required: '≤ +100 ns', met: null };
  return {
    statement,
    measured: `turn ${fmtNs(f['putWall_shared'])}, alone ${fmtNs(f['putWall_alone'])} per put, median difference ${extra.toFixed(0)} ns (load average ${fmtLoad(f)})`,
    ratio: f['putWallRatio'] ?? Number.NaN,
    required: '≤ +100 ns',
    met: extra <= 100,
  };
}

function pileTables(params: Params, peers: readonly PeerResult[]): Table[] {
  const proc = peers.filter((p) => p.peer === 'pile-processes');
  const costs = peers.filter((p) => p.peer === 'pile-costs');
  const rows = (kind: string, what: string): string[][] =>
    proc.length === 0
      ? []
      : peerRows(proc, 8, (f) => [
          fmtRate(f[`${kind}PerSec1`]),
          fmtRate(f[`${kind}PerSec2`]),
          fmtRatio(f[`${kind}Scaling`] ?? Number.NaN),
          fmtNs(f[`${kind}CpuNs1`]),
          fmtNs(f[`${kind}CpuNs2`]),
          fmtLoad(f),
        ]).map((r) => [what, ...r.slice(1)]);
  return [
    {
      title: `One mapped pile of ${fmtCount(num(params, 'n'))} typed records, read and written by 1 and by 2 processes (median of ${num(params, 'pileRounds')} rounds)`,
      columns: ['operation', '1 process', '2 processes (total)', '2 / 1', 'CPU per op, 1', 'CPU per op, 2', 'load average'],
      rows: [
        ...rows('get', `random typed get (${fmtCount(num(params, 'getOps'))} per process)`),
        ...rows('put', `typed put (${fmtCount(num(params, 'putOps'))} per process)`),
        ...rows('batched', `typed put, ${num(params, 'batch')} per pile.batch`),
      ],
    },
    {
      title: `In one process: a pile taking turns through pile.coord against one writing alone (median of ${num(params, 'costRounds')} alternating rounds)`,
      columns: [
        'operation',
        'shared (turn, checked reads)',
        'alone',
        'shared / alone',
        'shared - alone',
        'CPU: shared / alone',
        'load average',
      ],
      rows: peerRows(costs, 7, (f) => [fmtNs(f['getWall_shared']), fmtNs(f['getWall_alone'])]).flatMap((r, i) => {
        const f = costs[i]!.figures;
        if (r.length !== 3) return [r];
        const line = (what: string, k: string): string[] => [
          what,
          fmtNs(f[`${k}Wall_shared`]),
          fmtNs(f[`${k}Wall_alone`]),
          fmtRatio(f[`${k}WallRatio`] ?? Number.NaN),
          `${(f[`${k}WallExtra`] ?? Number.NaN).toFixed(0)} ns`,
          fmtRatio(f[`${k}CpuRatio`] ?? Number.NaN),
          fmtLoad(f),
        ];
        return [
          line(`random typed get (${fmtCount(num(params, 'getOps'))})`, 'get'),
          line(`typed put in a loop (${fmtCount(num(params, 'putOps'))})`, 'put'),
          line(`typed put, one per event-loop turn (${fmtCount(num(params, 'turnOps'))})`, 'turn'),
        ];
      }),
    },
  ];
}

function summarize(params: Params, peers: PeerResult[]): Summary {
  const lockPeers = peers.filter((p) => LOCK_PEERS[p.peer] !== undefined);
  const rate = (k: string) => (f: Figures) => `1 process ${fmtRate(f[`${k}PerSec1`])}, 2 processes ${fmtRate(f[`${k}PerSec2`])}`;
  return {
    ratios: {},
    targets: [
      within('Random get of one pile: 2 reading processes ≥ 1.7x one', peers, 'pile-processes', 'getScaling', '>=', 1.7, rate('get')),
      within(
        'Checked get costs at most 10 % more than an unchecked get (random typed get, as the `gc` workload)',
        peers,
        'pile-costs',
        'getWallRatio',
        '<=',
        1.1,
        (f) => `checked ${fmtNs(f['getWall_shared'])}, unchecked ${fmtNs(f['getWall_alone'])}`,
      ),
      putTarget(peers),
    ],
    tables: [
      ...pileTables(params, peers),
      {
        title: `Lock costs from JavaScript, ${fmtCount(num(params, 'ops'))} operations per process`,
        columns: [
          'processes',
          'lock + unlock',
          'per process',
          'lock + unlock pairs',
          'tryLock + unlock',
          'futex wake, no waiter',
          'Atomics CAS + store',
          'futex ping-pong round trip',
        ],
        rows: peerRows(lockPeers, 7, (f) => [
          fmtNs(f['lockUnlockNs']),
          fmtNs(f['lockUnlockPerProcessNs']),
          fmtRate(f['lockUnlockPerSec'] ?? (f['lockUnlockNs'] !== undefined ? 1e9 / f['lockUnlockNs'] : undefined)),
          fmtNs(f['tryLockUnlockNs']),
          fmtNs(f['futexWakeNs']),
          fmtNs(f['atomicsCasStoreNs']),
          fmtNs(f['pingPongRoundTripNs']),
        ]),
      },
    ],
    charts: [],
    notes: [
      'One pile, 1 and 2 processes: the measuring process builds the pile (typed records of the `gc` workload, default segment size) and starts two processes (`PileContender.js`) that open it read-write, as node:cluster workers do: their reads are checked and their writes take the writer turn. Each round asks one of them for a loop, then both at once (the order alternates between rounds); "2 processes (total)" is both loops\' operations over the longer loop\'s wall time, "2 / 1" the median of each round\'s ratio. CPU per op is the processes\' own user + system time over their operations. Gets are of uniformly random records, each checked to be the record asked for. Puts go to the same pile; a process keeps the turn after a put until it finds the other waiting at the end of one (then it hands it over, and naps before it competes again) or its event-loop turn ends; with `pile.batch` the turn changes hands at most once per batch. At the end the pile must hold exactly the records put and pass `verify()`.',
      'Turn and check costs, one process: two mapped piles in one process, one opened as every read-write open is now (it takes turns through pile.coord, its reads are checked) and one opened as a process that can not map pile.coord as shared memory opens it (it writes alone, without the turn, and reads unchecked: what every mapped pile did before the writer turn and checked reads; the benchmark hides `WebAssembly` for that one open, so that `SharedMapping` fails as under `--jitless`). Each round runs every loop on both, in alternating order; the ratio and difference columns are medians of each round\'s own. "typed put in a loop" keeps the turn across the loop (it is released at the end of the event-loop turn); "one per event-loop turn" awaits `setImmediate` after each put, so the shared pile takes the mutex, catches up, publishes and unlocks around each one, as a server handling one request per turn does.',
      'The machine is shared with other work (other test suites and benchmarks): the load average at the start and end of each peer is given beside its figures. Two processes on two cores scale only when nothing else runs; ratios within a round, and CPU times, are the figures to trust under load.',
      "The mutex is `@pile/native`'s SharedMutex (a process-shared robust pthread mutex) in a file mapped as a SharedArrayBuffer; each lock + unlock also increments a plain counter in the file, and the run fails unless the two processes' total is exact.",
      'One process: the best of 5 timed loops after a warm-up (the machine is shared; the minimum is the cost). Two processes: both loops start together on a futex; "lock + unlock" is the wall time over all pairs of both, "per process" what each one\'s own loop took per pair.',
      '"futex wake, no waiter" is one FUTEX_WAKE syscall from JavaScript: what an unlock that wakes unconditionally would add. "Futex ping-pong" passes a turn word back and forth between the two processes, each sleeping on the futex until its turn: two wake-ups per round trip.',
      '"Atomics CAS + store" is a JavaScript spin lock\'s uncontended cost on the same memory, for scale.',
    ],
  };
}

async function run(ctx: RunContext, params: Params): Promise<PeerResult[]> {
  return Object.keys(PEERS).map((peer) => ctx.child(peer, params));
}

export const multiprocessWorkload: Workload = {
  name: 'multiprocess',
  title: 'Many processes: one pile, and the lock and wake costs',
  description:
    'One mapped pile read and written by one and by two processes (each a read-write open taking turns through pile.coord, as node:cluster workers), what the writer turn costs a put and the check costs a get against a pile that writes alone; then the native primitives it builds on, measured from JavaScript: SharedMutex lock + unlock uncontended and with two processes contending, futex wake, and a futex ping-pong between two processes.',
  params: (o) => ({
    ops: o.ops ?? (o.smoke ? 20_000 : 2_000_000),
    rounds: o.smoke ? 2_000 : 100_000,
    n: o.n ?? (o.smoke ? 5_000 : 1_000_000),
    getOps: o.smoke ? 20_000 : 2_000_000,
    putOps: o.smoke ? 2_000 : 200_000,
    turnOps: o.smoke ? 1_000 : 50_000,
    batch: 100,
    pileRounds: o.smoke ? 1 : 4,
    costRounds: o.smoke ? 2 : 6,
  }),
  run,
  measure,
  summarize,
};
