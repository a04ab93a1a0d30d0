import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { COORD, COORD_FILE_NAME } from '../src/concurrency/CoordFile';
import { openPile } from '../src';
import { buildCore } from './fixtures/build-core';

// The writer turn's lock (TurnLock.ts; docs/concurrency.md, "The writer turn"): a word of pile.coord
// taken and released with Atomics, a futex wait for those who find it held, and a liveness mutex
// per open that tells a waiter its holder died. A holder in another process keeps the turn inside a
// batch (blocked in a read of its stdin) while a second process waits for it: the waiter must sleep
// (the word's waiter bit set, its CPU time flat) and be woken when the holder releases, or take the
// turn over and repair when the holder is SIGKILLed. Waits are for events (a line, an exit), never
// timed; the one figure checked is CPU time, a spinner's would grow with the wall time.

const CORE = path.join(__dirname, '..', 'dist', 'index.js');
const WAITER_BIT = 0x80000000;

/** Writes 100 records in a batch, says so, then blocks inside the batch until a line comes on stdin. */
const HOLDER = `const fs = require('node:fs');
const { openPile } = require(${JSON.stringify(CORE)});
const pile = openPile({ dir: process.argv[1], checkpointInterval: 0 });
pile.batch(() => {
  for (let i = 0; i < 100; i++) pile.put('held-' + i);
  fs.writeSync(1, 'holding\\n');
  fs.readSync(0, Buffer.alloc(1));
});
fs.writeSync(1, 'released\\n');
process.stdin.on('end', () => { pile.close(); process.exit(0); }).resume();`;

/** Opens the pile (its open takes the turn to catch up), writes one record, reports, closes. */
const WAITER = `const { openPile } = require(${JSON.stringify(CORE)});
process.stdout.write('started\\n');
const pile = openPile({ dir: process.argv[1], checkpointInterval: 0 });
pile.put('waiter');
const r = { recovered: pile.lastRecovery.ran, count: pile.stats.objectCount, ok: pile.verify().ok };
pile.close();
process.stdout.write(JSON.stringify(r) + '\\n');`;

class Child {
  readonly proc: ChildProcess;
  private out = '';
  private wake: (() => void) | undefined;
  readonly exited: Promise<number | null>;

  constructor(script: string, dir: string) {
    this.proc = spawn(process.execPath, ['-e', script, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.proc.stdout!.setEncoding('utf8');
    this.proc.stdout!.on('data', (c: string) => {
      this.out += c;
      this.wake?.();
    });
    this.exited = new Promise((resolve) =>
      this.proc.on('close', (code) => {
        this.wake?.();
        resolve(code);
      }),
    );
  }

  /** Resolves with the first line that `match` accepts (fails if the child exits first). */
  async line(match: (l: string) => boolean): Promise<string> {
    for (;;) {
      const found = this.out.split('\n').find((l) => l !== '' && match(l));
      if (found !== undefined) return found;
      if (this.proc.exitCode !== null) throw new Error(`the child exited (${this.proc.exitCode}) before the line; it wrote ${this.out}`);
      await new Promise<void>((r) => (this.wake = r));
    }
  }
}

/** User + system CPU time of a process so far, in ms (Linux /proc). */
function cpuMs(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/** The turn's word and the waiter count, read from pile.coord as the other processes left them. */
function turnWords(dir: string): { owner: number; waiters: number } {
  const fd = fs.openSync(path.join(dir, COORD_FILE_NAME), 'r');
  try {
    const b = Buffer.alloc(COORD.WAITERS + 4);
    fs.readSync(fd, b, 0, b.length, 0);
    return { owner: b.readUInt32LE(COORD.OWNER), waiters: b.readUInt32LE(COORD.WAITERS) };
  } finally {
    fs.closeSync(fd);
  }
}

/** Polls `cond` every 20 ms (an event this process can not be told of), failing after `ms`. */
async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`not seen in ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the writer turn between processes: sleeping waiters, woken or taking over', function () {
  this.timeout(120_000);
  let tmp: string;
  let dir: string;

  before(() => buildCore());
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-turn-lock-'));
    dir = path.join(tmp, 'pile');
    openPile({ dir, checkpointInterval: 0 }).close();
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** A holder in its batch and a waiter asleep for the turn, the holder stopped (SIGSTOP) while the waiter's CPU time is read. */
  async function holderAndSleeper(): Promise<{ holder: Child; waiter: Child; cpu: number }> {
    const holder = new Child(HOLDER, dir);
    await holder.line((l) => l === 'holding');
    const waiter = new Child(WAITER, dir);
    await waiter.line((l) => l === 'started');
    await until(() => (turnWords(dir).owner & WAITER_BIT) !== 0, 60_000, 'the waiter bit of the turn word');
    expect(turnWords(dir).waiters, 'one thread waits').to.equal(1);
    holder.proc.kill('SIGSTOP');
    const before = cpuMs(waiter.proc.pid!);
    await new Promise((r) => setTimeout(r, 1000));
    const cpu = cpuMs(waiter.proc.pid!) - before;
    holder.proc.kill('SIGCONT');
    return { holder, waiter, cpu };
  }

  it('a waiter sleeps while the holder is stopped (under 5 % of a CPU), and is woken when the holder releases', async () => {
    const { holder, waiter, cpu } = await holderAndSleeper();
    console.log(`      the waiter's CPU time over 1 s of waiting: ${cpu} ms`);
    expect(cpu, 'CPU ms of the waiter in 1 s').to.be.below(50);
    expect(waiter.proc.exitCode, 'the waiter still waits').to.equal(null);
    holder.proc.stdin!.write('\n');
    await holder.line((l) => l === 'released');
    const r = JSON.parse(await waiter.line((l) => l.startsWith('{'))) as Record<string, unknown>;
    expect(r).to.deep.equal({ recovered: false, count: 101, ok: true });
    expect(await waiter.exited).to.equal(0);
    holder.proc.stdin!.end();
    expect(await holder.exited).to.equal(0);
    expect(turnWords(dir).owner, 'the turn left free').to.equal(0);
  });

  it('a holder SIGKILLed while a waiter sleeps: the waiter takes the turn over and repairs; nothing the holder wrote is lost', async () => {
    const { holder, waiter } = await holderAndSleeper();
    holder.proc.kill('SIGKILL');
    await holder.exited;
    const r = JSON.parse(await waiter.line((l) => l.startsWith('{'))) as Record<string, unknown>;
    expect(r).to.deep.equal({ recovered: true, count: 101, ok: true });
    expect(await waiter.exited).to.equal(0);
    const pile = openPile({ dir, checkpointInterval: 0 });
    try {
      const values = [...pile.entries()].map((e) => pile.get(e.pointer)).sort();
      expect(values).to.deep.equal([...Array.from({ length: 100 }, (_, i) => `held-${i}`), 'waiter'].sort());
    } finally {
      pile.close();
    }
  });
});
