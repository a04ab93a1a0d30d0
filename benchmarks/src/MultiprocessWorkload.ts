import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { native } from '@pile/native';
import { fmtCount, fmtRate } from './Format';
import { LAYOUT, lockLoop, openCoordination, pingPong, type Coordination } from './LockLoop';
import { consume } from './Measure';
import { peerRows } from './Targets';
import { makeTempDir, removeDir } from './TempDir';
import { num, type Figures, type Params, type PeerResult, type RunContext, type Summary, type Workload } from './Workload';

const PEERS: Record<string, string> = { 'one-process': 'one process', 'two-processes': 'two processes' };

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

function summarize(params: Params, peers: PeerResult[]): Summary {
  return {
    ratios: {},
    targets: [],
    tables: [
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
        rows: peerRows(peers, 7, (f) => [
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
  title: 'Many processes: lock and wake costs',
  description:
    'The native primitives issue 17 builds on, measured from JavaScript: SharedMutex lock + unlock uncontended and with two processes contending, futex wake, and a futex ping-pong between two processes.',
  params: (o) => ({ ops: o.ops ?? (o.smoke ? 20_000 : 2_000_000), rounds: o.smoke ? 2_000 : 100_000 }),
  run,
  measure,
  summarize,
};
