import { expect } from 'chai';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { openPile } from '@pile/core';
import { openCache } from '../src';
import { SEG } from './helpers';

describe('cache capacity and collisions', () => {
  it('durable: grows and shrinks without losing an entry, and frees old index blocks', () => {
    const pile = openPile({ segmentSize: SEG });
    const cache = openCache({ pile, sweepIntervalSec: 0 });
    const t = cache.table<number>('t', { collisionMode: 'durable', initialCapacity: 16, minCapacity: 16 });
    for (let i = 0; i < 3000; i++) expect(t.put(`k${i}`, i)).to.equal('inserted');
    expect(t.stats.grows).to.be.greaterThan(3);
    expect(t.capacity).to.be.at.least(3000 / 0.75);
    expect(t.loadFactor).to.be.at.most(0.75);
    for (let i = 0; i < 3000; i++) expect(t.get(`k${i}`)).to.equal(i);
    for (let i = 10; i < 3000; i++) expect(t.remove(`k${i}`)).to.equal(true);
    expect(t.stats.shrinks).to.be.greaterThan(3);
    expect(t.capacity).to.be.at.most(128);
    for (let i = 0; i < 10; i++) expect(t.get(`k${i}`)).to.equal(i);
    expect(t.count).to.equal(10);
    // 10 entries, 1 header, 1 chunk, the catalog: nothing of the old indexes or removed entries is left.
    expect(pile.stats.objectCount).to.equal(13);
    expect(pile.verify().ok).to.equal(true);
    cache.close();
    pile.close();
  });

  it('durable: fills a table at maxCapacity to the last slot and never drops an entry', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<number>('t', { collisionMode: 'durable', initialCapacity: 16, minCapacity: 16, maxCapacity: 64 });
    for (let i = 0; i < 64; i++) expect(t.put(i, i)).to.equal('inserted');
    expect(t.capacity).to.equal(64);
    for (let i = 0; i < 64; i++) expect(t.get(i)).to.equal(i);
    expect(() => t.put(64, 64)).to.throw(/full/);
    expect(t.count).to.equal(64);
    cache.close();
  });

  it('speculative: a full probe window overwrites the lowest priority not above the new one, else refuses', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<string>('t', { collisionMode: 'speculative', initialCapacity: 16, minCapacity: 16, maxCapacity: 16 });
    for (let i = 0; i < 16; i++) expect(t.put(i, `v${i}`, { priority: i === 7 ? 1 : 5 })).to.equal('inserted');
    expect(t.put('low', 'x', { priority: 0 })).to.equal('collision');
    expect(t.get('low')).to.equal(undefined);
    expect(t.put('mid', 'm', { priority: 3 })).to.equal('overwritten');
    expect(t.get(7)).to.equal(undefined);
    expect(t.get('mid')).to.equal('m');
    expect(t.put('p2', 'x', { priority: 2 })).to.equal('collision');
    expect(t.put('p5', 'y', { priority: 5 })).to.equal('overwritten');
    expect(t.get('mid')).to.equal(undefined);
    expect(t.get('p5')).to.equal('y');
    expect(t.put('p5', 'z', { priority: 0 })).to.equal('replaced');
    expect(t.get('p5')).to.equal('z');
    expect(t.count).to.equal(16);
    const s = t.stats;
    expect([s.inserts, s.overwrites, s.collisions, s.replaces]).to.deep.equal([16, 2, 2, 1]);
    cache.close();
  });

  it('speculative: grows (with its load factor, or on a full probe window) rather than drop below maxCapacity', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<number>('t', { initialCapacity: 16, minCapacity: 16 });
    let stored = 0;
    for (let i = 0; i < 5000; i++) if (t.put(i, i) === 'inserted') stored++;
    expect(stored).to.equal(5000);
    expect(t.count).to.equal(5000);
    for (let i = 0; i < 5000; i++) expect(t.get(i)).to.equal(i);
    cache.close();
  });

  it('keeps the index off the V8 heap: many entries add no per-entry JS objects', () => {
    const cache = openCache({ sweepIntervalSec: 0 });
    const t = cache.table<number>('t', { collisionMode: 'durable', initialCapacity: 1 << 18 });
    v8.setFlagsFromString('--expose-gc');
    const g = vm.runInNewContext('gc') as () => void;
    g();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 100_000; i++) t.put(`key-${i}`, i);
    g();
    const grown = process.memoryUsage().heapUsed - before;
    expect(t.count).to.equal(100_000);
    // A Map of 100k string keys and numbers holds ~10 MB; the garbage of the puts is short-lived.
    expect(grown).to.be.below(2_000_000);
    cache.close();
  });
});
