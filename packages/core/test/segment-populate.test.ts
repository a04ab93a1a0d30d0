import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { native, type Mapping } from '@pile/native';
import { z } from 'zod';
import { openPile, type Pile } from '../src';
import { Segment } from '../src/storage/Segment';
import { buildCore } from './fixtures/build-core';

// Pages of fresh segment memory are faulted in ahead of the writer on a libuv worker
// (MADV_POPULATE_WRITE through @pile/native's Mapping.populate).

const CHUNK = 1 << 20;
const BIG = 64 << 20;
const PAGE = 4096;

/** Minor page faults taken by the main thread so far (Linux). */
function mainThreadFaults(): number {
  const stat = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7]);
}

function populate(m: Mapping, offset: number, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    if (!m.populate(offset, length, resolve)) reject(new Error('populate queued nothing'));
  });
}

/** Fresh anonymous memory, unmapped after the test. */
const mappings: Mapping[] = [];
function fresh(size: number): Mapping {
  const m = new native.Mapping(-1, size, 0, true);
  mappings.push(m);
  return m;
}

function touchPages(buf: Buffer): void {
  for (let i = 0; i < buf.length; i += PAGE) buf[i] = 1;
}

describe('segment pages faulted in ahead of the writer', function () {
  this.timeout(60_000);

  describe('Mapping.populate', () => {
    before(function () {
      if (!native.populateSupported()) this.skip();
    });
    afterEach(() => {
      for (const m of mappings.splice(0)) m.unmap();
    });

    it('faults the pages in on a worker: the main thread then writes them without faults', async function () {
      const cold = fresh(BIG).buffer;
      let f = mainThreadFaults();
      touchPages(cold);
      const coldFaults = mainThreadFaults() - f;
      // The control: fresh memory written page by page faults about once per page, unless the
      // kernel backed it with huge pages (then there is no per-page cost to take away).
      if (coldFaults < BIG / PAGE / 2) this.skip();

      const m = fresh(BIG);
      const warm = m.buffer;
      expect(await populate(m, 0, warm.length)).to.equal(0);
      f = mainThreadFaults();
      touchPages(warm);
      expect(mainThreadFaults() - f).to.be.lessThan(BIG / PAGE / 20);
    });

    it('never changes a byte, while the main thread writes the same pages', async () => {
      const m = fresh(BIG);
      const buf = m.buffer;
      const done = populate(m, 0, buf.length);
      for (let i = 0; i < buf.length; i += 61) buf[i] = (i % 251) + 1;
      expect(await done).to.equal(0);
      for (let i = 0; i < buf.length; i++) {
        if (buf[i] !== (i % 61 === 0 ? (i % 251) + 1 : 0)) expect.fail(`byte ${i} is ${buf[i]}`);
      }
    });

    it('refuses a range outside the mapping and arguments of the wrong type', () => {
      const m = fresh(PAGE * 4);
      expect(() => m.populate(PAGE, PAGE * 4)).to.throw(RangeError);
      expect(() => m.populate(-1, PAGE)).to.throw(TypeError);
      expect(() => (m.populate as (...a: unknown[]) => boolean)(0, PAGE, 'not a function')).to.throw(/done must be a function/);
      // Less than one whole page inside the range: nothing to do, nothing queued.
      expect(m.populate(1, PAGE)).to.equal(false);
    });

    it('a job queued before unmap() finishes before the memory is given back', async () => {
      const m = fresh(BIG);
      const buf = m.buffer;
      const done = populate(m, 0, BIG);
      m.unmap();
      expect(buf[BIG - 1]).to.equal(0);
      // Either it ran before the unmap (0) or found the mapping released and did nothing (ENXIO).
      expect([0, os.constants.errno.ENXIO]).to.include(await done);
      expect(() => m.populate(0, PAGE)).to.throw(/unmapped/);
    });
  });

  describe('the allocator asks for the pages ahead of its tail', () => {
    const Rec = z.object({ id: z.number().int(), name: z.string(), price: z.number() });
    let calls: { seg: number; from: number; to: number }[];
    let original: typeof Segment.prototype.populate;
    let tmp: string;

    beforeEach(() => {
      calls = [];
      original = Segment.prototype.populate;
      Segment.prototype.populate = function (this: Segment, from: number, to: number): void {
        calls.push({ seg: this.index, from, to });
        original.call(this, from, to);
      };
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-populate-'));
    });
    afterEach(() => {
      Segment.prototype.populate = original;
      fs.rmSync(tmp, { recursive: true, force: true });
    });

    /**
     * Once the tail has moved a chunk in a segment, after every put the pages from there to a
     * chunk past the tail (or the segment's end) were asked for. Puts served by free lists touch
     * no fresh pages.
     */
    function fillAndCheck(pile: Pile, segmentSize: number, puts: number): void {
      const view = pile.schema('rec', Rec);
      const alloc = (pile as unknown as { alloc: { tailAddr: number; tailEnd: number } }).alloc;
      const tailAtOpen = alloc.tailAddr;
      /** Segment -> the tail's offset after the first put that cut it there. */
      const firstTail = new Map<number, number>();
      for (let i = 0; i < puts; i++) {
        const generic = i % 5 === 0;
        const ptr = generic
          ? pile.put({ id: i, name: `generic ${i}`, price: i / 4 })
          : view.put({ id: i, name: `record ${i}`, price: i / 4 });
        expect(generic ? pile.get(ptr) : view.get(ptr)).to.deep.equal({
          id: i,
          name: `${generic ? 'generic' : 'record'} ${i}`,
          price: i / 4,
        });
        const tail = alloc.tailAddr;
        if (tail === 0 || tail === tailAtOpen) continue;
        const seg = Math.floor(tail / segmentSize);
        const off = tail - seg * segmentSize;
        if (!firstTail.has(seg)) firstTail.set(seg, off);
        // Armed at the first block cut in the segment, which starts at or before firstTail.
        if (off - firstTail.get(seg)! <= CHUNK) continue;
        const need = Math.min(segmentSize, off + CHUNK);
        // The requests for this segment run on from one another, without gaps.
        let covered = -1;
        for (const c of calls) {
          if (c.seg !== seg) continue;
          if (covered >= 0) expect(c.from, `request ${JSON.stringify(c)} leaves a gap`).to.equal(covered);
          else expect(c.from).to.be.at.most(off);
          covered = c.to;
        }
        if (covered < need) expect.fail(`after put ${i}: pages asked for up to ${covered} of segment ${seg}, tail at ${off}`);
      }
      expect(new Set(calls.map((c) => c.seg)).size, 'the puts fill more than one segment').to.be.greaterThan(1);
      expect(pile.verify().ok).to.equal(true);
    }

    it('a pile that writes less than a chunk asks for nothing', () => {
      const pile = openPile({ segmentSize: 2 * CHUNK });
      try {
        const view = pile.schema('rec', Rec);
        for (let i = 0; i < 5000; i++) view.put({ id: i, name: `record ${i}`, price: i });
        expect(pile.stats.allocatedBytes).to.be.lessThan(CHUNK);
        expect(calls).to.deep.equal([]);
      } finally {
        pile.close();
      }
    });

    it('in memory', () => {
      const pile = openPile({ segmentSize: 2 * CHUNK });
      try {
        fillAndCheck(pile, 2 * CHUNK, 60_000);
      } finally {
        pile.close();
      }
    });

    it('mapped, and again after a reopen', () => {
      const dir = path.join(tmp, 'pile');
      let pile = openPile({ dir, segmentSize: 2 * CHUNK });
      try {
        fillAndCheck(pile, 2 * CHUNK, 60_000);
      } finally {
        pile.close();
      }
      calls = [];
      pile = openPile({ dir });
      try {
        fillAndCheck(pile, 2 * CHUNK, 90_000);
      } finally {
        pile.close();
      }
      // A read-only open writes nothing and asks for nothing.
      calls = [];
      const ro = openPile({ dir, readonly: true });
      try {
        expect(ro.stats.objectCount).to.equal(150_000);
        expect(calls).to.deep.equal([]);
      } finally {
        ro.close();
      }
    });
  });

  it('worker threads that fill piles can be terminated at any moment (no page jobs run for them)', () => {
    buildCore();
    const r = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'worker-terminate.js'), '24'], {
      encoding: 'utf8',
      timeout: 50_000,
    });
    expect(r.signal, r.stderr).to.equal(null);
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.equal('terminated 24\n');
  });
});
