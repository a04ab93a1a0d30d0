import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { openPile, PileError, type Pile, type PilePointer } from '../src';
import { buildCore } from './fixtures/build-core';
// Plain JS shared with the child process.
const { valueOf } = require('./fixtures/multi-values.js') as { valueOf: (v: number, id: number) => unknown };

// Issue 17's writers: several processes write one pile, one at a time behind the writer mutex of
// pile.coord. No assertion depends on timing: waits are for events (a line, an exit).

const WRITER = path.join(__dirname, 'fixtures', 'multi-writer.js');
/** Operations per process of the concurrent-writers test; issue 17's bar is 250000 (PILE_MW_OPS=250000). */
const OPS = Number(process.env.PILE_MW_OPS ?? 20_000);
/** SIGKILLs of a lock holder in the kill test (PILE_MW_KILLS). */
const KILLS = Number(process.env.PILE_MW_KILLS ?? 6);
const SEED = Number(process.env.PILE_MW_SEED ?? 1);

type Line = Record<string, unknown>;

/** A child writer: its stdout lines, delivered in order, and its exit. */
class Writer {
  private readonly lines: Line[] = [];
  private wake: (() => void) | undefined;
  private buf = '';
  readonly exited: Promise<number | null>;
  readonly pid: number;

  constructor(dir: string, env: Record<string, string>) {
    const child = spawn(process.execPath, [WRITER], {
      env: { ...process.env, PILE_DIR: dir, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.pid = child.pid!;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      this.buf += c;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        this.lines.push(JSON.parse(this.buf.slice(0, nl)) as Line);
        this.buf = this.buf.slice(nl + 1);
      }
      this.wake?.();
    });
    this.exited = new Promise((resolve) =>
      child.on('close', (code) => {
        this.wake?.();
        resolve(code);
      }),
    );
    this.kill = () => child.kill('SIGKILL');
  }

  readonly kill: () => void;

  /** The next line, or undefined once the child exited and every line was read. */
  async next(): Promise<Line | undefined> {
    for (;;) {
      const line = this.lines.shift();
      if (line !== undefined) return line;
      let closed = false;
      await Promise.race([new Promise<void>((r) => (this.wake = r)), this.exited.then(() => (closed = true))]);
      if (closed && this.lines.length === 0) return undefined;
    }
  }
}

/** Checks that `ptr` holds the record of seed `v` written by process `id`. */
function expectRecord(pile: Pile, ptr: number, v: number, typed: boolean, id: number): void {
  // inspect(): typed records decode by the layout stored in the pile, with no schema registered here.
  const got = pile.inspect(ptr as PilePointer) as Record<string, unknown>;
  if (typed) {
    expect(got.v, `typed record ${ptr} of process ${id}`).to.equal(v);
    expect(got.by).to.equal(id);
  } else expect(got, `record ${ptr} of process ${id} (seed ${v})`).to.deep.equal(valueOf(v, id));
}

describe('several processes writing one pile', function () {
  this.timeout(1_800_000);
  let tmp: string;
  let dir: string;
  before(() => buildCore());
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-mw-'));
    dir = path.join(tmp, 'pile');
    // Created (and closed cleanly) first, so that the writers all join an existing pile.
    openPile({ dir, segmentSize: 1 << 20 }).close();
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it(`4 processes x ${OPS} mixed put/set/delete: verify holds, the count is exact, every acknowledged value is there`, async () => {
    const writers = [0, 1, 2, 3].map(
      (id) =>
        new Writer(dir, {
          PILE_ID: String(id),
          PILE_OPS: String(OPS),
          PILE_SEED: String(SEED * 10 + id),
          PILE_MODE: 'run',
          PILE_OUT: path.join(tmp, `live-${id}.json`),
        }),
    );
    for (const w of writers) expect((await w.next())?.ready).to.equal(true);
    const done = await Promise.all(writers.map((w) => w.next()));
    expect(await Promise.all(writers.map((w) => w.exited))).to.deep.equal([0, 0, 0, 0]);
    const pile = openPile({ dir });
    try {
      expect(pile.lastRecovery.ran, 'the last writer closed it cleanly').to.equal(false);
      const report = pile.verify();
      expect(report.ok, JSON.stringify(report).slice(0, 2000)).to.equal(true);
      let total = 0;
      for (let id = 0; id < 4; id++) {
        const live = JSON.parse(fs.readFileSync(path.join(tmp, `live-${id}.json`), 'utf8')) as [number, number, boolean][];
        expect(live.length).to.equal(done[id]!.live);
        total += live.length;
        for (const [p, v, typed] of live) expectRecord(pile, p, v, typed, id);
      }
      expect(pile.stats.objectCount).to.equal(total);
      expect(pile.schemas().map((s) => s.name)).to.deep.equal(['item']);
    } finally {
      pile.close();
    }
  });

  it(`a lock holder SIGKILLed ${KILLS} times: the next writer repairs, verify holds, no acknowledged write is lost`, async () => {
    // It writes until every victim was killed, so that each death meets a live writer.
    const stop = path.join(tmp, 'stop');
    const survivor = new Writer(dir, {
      PILE_ID: '9',
      PILE_OPS: '1000',
      PILE_SEED: String(SEED * 100),
      PILE_MODE: 'run',
      PILE_OUT: path.join(tmp, 'live-9.json'),
      PILE_STOP: stop,
    });
    expect((await survivor.next())?.ready).to.equal(true);
    /** The victims' acknowledged live records: pointer -> [seed, typed, process]. */
    const model = new Map<number, [number, boolean, number]>();
    let repairs = 0;
    for (let k = 0; k < KILLS; k++) {
      const id = 20 + k;
      const victim = new Writer(dir, {
        PILE_ID: String(id),
        PILE_OPS: '0',
        PILE_SEED: String(SEED * 1000 + k),
        PILE_MODE: 'victim',
        PILE_HOLD_AT: String((SEED * 7 + k * 5) % 12),
      });
      const ready = await victim.next();
      expect(ready?.ready).to.equal(true);
      if (ready!.recovered === true) repairs++;
      for (;;) {
        const line = await victim.next();
        expect(line, `victim ${k} exited before it held the turn`).to.not.equal(undefined);
        if (line!.holding === true) break;
        if (line!.i !== undefined) {
          const op = line!;
          const ack = await victim.next();
          expect(ack?.a).to.equal(op.i);
          if (op.op === 'put') model.set(ack!.p as number, [op.v as number, op.typed as boolean, id]);
          else if (op.op === 'set') model.set(op.p as number, [op.v as number, op.typed as boolean, id]);
          else model.delete(op.p as number);
        }
      }
      victim.kill();
      await victim.exited;
    }
    fs.writeFileSync(stop, '');
    const done = await survivor.next();
    expect(done?.done).to.equal(true);
    expect(await survivor.exited).to.equal(0);
    repairs += done!.repairs as number;
    expect(repairs, 'each holder killed holding the turn was repaired once, by the next writer').to.equal(KILLS);
    const pile = openPile({ dir });
    try {
      expect(pile.lastRecovery.ran, 'the survivor closed last, cleanly').to.equal(false);
      const report = pile.verify();
      expect(report.ok, JSON.stringify(report).slice(0, 2000)).to.equal(true);
      const live = JSON.parse(fs.readFileSync(path.join(tmp, 'live-9.json'), 'utf8')) as [number, number, boolean][];
      for (const [p, v, typed] of live) expectRecord(pile, p, v, typed, 9);
      for (const [p, [v, typed, id]] of model) expectRecord(pile, p, v, typed, id);
      expect(pile.stats.objectCount).to.equal(live.length + model.size);
    } finally {
      pile.close();
    }
  });

  it('a process without shared memory (--jitless) writes alone: PILE_LOCKED beside other writers, and for them beside it', async () => {
    const script = `const { openPile } = require(${JSON.stringify(path.join(__dirname, '..', 'dist', 'index.js'))});
      let pile;
      try { pile = openPile({ dir: process.argv[1] }); } catch (err) { process.stdout.write(err.code + '\\n'); process.exit(0); }
      pile.put('solo');
      process.stdout.write('opened\\n');
      process.stdin.on('end', () => { pile.close(); process.exit(0); }).resume();`;
    const solo = (): Promise<{ line: string; end: () => Promise<void> }> =>
      new Promise((resolve) => {
        const child = spawn(process.execPath, ['--jitless', '-e', script, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
        const exited = new Promise<void>((r) => child.on('close', () => r()));
        let out = '';
        child.stdout.setEncoding('utf8');
        child.stdout.on('data', (c: string) => {
          out += c;
          if (out.includes('\n')) resolve({ line: out.trim(), end: () => (child.stdin.end(), exited) });
        });
      });
    const alone = await solo();
    expect(alone.line).to.equal('opened');
    expect(() => openPile({ dir })).to.throw(PileError, /could not map/);
    await alone.end();
    const here = openPile({ dir });
    try {
      const beside = await solo();
      expect(beside.line).to.equal('PILE_LOCKED');
      await beside.end();
      expect(here.stats.objectCount).to.equal(1);
    } finally {
      here.close();
    }
  });

  it('a worker thread terminated while it holds the turn: the next writer repairs and loses nothing', async () => {
    const script = `
      const { parentPort, workerData } = require('node:worker_threads');
      const { openPile } = require(${JSON.stringify(path.join(__dirname, '..', 'dist', 'index.js'))});
      const pile = openPile({ dir: workerData.dir });
      const wait = new Int32Array(new SharedArrayBuffer(4));
      pile.batch(() => {
        const ptrs = [];
        for (let i = 0; i < 300; i++) ptrs.push(pile.put({ i, text: 'w'.repeat(i) }));
        parentPort.postMessage(ptrs);
        Atomics.wait(wait, 0, 0, 600000);
      });`;
    const worker = new Worker(script, { eval: true, workerData: { dir } });
    const ptrs = await new Promise<number[]>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    const pile = openPile({ dir });
    try {
      expect(pile.lastRecovery.ran, 'the open joined the dead worker and repaired').to.equal(true);
      const p = pile.put('after');
      expect(pile.get(p)).to.equal('after');
      ptrs.forEach((q, i) => expect(pile.get(q as PilePointer)).to.deep.equal({ i, text: 'w'.repeat(i) }));
      expect(pile.stats.objectCount).to.equal(301);
      expect(pile.verify().ok).to.equal(true);
    } finally {
      pile.close();
    }
  });
});
