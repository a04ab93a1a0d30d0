import { expect } from 'chai';
import fc from 'fast-check';
import { openPile } from '@pile/core';
import { openCache, type CacheTable } from '../src';
import { H_TOMBS } from '../src/EntryFormat';
import { SEG, tempDir } from './helpers';

/** Every live slot is reachable from its home: no empty slot lies between them. Returns the mean displacement. */
function checkIndex(t: CacheTable<unknown>): number {
  const idx = t.idx;
  const ptr = (i: number): number => idx.f64[i >>> idx.shift]![3 * (i & idx.mask)]!;
  let total = 0;
  let live = 0;
  for (let i = 0; i < idx.capacity; i++) {
    if (ptr(i) <= 0) continue;
    const home = idx.home(idx.u32[i >>> idx.shift]![6 * (i & idx.mask) + 4]!);
    let d = 0;
    for (let j = home; j !== i; j = (j + 1) % idx.capacity, d++) {
      expect(ptr(j), `slot ${j} between home ${home} and entry at ${i}`).to.not.equal(0);
    }
    total += d;
    live++;
  }
  return live === 0 ? 0 : total / live;
}

describe('cache removal (backward shift)', () => {
  it('a durable table at its memory limit keeps no tombstones and short probes through 10x churn', () => {
    const cache = openCache({ segmentSize: SEG, maxMemory: 4 * SEG, sweepIntervalSec: 0 });
    const t = cache.table<string>('t', { collisionMode: 'durable' });
    const value = 'v'.repeat(40);
    let i = 0;
    while (t.stats.evicted === 0) t.put(`k${i++}`, value);
    const fit = i;
    for (let n = 0; n < 10 * fit; n++) t.put(`k${i++}`, value);
    // Eviction removes as many entries as the puts add: before backward shift each left a
    // tombstone until no empty slot was left, and every miss probed the whole index.
    expect(t.header[H_TOMBS]).to.equal(0);
    expect(t.count).to.be.at.most(t.capacity * 0.75);
    // Linear probing at a load of 0.75 displaces an entry by 2.5 slots on average.
    expect(checkIndex(t as CacheTable<unknown>)).to.be.below(6);
    let live = 0;
    for (const k of t.keys()) {
      expect(t.get(k)).to.equal(value);
      live++;
    }
    expect(live).to.equal(t.count);
    expect(t.get(`k${i - 1}`)).to.equal(value);
    cache.close();
  });

  it('keeps every entry reachable through random puts and removes in a crowded index (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ put: fc.boolean(), key: fc.integer({ min: 0, max: 47 }) }), { maxLength: 300 }),
        fc.constantFrom('durable' as const, 'speculative' as const),
        (ops, mode) => {
          const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
          // 64 slots, at most 48 keys (24 speculative, so that no 32-slot window is ever full):
          // long clusters that wrap around the end.
          const t = cache.table<number>('m', {
            collisionMode: mode,
            initialCapacity: 64,
            minCapacity: 64,
            maxCapacity: 64,
            loadFactorHigh: 1,
          });
          const model = new Map<number, number>();
          try {
            ops.forEach((op, n) => {
              const o = { put: op.put, key: mode === 'durable' ? op.key : op.key >> 1 };
              if (o.put) {
                const r = t.put(o.key, n);
                if (r === 'inserted' || r === 'replaced') model.set(o.key, n);
                else expect.fail(`unexpected ${r}: every key has a free slot in its window`);
              } else {
                expect(t.remove(o.key)).to.equal(model.delete(o.key));
              }
              expect(t.header[H_TOMBS]).to.equal(0);
              checkIndex(t as CacheTable<unknown>);
            });
            expect(t.count).to.equal(model.size);
            for (const [k, v] of model) expect(t.get(k)).to.equal(v);
            expect(new Map(t.entries())).to.deep.equal(model);
          } finally {
            cache.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('removing the key just yielded during keys() still visits every other key once', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<number>('t', {
      collisionMode: 'durable',
      initialCapacity: 64,
      minCapacity: 64,
      maxCapacity: 64,
      loadFactorHigh: 1,
    });
    for (let k = 0; k < 60; k++) t.put(k, k);
    const seen: number[] = [];
    for (const k of t.keys()) {
      seen.push(k as number);
      if ((k as number) % 2 === 0) t.remove(k);
    }
    expect(seen.sort((a, b) => a - b)).to.deep.equal([...Array(60).keys()]);
    expect([...t.keys()].sort((a, b) => (a as number) - (b as number))).to.deep.equal([...Array(30).keys()].map((n) => 2 * n + 1));
    // A put of the key just yielded is not a new key: the iteration moves on.
    const again: number[] = [];
    for (const [k, v] of t.entries()) {
      again.push(k as number);
      t.put(k, v + 1);
    }
    expect(again).to.have.length(30);
    cache.close();
  });

  it('recovery reduces an entry a crash left in two slots mid-shift to one', () => {
    const tmp = tempDir();
    try {
      const pile = openPile({ dir: tmp.dir, segmentSize: SEG });
      const cache = openCache({ pile, sweepIntervalSec: 0 });
      const t = cache.table<number>('t', {
        collisionMode: 'durable',
        initialCapacity: 64,
        minCapacity: 64,
        maxCapacity: 64,
        loadFactorHigh: 1,
      });
      for (let k = 0; k < 40; k++) t.put(k, k);
      // What an interrupted shift leaves: one entry in two slots of its cluster (here the original
      // and a copy in the empty slot after it, which extends the cluster by one).
      const idx = t.idx;
      const at = (i: number): [Float64Array, number, Uint32Array, Int32Array] => [
        idx.f64[i >>> idx.shift]!,
        i & idx.mask,
        idx.u32[i >>> idx.shift]!,
        idx.i32[i >>> idx.shift]!,
      ];
      let src = 0;
      while (!(at(src)[0][3 * at(src)[1]]! > 0 && at((src + 1) % 64)[0][3 * at((src + 1) % 64)[1]] === 0)) src++;
      const dst = (src + 1) % 64;
      const [sf, ss, su, si] = at(src);
      const [df, ds, du, di] = at(dst);
      du[6 * ds + 4] = su[6 * ss + 4]!;
      di[6 * ds + 5] = si[6 * ss + 5]!;
      df[3 * ds + 1] = sf[3 * ss + 1]!;
      df[3 * ds] = sf[3 * ss]!;
      pile.close(); // no cache.close(): the next open recovers
      const again = openCache({ dir: tmp.dir, sweepIntervalSec: 0 });
      expect(again.recovered).to.equal(true);
      const t2 = again.table<number>('t');
      expect(t2.count).to.equal(40);
      const keys = [...t2.keys()].map(Number).sort((a, b) => a - b);
      expect(keys).to.deep.equal([...Array(40).keys()]);
      for (let k = 0; k < 40; k++) expect(t2.get(k)).to.equal(k);
      for (let k = 0; k < 40; k++) expect(t2.remove(k)).to.equal(true);
      expect(t2.count).to.equal(0);
      expect([...t2.keys()]).to.deep.equal([]);
      again.close();
    } finally {
      tmp.cleanup();
    }
  });
});
