import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile } from '../src/Pile';
import { PileError } from '../src/PileError';
import type { PilePointer } from '../src/records/PilePointer';

const MiB = 1 << 20;

/** A deterministic generator, so a failure replays. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function expectVerified(pile: Pile): void {
  const r = pile.verify();
  expect(r.statsErrors).to.deep.equal([]);
  expect(r.freeListErrors).to.equal(0);
  expect(r.ok, JSON.stringify(r)).to.equal(true);
}

/** Puts records of `size` bytes until the pile is at its maxMemory; returns their pointers. */
function fill(pile: Pile, size: number): PilePointer[] {
  const ptrs: PilePointer[] = [];
  const v = Buffer.alloc(size, 1);
  for (;;) {
    try {
      ptrs.push(pile.put(v));
    } catch (err) {
      if (err instanceof PileError && err.code === 'PILE_OUT_OF_SPACE') return ptrs;
      throw err;
    }
  }
}

describe('allocator free lists', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-alloc-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const mapped of [false, true]) {
    const open = (maxMemory?: number) =>
      openPile({ ...(mapped ? { dir } : {}), segmentSize: MiB, ...(maxMemory === undefined ? {} : { maxMemory }) });
    describe(mapped ? 'mapped' : 'in memory', () => {
      it('deleted space is reused: putting the same sizes again does not grow the pile', () => {
        const pile = open();
        const sizes = [10, 100, 1000, 5000];
        let ptrs = Array.from({ length: 800 }, (_, i) => pile.put(Buffer.alloc(sizes[i % 4]!, i)));
        const st = pile.stats;
        for (let round = 0; round < 6; round++) {
          for (const p of ptrs) pile.delete(p);
          expect(pile.stats.objectCount).to.equal(0);
          // Rounds 0..2: the same sequence, so every block is reused exactly; then shuffled sizes.
          const shift = round < 3 ? 0 : round;
          ptrs = Array.from({ length: 800 }, (_, i) => pile.put(Buffer.alloc(sizes[(i + shift) % 4]!, i)));
          expect(pile.stats.segmentCount).to.equal(st.segmentCount);
          // Every block is reused for a record of its size, but for the rest of each segment's tail
          // left when the next segment was added: a segment's lists are searched before the next
          // one's, and a request of that rest's size class may take it, with fewer than
          // MIN_BLOCK_SIZE (32) bytes over, which stay in the block.
          const over = pile.stats.allocatedBytes - st.allocatedBytes;
          if (round < 3) expect(over).to.be.within(0, 24 * st.segmentCount);
        }
        expectVerified(pile);
        pile.close();
      });

      it('space freed front to back is merged for larger records instead of growing the pile', () => {
        const pile = open(2 * MiB);
        const small = fill(pile, 100);
        for (const p of small) pile.delete(p); // in address order: each freed block precedes a live one
        const free = pile.stats.freeBytes;
        expect(free).to.be.greaterThan(2 * MiB - 1024);
        const big = Buffer.alloc(5000, 2);
        const ptrs: PilePointer[] = [];
        while (pile.stats.freeBytes > free / 3) ptrs.push(pile.put(big));
        expect(pile.stats.segmentCount).to.equal(2);
        for (const p of ptrs) expect(pile.get<Buffer>(p).equals(big)).to.equal(true);
        expectVerified(pile);
        pile.close();
      });

      it('under maxMemory, a pile emptied record by record takes larger records again (no PILE_OUT_OF_SPACE)', () => {
        const pile = open(2 * MiB);
        const small = fill(pile, 200);
        for (const p of small) pile.delete(p);
        const ptrs: PilePointer[] = [];
        for (let i = 0; i < 200; i++) ptrs.push(pile.put(Buffer.alloc(8000, i)));
        expect(pile.stats.segmentCount).to.equal(2);
        ptrs.forEach((p, i) => expect(pile.get<Buffer>(p)[0]).to.equal(i & 0xff));
        expectVerified(pile);
        pile.close();
      });

      it('stats stay exact through random puts, sets, deletes and preallocations', () => {
        const pile = open();
        const rand = rng(mapped ? 7 : 11);
        const live: PilePointer[] = [];
        for (let i = 0; i < 3000; i++) {
          const r = rand();
          const size = Math.floor(rand() ** 3 * 6000);
          if (r < 0.45 || live.length === 0) {
            const v = rand() < 0.5 ? Buffer.alloc(size, i) : { i, s: 'v'.repeat(size) };
            live.push(rand() < 0.2 ? pile.put(v, { preallocate: size * 2 }) : pile.put(v));
          } else if (r < 0.75) {
            pile.set(live[Math.floor(rand() * live.length)]!, 'w'.repeat(size));
          } else {
            const j = Math.floor(rand() * live.length);
            expect(pile.delete(live[j]!)).to.equal(true);
            live[j] = live[live.length - 1]!;
            live.pop();
          }
          if (i % 500 === 0) expectVerified(pile);
        }
        const st = pile.stats;
        expect(st.objectCount).to.equal(live.length);
        expect(st.overheadBytes).to.equal(st.allocatedBytes - st.utilizedBytes);
        expect(st.totalBytes).to.equal(st.segmentCount * MiB);
        // Every byte of every segment is a segment header, an allocated block or a free block.
        expect(st.allocatedBytes + st.freeBytes + 64 * st.segmentCount).to.equal(st.totalBytes);
        expectVerified(pile);
        pile.close();
      });
    });
  }
});
