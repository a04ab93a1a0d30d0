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

  it('throws PILE_TOO_LARGE for an entry bigger than a segment, storing nothing', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<Uint8Array>('t');
    expect(() => t.put('big', new Uint8Array(SEG + 1))).to.throw(/PILE_TOO_LARGE/);
    expect(t.count).to.equal(0);
    cache.close();
  });
});
