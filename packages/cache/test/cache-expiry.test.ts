import { expect } from 'chai';
import { openPile } from '@pile/core';
import { openCache, type PileCache } from '../src';
import { SEG, fakeClock, tempDir } from './helpers';

describe('cache expiry', () => {
  let clock: ReturnType<typeof fakeClock>;
  let cache: PileCache;
  beforeEach(() => {
    clock = fakeClock();
    cache = openCache({ segmentSize: SEG, clock: clock.now, sweepIntervalSec: 0 });
  });
  afterEach(() => cache.close());

  it('expires an entry after its maxAgeSec, counting it', () => {
    const t = cache.table<string>('t');
    t.put('k', 'v', { maxAgeSec: 10 });
    clock.advance(9_999);
    expect(t.get('k')).to.equal('v');
    clock.advance(1);
    expect(t.has('k')).to.equal(false);
    expect(t.get('k')).to.equal(undefined);
    expect(t.count).to.equal(0);
    expect(t.stats.expired).to.equal(1);
  });

  it('honours expiresAt as a Date or ms, and the table default, overridable with maxAgeSec 0', () => {
    const t = cache.table<number>('t', { defaultMaxAgeSec: 5 });
    t.put('date', 1, { expiresAt: new Date(clock.now() + 2_000) });
    t.put('ms', 2, { expiresAt: clock.now() + 3_000 });
    t.put('default', 3);
    t.put('forever', 4, { maxAgeSec: 0 });
    clock.advance(2_000);
    expect([t.get('date'), t.get('ms'), t.get('default'), t.get('forever')]).to.deep.equal([undefined, 2, 3, 4]);
    clock.advance(1_000);
    expect(t.get('ms')).to.equal(undefined);
    clock.advance(2_000);
    expect(t.get('default')).to.equal(undefined);
    clock.advance(1e9);
    expect(t.get('forever')).to.equal(4);
    expect([...t.keys()]).to.deep.equal(['forever']);
  });

  it('get with maxAgeSec treats older entries as misses and leaves them', () => {
    const t = cache.table<string>('t');
    t.put('k', 'v');
    clock.advance(5_000);
    expect(t.get('k', { maxAgeSec: 3 })).to.equal(undefined);
    expect(t.get('k', { maxAgeSec: 6 })).to.equal('v');
    expect(t.get('k')).to.equal('v');
    expect(t.count).to.equal(1);
  });

  it('rejuvenate resets the age and keeps the time to live', () => {
    const t = cache.table<string>('t');
    t.put('k', 'v', { maxAgeSec: 10, priority: 3 });
    clock.advance(8_000);
    expect(t.rejuvenate('k')).to.equal(true);
    expect(t.get('k', { maxAgeSec: 1 })).to.equal('v');
    clock.advance(8_000);
    expect(t.get('k')).to.equal('v');
    clock.advance(2_001);
    expect(t.get('k')).to.equal(undefined);
    expect(t.rejuvenate('k')).to.equal(false);
    expect(t.rejuvenate('absent')).to.equal(false);
  });

  it('sweep frees expired entries and their pile space, and shrinks the table', () => {
    const pile = openPile({ segmentSize: SEG });
    const c = openCache({ pile, clock: clock.now, sweepIntervalSec: 0 });
    const t = c.table<string>('t', { collisionMode: 'durable', initialCapacity: 16, minCapacity: 16 });
    for (let i = 0; i < 1000; i++) t.put(i, 'x'.repeat(100), { maxAgeSec: 1 });
    for (let i = 1000; i < 1010; i++) t.put(i, 'keep');
    const objects = pile.stats.objectCount;
    clock.advance(1_000);
    c.sweep();
    expect(t.count).to.equal(10);
    expect(t.stats.expired).to.equal(1000);
    expect(pile.stats.objectCount).to.be.at.most(objects - 1000);
    expect(t.stats.shrinks).to.be.greaterThan(0);
    for (let i = 1000; i < 1010; i++) expect(t.get(i)).to.equal('keep');
    expect(pile.verify().ok).to.equal(true);
    c.close();
    pile.close();
  });

  it('sweeps on its own on a timer', async () => {
    const c = openCache({ segmentSize: SEG, clock: clock.now, sweepIntervalSec: 0.02 });
    const t = c.table<number>('t');
    for (let i = 0; i < 20; i++) t.put(i, i, { maxAgeSec: 1 });
    clock.advance(1_000);
    await new Promise((r) => setTimeout(r, 120));
    expect(t.stats.expired).to.equal(20);
    expect(t.count).to.equal(0);
    c.close();
  });

  it('count counts live entries only, also after a reopen, and sweeps only once something expired', () => {
    const tmp = tempDir();
    try {
      const open = (readonly = false): PileCache =>
        openCache({ dir: tmp.dir, segmentSize: SEG, clock: clock.now, sweepIntervalSec: 0, readonly });
      let c = open();
      let t = c.table<number>('t', { collisionMode: 'durable' });
      for (let i = 0; i < 200; i++) t.put(i, i, { maxAgeSec: 10 });
      for (let i = 200; i < 300; i++) t.put(i, i);
      expect(t.count).to.equal(300);
      clock.advance(10_000);
      expect(t.count).to.equal(100); // nothing was read or swept: count itself leaves the expired out
      for (let i = 300; i < 350; i++) t.put(i, i, { maxAgeSec: 10 });
      let sweeps = 0;
      const sweep = t.sweepExpired.bind(t);
      t.sweepExpired = (now, shrink) => {
        sweeps++;
        return sweep(now, shrink);
      };
      for (let n = 0; n < 100; n++) expect(t.count).to.equal(150);
      expect(sweeps, 'no entry expired: count is O(1)').to.equal(0);
      clock.advance(10_000);
      expect(t.count).to.equal(100);
      expect(t.count).to.equal(100);
      expect(sweeps).to.equal(1);
      for (let i = 0; i < 100; i++) t.put(i, i, { maxAgeSec: 10 });
      c.close();
      clock.advance(10_000);
      c = open(true);
      t = c.table<number>('t');
      expect(t.count).to.equal(100); // read-only: counted, not freed
      c.close();
      c = open();
      t = c.table<number>('t');
      expect(t.count).to.equal(100);
      expect([...t.keys()]).to.have.length(100);
      c.close();
    } finally {
      tmp.cleanup();
    }
  });
});
