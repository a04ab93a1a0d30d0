import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile, type Pile, type PileStats, type VerifyReport } from '../src';
import type { Allocator } from '../src/alloc/Allocator';
import { R_ALLOC, R_OBJ, R_UTIL } from '../src/alloc/SegmentRows';
import { lineChild, type Line } from './fixtures/line-child';

/**
 * Issue 19: an append keeps what it adds to the counters in JS fields of their own (Allocator's pend*)
 * and adds them to its segment's row and the pile's counters only where those are read: the writer
 * turn's release (other processes work on the rows in pile.coord), a checkpoint (which saves the rows
 * recovery starts from), stats, verify and a new tail segment. These tests fail when one of those folds is missing: the rows then lag behind the
 * records that verify() walks, or recovery starts from a saved row that lacks them.
 */

const WRITER = path.join(__dirname, 'fixtures', 'tail-writer.js');
const SEG = 4 << 20;
const alloc = (pile: Pile): Allocator => (pile as unknown as { alloc: Allocator }).alloc;

function child(
  dir: string,
  env: Record<string, string> = {},
): { send: (cmd: object) => Promise<Line>; proc: ReturnType<typeof lineChild>['proc'] } {
  const c = lineChild(WRITER, { PILE_DIR: dir, ...env });
  let first: Promise<Line> | undefined = c.next();
  return {
    proc: c.proc,
    send: async (cmd) => {
      if (first !== undefined) {
        expect((await first).opened).to.equal(true);
        first = undefined;
      }
      c.proc.stdin!.write(`${JSON.stringify(cmd)}\n`);
      return c.next();
    },
  };
}

const exact = (r: VerifyReport): void => {
  expect(r.statsErrors).to.deep.equal([]);
  expect(r.ok).to.equal(true);
};

describe('tail counters (issue 19: an append writes no segment row)', function () {
  this.timeout(120_000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-tail-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('two processes appending in turn to one tail segment: stats and every row exact in both after each hand-over', async () => {
    const pile = openPile({ dir, segmentSize: SEG, checkpointInterval: 0 });
    const items = pile.schema('item', z.object({ v: z.number(), label: z.string() }));
    const w = child(dir, { PILE_SEED: '1000000' });
    try {
      let objects = 0;
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 200; i++) items.put({ v: i, label: `parent-${round}-${i}` });
        objects += 200;
        await new Promise((r) => setImmediate(r)); // the turn is released: the child takes it over
        const theirs = (await w.send({ put: 200 })).stats as PileStats;
        objects += 220;
        expect(theirs.objectCount).to.equal(objects);
        exact((await w.send({ verify: 1 })).report as VerifyReport);
        const ours = pile.stats;
        expect(ours).to.deep.equal(theirs);
        expect(ours.segmentCount).to.equal(1); // every put appended to the one tail segment
        exact(pile.verify());
        // The row of the tail's segment alone holds the pile's counters once stats folded them in.
        const a = alloc(pile);
        expect([a.rows[R_ALLOC], a.rows[R_UTIL], a.rows[R_OBJ], a.pendAlloc]).to.deep.equal([
          ours.allocatedBytes,
          ours.utilizedBytes,
          ours.objectCount,
          0,
        ]);
      }
      await w.send({ close: 1 }).catch(() => undefined);
    } finally {
      w.proc.kill('SIGKILL');
      pile.close();
    }
  });

  it('a checkpoint taken while the tail segment had pending counters, then SIGKILL: recovery adds the scan since to the saved row, and it is exact', async () => {
    // 25,000 typed puts of about 48 bytes pass checkpointBytes (1 MiB) in one event-loop turn, so the
    // writer turn is never released before the checkpoint that the next write takes.
    const w = child(dir, { PILE_CKPT_BYTES: String(1 << 20) });
    const stats = (await w.send({ kill: 25_000 })).stats as PileStats;
    await new Promise((r) => w.proc.once('exit', r));
    expect(stats.segmentCount).to.equal(1);
    const pile = openPile({ dir, segmentSize: SEG, checkpointInterval: 0 });
    try {
      const rec = pile.lastRecovery;
      expect(rec.ran).to.equal(true);
      expect(rec.full).to.equal(false);
      expect(rec.bytesScanned).to.be.below(SEG - 1024 * 1024); // from the checkpoint's tail on: its row came from pile.meta
      exact(pile.verify());
      expect(pile.stats.objectCount).to.equal(25_000);
      expect(alloc(pile).rows[R_OBJ]).to.equal(25_000);
    } finally {
      pile.close();
    }
  });
});
