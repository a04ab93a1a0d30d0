import { expect } from 'chai';
import { openPile } from '@pile/core';
import { openCache } from '../src';
import { SEG, fakeClock } from './helpers';

describe('cache memory limit', () => {
  it('evicts so that puts succeed when the pile reaches maxMemory', () => {
    const pile = openPile({ segmentSize: SEG, maxMemory: 3 * SEG });
    const cache = openCache({ pile, sweepIntervalSec: 0 });
    const t = cache.table<string>('t', { collisionMode: 'durable' });
    const value = 'v'.repeat(300);
    for (let i = 0; i < 30_000; i++) expect(t.put(i, value + i)).to.equal('inserted');
    expect(t.stats.evicted).to.be.greaterThan(1000);
    expect(t.count).to.equal(30_000 - t.stats.evicted);
    expect(t.get(29_999)).to.equal(value + 29_999);
    expect(pile.stats.segmentCount).to.equal(3);
    expect(pile.verify().ok).to.equal(true);
    cache.close();
    pile.close();
  });

  it('evicts expired entries first, then the lowest priority', () => {
    const clock = fakeClock();
    const pile = openPile({ segmentSize: SEG, maxMemory: 3 * SEG });
    const cache = openCache({ pile, clock: clock.now, sweepIntervalSec: 0 });
    const t = cache.table<string>('t', { collisionMode: 'durable' });
    const other = cache.table<string>('other', { collisionMode: 'durable' });
    const value = 'v'.repeat(300);
    for (let i = 0; i < 500; i++) other.put(i, value, { maxAgeSec: 1 });
    for (let i = 0; i < 1000; i++) t.put(`keep${i}`, value, { priority: 10 });
    clock.advance(2_000);
    let i = 0;
    while (t.stats.evicted === 0) t.put(i++, value);
    expect(other.stats.expired).to.equal(500);
    expect(other.count).to.equal(0);
    for (let n = 0; n < 10_000; n++) t.put(i++, value);
    let kept = 0;
    for (let k = 0; k < 1000; k++) if (t.has(`keep${k}`)) kept++;
    expect(kept).to.be.at.least(990);
    cache.close();
    pile.close();
  });

  it('evicts the oldest first: the entries put last survive a turnover of the whole cache', () => {
    const cache = openCache({ segmentSize: SEG, maxMemory: 3 * SEG, sweepIntervalSec: 0 });
    for (const mode of ['durable', 'speculative'] as const) {
      const t = cache.table<string>(mode, { collisionMode: mode });
      const value = 'v'.repeat(100);
      let i = 0;
      while (t.stats.evicted === 0) t.put(i++, value);
      const fit = t.count;
      for (let n = 0; n < 3 * fit; n++) t.put(i++, value);
      let recent = 0;
      for (let k = i - Math.floor(fit / 10); k < i; k++) if (t.has(k)) recent++;
      expect(recent / Math.floor(fit / 10), mode).to.be.at.least(0.95);
      cache.dropTable(mode);
    }
    cache.close();
  });

  it('throws PILE_TOO_LARGE for an entry bigger than a segment, storing nothing', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<Uint8Array>('t');
    expect(() => t.put('big', new Uint8Array(SEG + 1)))
      .to.throw()
      .with.property('code', 'PILE_TOO_LARGE');
    expect(t.count).to.equal(0);
    cache.close();
  });
});
