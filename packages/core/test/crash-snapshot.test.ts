import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type PilePointer } from '../src';
import { SEG, checkGenerations, metaFile, prng, where } from './fixtures/pile-files';
import { codeOf } from './fixtures/expect-error';

/**
 * A process killed between two operations leaves its files as they are in the page cache: a copy of
 * the directory taken then (segment files read through the page cache, pile.meta written by pwrite)
 * is what the next open finds after a SIGKILL there. This test takes such a copy after every few
 * operations of a seeded workload that checkpoints often (checkpointBytes at its 1 MiB minimum), and
 * opens it twice: as it is, recovering from the checkpoint (only what was written since is scanned),
 * and with the checkpoint made unreadable, recovering by a scan of everything. Both must keep every
 * record, refuse every deleted pointer, and keep the generation invariant (checkGenerations) before
 * and after new writes into the recovered pile: a checkpoint that brought back a tail or a free list
 * older than the segment (a write past the checkpoint not marked for the scan) would cut a block at
 * the generation of a record deleted there since.
 */

/** 300 in the suite; PILE_SNAPSHOT_OPS and PILE_SNAPSHOT_SEED for longer runs. */
const OPS = Number(process.env.PILE_SNAPSHOT_OPS ?? 300);
const SEED = Number(process.env.PILE_SNAPSHOT_SEED ?? 0x5eed);
const CHECKPOINT_AT = 4096;

function valueOf(r: () => number, seed: number): unknown {
  const x = r();
  // A few large values: they fill 1 MiB segments (the pile grows) and bring the next checkpoint closer.
  const len =
    x < 0.6 ? Math.floor(r() * 120) : x < 0.88 ? 200 + Math.floor(r() * 4000) : x < 0.94 ? 20_000 : 150_000 + Math.floor(r() * 150_000);
  if (r() < 0.25) {
    // Objects of a few shapes: new shapes add msgpack structures, which rewrite the catalog.
    const keys = ['a', 'b', 'c', 'd', 'e'].filter(() => r() < 0.5);
    const o: Record<string, unknown> = { seed, text: 'o'.repeat(len) };
    for (const k of keys) o[k] = seed;
    return o;
  }
  return `${seed}:`.padEnd(len, 'x');
}

/** A copy of a pile directory as a SIGKILL would leave it (without the lock, whose pid is alive). */
function killCopy(from: string, to: string): void {
  fs.mkdirSync(to);
  for (const f of fs.readdirSync(from)) {
    if (f === 'pile.lock' || f.startsWith('pile.reader.')) continue;
    fs.copyFileSync(path.join(from, f), path.join(to, f));
  }
}

describe('a kill between any two operations: recovery from the checkpoint and from a full scan keep generations', function () {
  this.timeout(600_000);
  let tmp: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-snapshot-'));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it(`${OPS} operations, a kill copy after each, the pile reopened (a checkpoint) every few`, () => {
    const dir = path.join(tmp, 'pile');
    const r = prng(SEED);
    const live = new Map<PilePointer, unknown>();
    const deleted = new Set<number>();
    const roots = ['x', 'y'];
    let seed = 0;
    let copies = 0;
    let fromCheckpoint = 0;
    let maxSegment = 0;
    const options = { dir, segmentSize: SEG, checkpointBytes: 1 << 20, checkpointInterval: 0 };
    let pile = openPile(options);
    // As the SIGKILL test's writers do: an open (which checkpoints), a few operations, then the kill.
    let reopenAt = 0;
    /** Half the sessions change only records they put themselves (writes past the checkpoint's tail, when cut from it). */
    let session: PilePointer[] | undefined;
    try {
      for (let n = 0; n < OPS; n++) {
        if (n === reopenAt) {
          pile.close();
          pile = openPile(options);
          reopenAt = n + 1 + Math.floor(r() * 12);
          session = r() < 0.5 ? [] : undefined;
        }
        const keys = session ?? [...live.keys()];
        // Mostly one of the newest records: a write past the checkpoint's tail is marked as such, and
        // recovery then scans from there instead of the whole pile.
        const pick = (): PilePointer =>
          keys[r() < 0.7 ? Math.max(0, keys.length - 1 - Math.floor(r() * 8)) : Math.floor(r() * keys.length)]!;
        const x = r();
        if (keys.length === 0 || x < 0.4 || (session !== undefined && x >= 0.9)) {
          const v = valueOf(r, ++seed);
          const p = pile.put(v, r() < 0.1 ? { preallocate: Math.floor(r() * 3000) } : undefined);
          live.set(p, v);
          session?.push(p);
          maxSegment = Math.max(maxSegment, where(p).segment);
        } else if (x < 0.65) {
          const p = pick();
          const v = valueOf(r, ++seed);
          pile.set(p, v);
          live.set(p, v);
        } else if (x < 0.9) {
          const p = pick();
          expect(pile.delete(p)).to.equal(true);
          live.delete(p);
          deleted.add(p);
          if (session !== undefined) session.splice(session.indexOf(p), 1);
        } else if (x < 0.98) {
          pile.setRoot(roots[Math.floor(r() * roots.length)]!, r() < 0.3 ? null : pick());
        } else {
          pile.compact();
        }
        const label = `op ${n}`;
        checkGenerations(dir, deleted, `${label}, the pile itself`);
        // The copy recovered by a full scan after every third operation only (the recovery from the checkpoint is the one under test).
        for (const full of n % 3 === 0 ? [false, true] : [false]) {
          const copy = path.join(tmp, `copy-${copies++}`);
          killCopy(dir, copy);
          // Unreadable checkpoint (its CRC fails): the open scans every segment.
          if (full) {
            const fd = fs.openSync(metaFile(copy), 'r+');
            fs.writeSync(fd, Buffer.alloc(4, 0xff), 0, 4, CHECKPOINT_AT);
            fs.closeSync(fd);
          }
          const at = `${label}, ${full ? 'full scan' : 'from the checkpoint'}`;
          const q = openPile({ dir: copy, checkpointInterval: 0 });
          try {
            expect(q.lastRecovery.ran, at).to.equal(true);
            // From the checkpoint unless a write since marked a segment as written anywhere.
            if (full) expect(q.lastRecovery.full, at).to.equal(true);
            expect(q.lastRecovery.corrupt, at).to.deep.equal([]);
            if (!q.lastRecovery.full) fromCheckpoint++;
            for (const [p, v] of live) expect(q.get(p), `${at}: record ${p}`).to.deep.equal(v);
            for (const p of deleted) {
              // A segment compact() released (and the pile did not grow again) has no blocks to be stale in.
              const gone = where(p as PilePointer).segment >= q.stats.segmentCount;
              expect(
                codeOf(() => q.get(p as PilePointer)),
                `${at}: deleted ${p}`,
              ).to.equal(gone ? 'PILE_INVALID_POINTER' : 'PILE_STALE_POINTER');
            }
            expect(q.stats.objectCount, at).to.equal(live.size);
            checkGenerations(copy, deleted, `${at}, after recovery`);
            // New blocks cut from what recovery rebuilt (tail, free lists): records, bodies of grown
            // records, journals, catalogs; none may take a deleted record's tag where it lay.
            const copyDeleted = new Set(deleted);
            const mine: PilePointer[] = [];
            for (let k = 0; k < 12; k++) {
              const p = q.put(`new ${k}`.padEnd(1 + Math.floor(r() * 600), 'n'));
              expect(copyDeleted.has(p), `${at}: a new put got deleted pointer ${p}`).to.equal(false);
              mine.push(p);
              if (k % 3 === 2) q.set(p, 'grown '.repeat(300));
              if (k % 4 === 3) q.setRoot('x', p);
            }
            for (const p of mine.slice(0, 6)) {
              q.delete(p);
              copyDeleted.add(p);
            }
            for (const [p, v] of live) expect(q.get(p), `${at}: record ${p} after new writes`).to.deep.equal(v);
            expect(q.verify().ok, at).to.equal(true);
            checkGenerations(copy, copyDeleted, `${at}, after new writes`);
          } finally {
            q.close();
          }
          fs.rmSync(copy, { recursive: true, force: true });
        }
      }
    } finally {
      pile.close();
    }
    // Copies did recover from checkpoints, not only from full scans, and the pile grew past one segment.
    expect(fromCheckpoint).to.be.at.least(10);
    expect(maxSegment).to.be.greaterThan(0);
    if (process.env.PILE_SNAPSHOT_VERBOSE) console.log({ ops: OPS, seed: SEED, copies, fromCheckpoint, maxSegment, deleted: deleted.size });
  });
});
