import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile, type PilePointer } from '../src';
import { SEGMENT_HEADER_SIZE } from '../src/storage/BlockFormat';
import { buildCore } from './fixtures/build-core';
import { killedChild, repairedByPut } from './fixtures/holder-kills';
import { where } from './fixtures/pile-files';

// The undo log of the write in progress (UndoLog.ts; docs/concurrency.md, "A holder's death"): a
// holder SIGKILLed inside a delete, an in-place set or a put into a free block, at every store
// that write logs (the fault point 'undo-logged', passed once per entry, just before the store it
// guards), leaves a pile that the repair puts back exactly as the last complete write left it,
// rescanning only the tail's part appended since its last fold: never a whole segment.

const VICTIM = path.join(__dirname, 'fixtures', 'undo-victim.js');
const SEG = 1 << 20;
const SEGS = 3;
const value = (i: number): string => `value-${i}-`.padEnd(150, 'v');
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Runs the victim until it is killed; returns its last line ({done, hits} when its write returned). */
function victim(dir: string, env: Record<string, string>): { done?: unknown; hits?: number } {
  return killedChild(VICTIM, dir, env).pop() ?? {};
}

describe('the undo log: a holder killed inside a write', function () {
  this.timeout(600_000);
  let tmp: string;
  let dir: string;
  let pile: Pile;
  let model: Map<PilePointer, string>;
  /** Records by segment, in the order they were put. */
  let bySeg: PilePointer[][];

  before(() => buildCore());
  beforeEach(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-undo-'));
    dir = path.join(tmp, 'pile');
    model = new Map();
    bySeg = [];
    const first = openPile({ dir, segmentSize: SEG });
    for (let i = 0; first.stats.segmentCount < SEGS || where([...model.keys()].pop()!).offset < SEG / 2; i++) {
      const p = first.put(value(i));
      model.set(p, value(i));
      (bySeg[where(p).segment] ??= []).push(p);
    }
    first.close();
    pile = openPile({ dir, checkpointInterval: 0, checkpointBytes: 1 << 30 });
    // Free blocks, none beside another: every tenth record of each segment but the tail's last ones.
    for (const ptrs of bySeg) {
      for (let k = 5; k < ptrs.length - 50; k += 10) {
        expect(pile.delete(ptrs[k]!)).to.equal(true);
        model.delete(ptrs[k]!);
      }
    }
    await tick(); // the turn is let go
  });
  /** The test process's next write repairs; every record of the model is there, exactly; verify holds. */
  function repairedAsBefore(): Pile['lastRecovery'] {
    const { after, report } = repairedByPut(pile);
    expect(pile.stats.objectCount).to.equal(model.size + 1);
    expect(pile.delete(after)).to.equal(true);
    for (const [p, v] of model) expect(pile.get(p), `record ${p}`).to.equal(v);
    const v = pile.verify();
    expect(v.ok, JSON.stringify(v).slice(0, 2000)).to.equal(true);
    return report;
  }

  /** Only the tail's part appended since its last fold was rescanned, after `n` stores were put back. */
  function tailOnly(r: Pile['lastRecovery'], n: number, what: string): void {
    expect(r.source, what).to.equal('coord');
    expect(r.storesUndone, `${what}: every store logged was put back`).to.equal(n);
    expect(r.regionsScanned, what).to.be.at.most(1);
    expect(r.bytesScanned, `${what}: no whole segment`).to.be.below(SEG - SEGMENT_HEADER_SIZE);
  }

  /**
   * Kills the victim's write at its 1st, 2nd, ... logged store until it returns; after each kill
   * the repair must give back the pile as it was before the write. Returns the stores the whole write logs.
   */
  async function everyStore(env: Record<string, string>, onDone: (done: unknown) => void): Promise<number> {
    for (let n = 1; ; n++) {
      await tick(); // the turn the last repair took is let go
      const out = victim(dir, { ...env, PILE_KILL_AT: 'undo-logged', PILE_KILL_N: String(n) });
      if (out.done !== undefined) {
        expect(out.hits, `${env.PILE_OP} logs`).to.equal(n - 1);
        onDone(out.done);
        repairedAsBefore();
        return n - 1;
      }
      tailOnly(repairedAsBefore(), n, `${env.PILE_OP} killed at its logged store ${n}`);
    }
  }

  afterEach(() => {
    pile.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  for (const inTail of [false, true]) {
    const where_ = inTail ? "the tail's segment" : 'a segment below the tail';
    const pick = (): PilePointer => {
      const ptrs = inTail ? bySeg[bySeg.length - 1]! : bySeg[1]!;
      return [...ptrs].reverse().find((p) => model.has(p) && (!inTail || ptrs.indexOf(p) < ptrs.length - 60))!;
    };

    it(`a delete in ${where_}: killed at each store it logs, the record is back whole`, async () => {
      const p = pick();
      const n = await everyStore({ PILE_OP: 'delete', PILE_PTR: String(p) }, (done) => {
        expect(done).to.equal(true);
        model.delete(p);
      });
      expect(n).to.be.greaterThan(3);
    });

    it(`an in-place set in ${where_}: killed at each store it logs, the old value is back whole`, async () => {
      const p = pick();
      const next = `set-${p}-`.padEnd(150, 's');
      const n = await everyStore({ PILE_OP: 'set', PILE_PTR: String(p), PILE_VALUE: next }, () => model.set(p, next));
      expect(n, 'the journal, the record and the rows').to.be.greaterThan(10);
    });
  }

  for (const [name, v] of [
    ['the same size', 'put-'.padEnd(150, 'p')],
    ['a smaller size (the rest listed)', 'put-'.padEnd(40, 'p')],
  ] as const) {
    it(`a put into a free block of ${name}: killed at each store it logs, the block is free again`, async () => {
      const n = await everyStore({ PILE_OP: 'put', PILE_VALUE: v }, (done) => {
        const p = done as PilePointer;
        expect(where(p).segment, 'a free block below the tail').to.be.below(SEGS - 1);
        model.set(p, v);
      });
      expect(n).to.be.greaterThan(3);
    });
  }

  it('a repairer killed while it puts the stores back: the next repair puts them all back', () => {
    const p = bySeg[1]!.find((q) => model.has(q))!;
    const next = `set-${p}-`.padEnd(150, 's');
    expect(
      victim(dir, { PILE_OP: 'set', PILE_PTR: String(p), PILE_VALUE: next, PILE_KILL_AT: 'undo-logged', PILE_KILL_N: '12' }).done,
    ).to.equal(undefined);
    // This one repairs as it opens, and dies after putting back half of them.
    expect(victim(dir, { PILE_OP: 'none', PILE_KILL_AT: 'undo-restoring', PILE_KILL_N: '6' }).done).to.equal(undefined);
    tailOnly(repairedAsBefore(), 12, 'the second repair');
  });

  it('a repairer killed after it put the stores back: the next repair rescans what the dead turns stamped', () => {
    const p = bySeg[0]!.find((q) => model.has(q))!;
    expect(victim(dir, { PILE_OP: 'delete', PILE_PTR: String(p), PILE_KILL_AT: 'undo-logged', PILE_KILL_N: '4' }).done).to.equal(undefined);
    expect(victim(dir, { PILE_OP: 'none', PILE_KILL_AT: 'region-walked', PILE_KILL_N: '1' }).done).to.equal(undefined);
    const r = repairedAsBefore();
    expect(r.storesUndone).to.equal(0);
    expect(r.regionsScanned, 'the record segment, whole, and the tail').to.be.within(1, 3);
  });

  it('a set too large for the log: not trusted, the repair replays its journal from the stamped segments', async () => {
    const big = bySeg[1]!.find((q) => model.has(q))!;
    const p = pile.put('b'.repeat(4000));
    model.set(p, 'b'.repeat(4000));
    await tick();
    const next = 'n'.repeat(4000);
    expect(victim(dir, { PILE_OP: 'set', PILE_PTR: String(p), PILE_VALUE: next, PILE_KILL_AT: 'journal-committed' }).done).to.equal(
      undefined,
    );
    model.set(p, next);
    const r = repairedAsBefore();
    expect(r.storesUndone).to.equal(0);
    expect(r.journalsReplayed).to.equal(1);
    expect(pile.get(big)).to.equal(model.get(big));
  });

  it('the last process killed inside a delete: the next open puts its stores back from pile.coord, and rescans the tail only', () => {
    const p = bySeg[1]!.find((q) => model.has(q))!;
    pile.close();
    expect(victim(dir, { PILE_OP: 'delete', PILE_PTR: String(p), PILE_KILL_AT: 'undo-logged', PILE_KILL_N: '5' }).done).to.equal(undefined);
    pile = openPile({ dir });
    tailOnly(pile.lastRecovery, 5, 'the open');
    expect(pile.stats.objectCount).to.equal(model.size);
    for (const [q, v] of model) expect(pile.get(q), `record ${q}`).to.equal(v);
    expect(pile.verify().ok).to.equal(true);
  });
});
