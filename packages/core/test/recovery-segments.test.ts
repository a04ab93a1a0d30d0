import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile, type PilePointer } from '../src';
import type { Allocator } from '../src/alloc/Allocator';
import { NUM_CLASSES } from '../src/alloc/SizeClass';
import type { PointerFormat } from '../src/records/PointerFormat';
import { ROW, R_ALLOC } from '../src/alloc/SegmentRows';
import { copyDir, dropCoord, metaFile } from './fixtures/pile-files';

/**
 * Issue 19: free lists and counters per segment (pile format 4). After a writer killed with SIGKILL
 * deleted, set or reused blocks of some segments since its checkpoint, the next open rescans those
 * segments alone, takes every other segment's lists and counters from the checkpoint, and comes to
 * the allocator state that a scan of the whole pile finds: the same counters, per segment and in
 * all, and the same free blocks in each segment's list of each class. Those opens are without
 * pile.coord, as after a machine crash; with it (the same boot) the open recovers from its rows and
 * scans only the tail's part appended since the last fold, to the same state.
 */

const SEG = 1 << 20;
const WRITER = path.join(__dirname, 'fixtures', 'segment-writer.js');
type Op = ['del', PilePointer] | ['set', PilePointer, number] | ['put', number];
const inside = (pile: Pile): { alloc: Allocator; fmt: PointerFormat } => pile as unknown as { alloc: Allocator; fmt: PointerFormat };

/** A small deterministic generator (xorshift32): each seed is one case. */
function random(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

/**
 * The allocator state a test compares: the tail, each segment's counters, and the bytes of the free
 * blocks its lists hold. Not the lists' blocks themselves: a segment not written since the
 * checkpoint keeps its lists as its writer left them, where two free blocks may lie side by side (a
 * block freed before the one after it; free() merges only forward), while a scan merges them.
 */
function stateOf(pile: Pile): { tail: number[]; rows: number[][]; listed: number[] } {
  const { alloc } = inside(pile);
  const n = pile.stats.segmentCount;
  const rows: number[][] = [];
  const listed: number[] = [];
  for (let s = 0; s < n; s++) {
    rows.push(Array.from(alloc.rows.subarray(s * ROW + R_ALLOC, s * ROW + R_ALLOC + 6)));
    const seg = (alloc.segments[s] as unknown as { use(): { u32: Uint32Array; f64: Float64Array } }).use();
    let bytes = 0;
    for (let c = 0; c < NUM_CLASSES; c++) {
      for (let a = alloc.rows[s * ROW + c]!; a !== 0; a = seg.f64[(a - s * SEG + 16) >>> 3]!) bytes += seg.u32[(a - s * SEG) >>> 2]!;
    }
    listed.push(bytes);
  }
  return { tail: [alloc.tailAddr, alloc.tailEnd, alloc.tailGen], rows, listed };
}

/** Compares two states part by part, so that a failure names the segment or list that differs. */
function sameState(a: ReturnType<typeof stateOf>, b: ReturnType<typeof stateOf>, what = ''): void {
  expect(a.tail, `${what} tail`).to.deep.equal(b.tail);
  a.rows.forEach((row, s) => expect(row, `${what} segment ${s} counters`).to.deep.equal(b.rows[s]));
  expect(a.listed, `${what} listed bytes by segment`).to.deep.equal(b.listed);
}

describe('recovery rescans only the segments written since the checkpoint (issue 19, format 4)', function () {
  this.timeout(300_000);
  let tmp: string;
  let built: string;
  /** The records of the built pile by segment, and every value. */
  let bySegment: PilePointer[][];
  let values: Map<PilePointer, string>;

  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-segrec-'));
    built = path.join(tmp, 'built');
    const pile = openPile({ dir: built, segmentSize: SEG });
    const r = random(7);
    const ptrs: PilePointer[] = [];
    values = new Map();
    for (let i = 0; ptrs.length < 9000; i++) {
      const v = String(i).padEnd(40 + r(600), 'v');
      const p = pile.put(v);
      ptrs.push(p);
      values.set(p, v);
    }
    // Every fourth deleted: each segment has free lists, none with free neighbours to merge.
    for (let i = 0; i < ptrs.length; i += 4) {
      pile.delete(ptrs[i]!);
      values.delete(ptrs[i]!);
    }
    const fmt = inside(pile).fmt;
    bySegment = [];
    for (const p of values.keys()) (bySegment[fmt.segmentOf(fmt.addressOf(p))] ??= []).push(p);
    expect(pile.stats.segmentCount).to.be.greaterThan(3);
    pile.close();
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  let n = 0;
  /** A copy of the built pile after a child carried out `ops` and was killed; the values it leaves. */
  function killedAfter(ops: Op[]): { dir: string; values: Map<PilePointer, string> } {
    const dir = path.join(tmp, `case-${n++}`);
    copyDir(built, dir);
    const opsFile = `${dir}.json`;
    fs.writeFileSync(opsFile, JSON.stringify(ops));
    const child = spawnSync(process.execPath, [WRITER], { env: { ...process.env, PILE_DIR: dir, PILE_OPS: opsFile }, encoding: 'utf8' });
    expect(child.signal, child.stderr).to.equal('SIGKILL');
    const puts = JSON.parse(child.stdout.trim()) as PilePointer[];
    const left = new Map(values);
    let k = 0;
    for (const op of ops) {
      if (op[0] === 'del') left.delete(op[1]);
      else if (op[0] === 'set') left.set(op[1], 's'.repeat(op[2]));
      else left.set(puts[k++]!, 'p'.repeat(op[1]));
    }
    return { dir, values: left };
  }

  /**
   * Opens a copy of `dir`: from pile.coord ('coord', as the same boot does), or without it (as after a
   * machine crash) from pile.meta's checkpoint ('ckpt') or, the checkpoint damaged, by a full scan
   * ('full'). Checks every value and verify; returns the state.
   */
  function recover(
    dir: string,
    left: Map<PilePointer, string>,
    from: 'coord' | 'ckpt' | 'full',
  ): { state: ReturnType<typeof stateOf>; report: Pile['lastRecovery']; stats: Pile['stats'] } {
    const copy = `${dir}-${from}`;
    copyDir(dir, copy);
    if (from !== 'coord') dropCoord(copy);
    if (from === 'full') {
      const fd = fs.openSync(metaFile(copy), 'r+');
      fs.writeSync(fd, Buffer.alloc(4), 0, 4, 4096); // the checkpoint's CRC
      fs.closeSync(fd);
    }
    const pile = openPile({ dir: copy, verifyOnRead: true });
    try {
      expect(pile.lastRecovery.source, from).to.equal(from === 'coord' ? 'coord' : from === 'ckpt' ? 'checkpoint' : 'scan');
      for (const [p, v] of left) expect(pile.get(p)).to.equal(v);
      expect(pile.stats.objectCount).to.equal(left.size);
      const v = pile.verify();
      expect(v.ok, JSON.stringify(v)).to.equal(true);
      return { state: stateOf(pile), report: { ...pile.lastRecovery }, stats: pile.stats };
    } finally {
      pile.close();
    }
  }

  /**
   * After a writer killed between writes, the recovery from pile.coord (same boot) takes every row as
   * the writer left it and scans one region, the tail's segment from the last fold of its counters,
   * and comes to the state of a full scan.
   */
  function fromCoord(dir: string, left: Map<PilePointer, string>, whole: ReturnType<typeof recover>, what = ''): void {
    const coord = recover(dir, left, 'coord');
    expect(coord.report.full, what).to.equal(false);
    expect(coord.report.regionsScanned, what).to.equal(1);
    expect(coord.report.bytesScanned, what).to.be.at.most(SEG - 64);
    expect(coord.stats, what).to.deep.equal(whole.stats);
    sameState(coord.state, whole.state, `${what} from pile.coord`);
  }

  /** Recovers after `ops` from the checkpoint and by a full scan: `segments` rescanned (a number, or at most the pile less one). */
  function compare(ops: Op[], segments: number | 'fewer'): Pile['lastRecovery'] {
    const { dir, values: left } = killedAfter(ops);
    const partial = recover(dir, left, 'ckpt');
    const whole = recover(dir, left, 'full');
    expect(whole.report.full).to.equal(true);
    expect(partial.report.ran).to.equal(true);
    expect(partial.report.full).to.equal(false);
    if (segments === 'fewer') expect(partial.report.regionsScanned).to.be.lessThan(whole.report.regionsScanned);
    else {
      expect(partial.report.regionsScanned).to.equal(segments);
      expect(partial.report.bytesScanned).to.equal(segments * (SEG - 64));
    }
    expect(partial.stats).to.deep.equal(whole.stats);
    sameState(partial.state, whole.state);
    fromCoord(dir, left, whole);
    return partial.report;
  }

  it('deletes in one segment: that segment alone is rescanned', () => {
    const recs = bySegment[1]!;
    compare(
      Array.from({ length: 200 }, (_, i): Op => ['del', recs[3 * i]!]),
      1,
    );
  });

  it('same-length sets in one segment: that segment and those whose free blocks the journals took', () => {
    const recs = bySegment[2]!;
    // A journal is cut from the first segment with a free block of its class (segment 0 here).
    compare(
      Array.from({ length: 100 }, (_, i): Op => ['set', recs[3 * i + 1]!, values.get(recs[3 * i + 1]!)!.length]),
      'fewer',
    );
  });

  it('a delete in each of two segments: those two are rescanned', () => {
    compare(
      [
        ['del', bySegment[0]![10]!],
        ['del', bySegment[2]![10]!],
      ],
      2,
    );
  });

  it('puts that take blocks from the free lists: only the segments they came from are rescanned', () => {
    compare(
      Array.from({ length: 50 }, (_, i): Op => ['put', 40 + ((i * 37) % 600)]),
      'fewer',
    );
  });

  it('random deletes, sets and puts in random segments (12 seeds): the state a scan of everything finds', () => {
    for (let seed = 1; seed <= 12; seed++) {
      const r = random(seed);
      const touched = new Set<number>();
      const segCount = bySegment.length;
      const live = bySegment.map((recs) => [...recs]);
      const ops: Op[] = [];
      const pick = 1 + r(2);
      const segs = Array.from({ length: pick }, () => r(segCount));
      for (let i = 0; i < 1 + r(300); i++) {
        const s = segs[r(segs.length)]!;
        const recs = live[s]!;
        if (recs.length === 0) continue;
        const at = r(recs.length);
        const p = recs[at]!;
        if (r(2) === 0) {
          ops.push(['del', p]);
          recs.splice(at, 1);
        } else ops.push(['set', p, values.get(p)!.length]);
        touched.add(s);
      }
      // Sometimes a few puts, which reuse freed blocks (of any segment) or cut the tail.
      if (r(3) === 0) for (let i = 0; i < 5; i++) ops.push(['put', 40 + r(600)]);
      const { dir, values: left } = killedAfter(ops);
      const partial = recover(dir, left, 'ckpt');
      const whole = recover(dir, left, 'full');
      expect(partial.report.full, `seed ${seed}`).to.equal(false);
      expect(partial.report.regionsScanned, `seed ${seed}`).to.be.at.least(touched.size);
      expect(partial.stats, `seed ${seed}`).to.deep.equal(whole.stats);
      sameState(partial.state, whole.state, `seed ${seed}`);
      fromCoord(dir, left, whole, `seed ${seed}`);
    }
  });
});
