import { expect } from 'chai';
import { openPile } from '@pile/core';
import { openCache } from '../src';
import { SEG } from './helpers';

// A grow saves the catalog while the table's entries sit in both the old and the new index. When
// that save found the pile full, it used to evict to make room: the evictions removed entries from
// the old index only and freed their records, so the new index named dead records (later puts
// failed with PILE_STALE_POINTER) and the count was the one before the evictions. These sizes
// (found by a search over many) make a grow's catalog save meet a full pile.
describe('cache rehash beside a full pile', () => {
  it('a grow whose catalog save finds the pile full evicts nothing under it: every entry readable, count exact, verify ok', () => {
    const pile = openPile({ segmentSize: SEG, maxMemory: 3 * SEG });
    const cache = openCache({ pile, sweepIntervalSec: 0 });
    // Many tables with long names: a catalog of several KiB, whose save needs a block of its own.
    for (let k = 0; k < 17; k++) cache.table('x'.repeat(106) + String(k), { collisionMode: 'durable' }).put('a', 'b');
    const t = cache.table<string>('t', { collisionMode: 'durable', initialCapacity: 64 });
    const value = 'v'.repeat(698);
    for (let i = 0; i < 12_000; i++) t.put(i, value);
    expect(t.stats.evicted).to.be.greaterThan(0);
    let listed = 0;
    for (const [, v] of t.entries()) {
      expect(v).to.equal(value);
      listed++;
    }
    expect(listed).to.equal(t.count);
    let found = 0;
    for (let i = 0; i < 12_000; i++) if (t.get(i) !== undefined) found++;
    expect(found).to.equal(t.count);
    expect(pile.verify().ok).to.equal(true);
    cache.close();
    pile.close();
  });
});
