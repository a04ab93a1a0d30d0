import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isPileError, openPile, type Pile, type PilePointer, type RecoveryReport } from '../src';
import { buildCore } from './fixtures/build-core';

const WRITER = path.join(__dirname, 'fixtures', 'checkpoint-writer.js');
/** 40 in the suite; PILE_CHECKPOINT_CYCLES=200 for the long run. */
const CYCLES = Number(process.env.PILE_CHECKPOINT_CYCLES ?? 40);

const valueOf = (v: number): string => `v${v}:`.padEnd(16 + (v % 200), String.fromCharCode(97 + (v % 26)));

type Op =
  | { i: number; op: 'put'; v: number }
  | { i: number; op: 'set'; p: number; v: number; old: number }
  | { i: number; op: 'del'; p: number; old: number };

/** What the pile must hold: acknowledged values for sure, and for an interrupted set or delete the old or the new outcome. */
class Model {
  certain = new Map<number, number>();
  uncertain = new Map<number, (number | null)[]>();
  deleted = new Set<number>();
  acked = 0;

  ack(op: Op, p: number | undefined): void {
    this.acked++;
    if (op.op === 'put') this.certain.set(p!, op.v);
    else if (op.op === 'set') this.certain.set(op.p, op.v);
    else {
      this.certain.delete(op.p);
      this.deleted.add(op.p);
    }
  }

  interrupted(op: Op): void {
    if (op.op === 'set') {
      this.certain.delete(op.p);
      this.uncertain.set(op.p, [op.old, op.v]);
    }
    if (op.op === 'del') {
      this.certain.delete(op.p);
      this.uncertain.set(op.p, [op.old, null]);
    }
  }

  check(pile: Pile, cycle: number): void {
    for (const [p, v] of this.certain) {
      expect(pile.get(p as PilePointer), `cycle ${cycle}: acknowledged record ${p}`).to.equal(valueOf(v));
    }
    for (const [p, outcomes] of this.uncertain) {
      let got: number | null;
      try {
        const s = pile.get(p as PilePointer) as string;
        got = outcomes.find((o) => o !== null && valueOf(o) === s) ?? -1;
      } catch (err) {
        if (!isPileError(err) || err.code !== 'PILE_STALE_POINTER') throw err;
        got = null;
      }
      expect(outcomes, `cycle ${cycle}: interrupted write to ${p}`).to.include(got);
      if (got === null) {
        this.uncertain.delete(p);
        this.deleted.add(p);
      } else {
        this.uncertain.delete(p);
        this.certain.set(p, got);
      }
    }
    const v = pile.verify();
    expect(
      v.ok,
      `cycle ${cycle}: verify ${JSON.stringify({ corrupt: v.corrupt.slice(0, 3), lists: v.freeListErrors, stats: v.statsErrors })}`,
    ).to.equal(true);
  }

  /** Live records handed to the next writer, which may set or delete them. */
  live(): [number, number][] {
    return [...this.certain].slice(-500);
  }
}

function runChild(dir: string, seed: number, mix: string, model: Model): Promise<{ recovery: RecoveryReport | undefined }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER], {
      env: { ...process.env, PILE_DIR: dir, PILE_SEED: String(seed), PILE_MIX: mix, PILE_LIVE: JSON.stringify(model.live()) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    let stderr = '';
    let inflight: Op | undefined;
    let recovery: RecoveryReport | undefined;
    let acks = 0;
    // Killed after a random number of acknowledged writes: at most a few checkpoints' worth.
    const killAfter = 200 + Math.floor(Math.random() * 6000);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const m = JSON.parse(buf.slice(0, nl)) as { ready?: boolean; recovery?: RecoveryReport; i?: number; a?: number; p?: number } & Op;
        buf = buf.slice(nl + 1);
        if (m.ready) recovery = m.recovery;
        else if (m.i !== undefined) inflight = m;
        else if (m.a !== undefined && inflight !== undefined) {
          model.ack(inflight, m.p);
          inflight = undefined;
          if (++acks === killAfter) child.kill('SIGKILL');
        }
      }
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (signal !== 'SIGKILL') {
        reject(new Error(`writer exited with code ${String(code)} signal ${String(signal)}: ${stderr}`));
        return;
      }
      if (inflight !== undefined) model.interrupted(inflight);
      resolve({ recovery });
    });
  });
}

describe('crash recovery from checkpoints under SIGKILL', function () {
  this.timeout(Math.max(180_000, CYCLES * 4_000));
  let dir: string;

  before(() => buildCore());
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-ckpt-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it(`keeps every acknowledged write across ${CYCLES} kills during writes and checkpoints`, async () => {
    const pileDir = path.join(dir, 'pile');
    const model = new Model();
    const seen = { partial: 0, full: 0, checks: 0, regionBytes: 0 };
    const count = (rec: RecoveryReport | undefined): void => {
      if (rec === undefined || !rec.ran) return;
      if (rec.full) seen.full++;
      else {
        seen.partial++;
        seen.regionBytes += rec.bytesScanned;
      }
    };
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      // Two appending cycles for one with sets and deletes (which mark whole segments).
      const mix = cycle % 3 === 2 ? 'mixed' : 'append';
      const res = await runChild(pileDir, cycle + 1, mix, model);
      if (cycle > 0) count(res.recovery);
      // Some kills are left to the next writer: it recovers, writes, checkpoints and is killed again.
      if (cycle < CYCLES - 1 && Math.random() < 0.3) continue;
      const pile = openPile({ dir: pileDir, segmentSize: 1 << 20 });
      try {
        expect(pile.lastRecovery.ran, `cycle ${cycle}`).to.equal(true);
        expect(pile.lastRecovery.corrupt).to.deep.equal([]);
        count(pile.lastRecovery);
        model.check(pile, cycle);
        seen.checks++;
      } finally {
        pile.close();
      }
    }
    const pile = openPile({ dir: pileDir });
    try {
      expect(pile.lastRecovery.ran).to.equal(false);
      model.check(pile, CYCLES);
    } finally {
      pile.close();
    }
    expect(model.acked, 'the writers did work').to.be.greaterThan(CYCLES * 100);
    // Appending writers leave only the tail's segment (from the checkpoint on) and new segments to scan.
    expect(seen.partial, JSON.stringify(seen)).to.be.greaterThan(CYCLES / 4);
    if (process.env.PILE_CRASH_VERBOSE) console.log({ cycles: CYCLES, acked: model.acked, live: model.certain.size, ...seen });
  });
});
