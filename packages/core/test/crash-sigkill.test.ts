import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, isPileError, type PilePointer, type Pile } from '../src';
import { buildCore } from './fixtures/build-core';
import { checkGenerations } from './fixtures/pile-files';

// Plain JS helpers shared with the child process.
const {
  sameValue,
  describe: describeValue,
  valueFor,
} = require('./fixtures/crash-values.js') as {
  sameValue: (actual: unknown, seed: number) => boolean;
  describe: (v: unknown) => string;
  valueFor: (seed: number) => unknown;
};

const WRITER = path.join(__dirname, 'fixtures', 'crash-writer.js');
const CYCLES = Number(process.env.PILE_CRASH_CYCLES ?? 50);
const DELETED = -1;

type Op =
  | { i: number; op: 'put'; v: number }
  | { i: number; op: 'set'; p: number; v: number; old: number }
  | { i: number; op: 'del'; p: number; old: number }
  | { i: number; op: 'root'; name: string; p: number | null }
  | { i: number; op: 'flush' };

/**
 * What the test knows of the pile: values it must hold for sure, and the outcomes allowed for
 * operations a kill interrupted (the old or the new value, never anything else).
 */
class Model {
  certain = new Map<number, number>();
  /** pointer -> allowed value seeds (DELETED: the record may be gone). */
  uncertain = new Map<number, number[]>();
  deleted = new Set<number>();
  roots = new Map<string, (number | null)[]>();
  /** Value seeds of puts in flight when a child died: each may exist under an unknown pointer. */
  pendingPuts: number[] = [];
  acked = 0;

  ack(op: Op, ptr: number | undefined): void {
    this.acked++;
    switch (op.op) {
      case 'put':
        this.certain.set(ptr!, op.v);
        break;
      case 'set':
        this.certain.set(op.p, op.v);
        break;
      case 'del':
        this.certain.delete(op.p);
        this.deleted.add(op.p);
        break;
      case 'root':
        this.roots.set(op.name, [op.p]);
        break;
      case 'flush':
        break;
    }
  }

  interruptedOps: Record<string, number> = {};

  interrupted(op: Op): void {
    this.interruptedOps[op.op] = (this.interruptedOps[op.op] ?? 0) + 1;
    switch (op.op) {
      case 'put':
        this.pendingPuts.push(op.v);
        break;
      case 'set':
        this.certain.delete(op.p);
        this.uncertain.set(op.p, [op.old, op.v]);
        break;
      case 'del':
        this.certain.delete(op.p);
        this.uncertain.set(op.p, [op.old, DELETED]);
        break;
      case 'root':
        this.roots.set(op.name, [...(this.roots.get(op.name) ?? [null]), op.p]);
        break;
      case 'flush':
        break;
    }
  }

  /** Reads everything back from `pile` and settles every uncertain outcome. */
  check(pile: Pile, cycle: number): void {
    const where = (p: number): string => `cycle ${cycle}, pointer ${p}`;
    for (const [p, seed] of this.certain) {
      let got: unknown;
      try {
        got = pile.get(p as PilePointer);
      } catch (err) {
        throw new Error(`${where(p)}: acknowledged record (seed ${seed}) unreadable: ${(err as Error).message}`);
      }
      if (!sameValue(got, seed))
        throw new Error(`${where(p)}: acknowledged value ${describeValue(valueFor(seed))}, read ${describeValue(got)}`);
    }
    for (const [p, allowed] of this.uncertain) {
      if (!pile.has(p as PilePointer)) {
        if (!allowed.includes(DELETED)) throw new Error(`${where(p)}: record whose set was interrupted is gone`);
        this.deleted.add(p);
        continue;
      }
      const got = pile.get(p as PilePointer);
      const seed = allowed.find((s) => s !== DELETED && sameValue(got, s));
      if (seed === undefined) throw new Error(`${where(p)}: interrupted operation left ${describeValue(got)}, neither old nor new value`);
      this.certain.set(p, seed);
    }
    this.uncertain.clear();
    for (const p of this.deleted) {
      expect(pile.has(p as PilePointer), `${where(p)}: deleted record is back`).to.equal(false);
      let code: string | undefined;
      try {
        pile.get(p as PilePointer);
      } catch (err) {
        code = isPileError(err) ? err.code : String(err);
      }
      expect(code, where(p)).to.equal('PILE_STALE_POINTER');
    }
    for (const [name, allowed] of this.roots) {
      const got = pile.getRoot(name) ?? null;
      expect(allowed, `cycle ${cycle}: root ${name}`).to.include(got);
      this.roots.set(name, [got]);
    }
    // Every live record is one the test knows, or the whole value of a put that was in flight.
    const pending = [...this.pendingPuts];
    for (const e of pile.entries()) {
      if (this.certain.has(e.pointer)) continue;
      const got = pile.get(e.pointer);
      const k = pending.findIndex((s) => sameValue(got, s));
      if (k < 0)
        throw new Error(
          `cycle ${cycle}: unknown record ${e.pointer} (${describeValue(got)}): neither acknowledged nor a whole in-flight put`,
        );
      this.certain.set(e.pointer, pending[k]!);
      pending.splice(k, 1);
    }
    this.pendingPuts = [];
    expect(pile.stats.objectCount, `cycle ${cycle}: objectCount`).to.equal(this.certain.size);
    const report = pile.verify();
    expect(report.ok, `cycle ${cycle}: verify ${JSON.stringify(report)}`).to.equal(true);
  }

  /** checkGenerations() over every record the test saw deleted. */
  checkGenerations(pileDir: string, cycle: number): void {
    checkGenerations(pileDir, this.deleted, cycle);
  }
}

interface ChildResult {
  ready:
    { recovery: { ran: boolean; tornRecords: number; journalsReplayed: number; orphansFreed: number }; progressEvents: number } | undefined;
  killedAfterReady: boolean;
}

/** Runs one child until it is killed; feeds its acknowledgements into the model. */
function runChild(dir: string, stateFile: string, seed: number, model: Model, killEarly: boolean): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER], {
      env: { ...process.env, PILE_DIR: dir, PILE_SEED: String(seed), PILE_STATE: stateFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    let stderr = '';
    let inflight: Op | undefined;
    const result: ChildResult = { ready: undefined, killedAfterReady: false };
    let timer: NodeJS.Timeout | undefined;
    const kill = (): void => {
      result.killedAfterReady = result.ready !== undefined;
      child.kill('SIGKILL');
    };
    if (killEarly) timer = setTimeout(kill, Math.floor(Math.random() * 250));
    const onLine = (line: string): void => {
      const m = JSON.parse(line) as Record<string, unknown>;
      if (m.ready) {
        result.ready = m as unknown as ChildResult['ready'];
        if (!killEarly) timer = setTimeout(kill, 5 + Math.floor(Math.random() * 150));
      } else if (m.i !== undefined) {
        inflight = m as unknown as Op;
      } else if (m.a !== undefined) {
        if (inflight === undefined || inflight.i !== m.a) throw new Error(`ack ${String(m.a)} without its intent`);
        model.ack(inflight, m.p as number | undefined);
        inflight = undefined;
      }
    };
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        onLine(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('error', reject);
    // 'close': stdout is drained and the process reaped (a zombie's pid would still look alive to the lock).
    child.on('close', (code, signal) => {
      if (timer !== undefined) clearTimeout(timer);
      if (signal !== 'SIGKILL') {
        reject(new Error(`writer exited with code ${String(code)} signal ${String(signal)}: ${stderr}`));
        return;
      }
      // A partial last line is an acknowledgement the parent never got: the op counts as in flight.
      if (inflight !== undefined) model.interrupted(inflight);
      resolve(result);
    });
  });
}

describe('crash consistency under SIGKILL', function () {
  this.timeout(Math.max(120_000, CYCLES * 2_000));
  let dir: string;

  before(() => buildCore());
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-crash-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it(`keeps every acknowledged put, set, delete and root across ${CYCLES} kills`, async () => {
    const pileDir = path.join(dir, 'pile');
    const stateFile = path.join(dir, 'state.json');
    const model = new Model();
    const stats = { recoveriesByChild: 0, recoveriesByTest: 0, torn: 0, journals: 0, orphans: 0, checks: 0 };
    let lastKillAfterReady = false;
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      fs.writeFileSync(stateFile, JSON.stringify({ live: [...model.certain] }));
      const killEarly = cycle > 0 && Math.random() < 0.15;
      const res = await runChild(pileDir, stateFile, cycle + 1, model, killEarly);
      if (res.ready !== undefined) {
        const rec = res.ready.recovery;
        if (lastKillAfterReady) expect(rec.ran, `cycle ${cycle}: child open after a kill must recover`).to.equal(true);
        if (rec.ran) {
          stats.recoveriesByChild++;
          stats.torn += rec.tornRecords;
          stats.journals += rec.journalsReplayed;
          stats.orphans += rec.orphansFreed;
          expect(res.ready.progressEvents, `cycle ${cycle}: recovery reports progress`).to.be.greaterThan(0);
        }
      }
      // Some cycles leave the crashed pile to the next child, so that a recovery can itself be killed.
      const skipCheck = cycle < CYCLES - 1 && Math.random() < 0.25;
      if (skipCheck) {
        lastKillAfterReady = lastKillAfterReady || res.killedAfterReady;
        continue;
      }
      const progress: { phase: string; done: number; total: number }[] = [];
      const pile = openPile({ dir: pileDir, onProgress: (p) => progress.push(p) });
      try {
        if (res.killedAfterReady || lastKillAfterReady) {
          expect(pile.lastRecovery.ran, `cycle ${cycle}: open after a kill recovers`).to.equal(true);
        }
        if (pile.lastRecovery.ran) {
          stats.recoveriesByTest++;
          stats.torn += pile.lastRecovery.tornRecords;
          stats.journals += pile.lastRecovery.journalsReplayed;
          stats.orphans += pile.lastRecovery.orphansFreed;
          expect(pile.lastRecovery.corrupt, `cycle ${cycle}`).to.deep.equal([]);
          const last = progress[progress.length - 1]!;
          expect(last.done, `cycle ${cycle}: progress ends complete`).to.equal(last.total);
          expect(progress.every((p) => p.phase === 'recover')).to.equal(true);
        }
        model.check(pile, cycle);
        model.checkGenerations(pileDir, cycle);
        stats.checks++;
      } finally {
        pile.close();
      }
      lastKillAfterReady = false;
    }
    // A clean close leads to an open that does not scan.
    const progress: unknown[] = [];
    const pile = openPile({ dir: pileDir, onProgress: (p) => progress.push(p) });
    try {
      expect(pile.lastRecovery.ran).to.equal(false);
      expect(progress).to.deep.equal([]);
      model.check(pile, CYCLES);
      model.checkGenerations(pileDir, CYCLES);
    } finally {
      pile.close();
    }
    // Not a speed check (a loaded machine gets through few operations per child): the kills must have hit work.
    expect(model.acked, 'the children did work').to.be.greaterThan(CYCLES);
    if (process.env.PILE_CRASH_VERBOSE)
      console.log({ cycles: CYCLES, acked: model.acked, interrupted: model.interruptedOps, live: model.certain.size, ...stats });
  });
});
