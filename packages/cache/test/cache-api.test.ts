import { expect } from 'chai';
import { openCache } from '../src';
import { SEG } from './helpers';

describe('cache API as Map and lru-cache users expect it', () => {
  it("is durable by default: a put never answers 'collision' or 'overwritten', nothing is dropped for lack of a slot", () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<number>('t', { initialCapacity: 16, minCapacity: 16 });
    expect(cache.tableInfo('t')!.collisionMode).to.equal('durable');
    for (let i = 0; i < 5000; i++) expect(t.put(i, i)).to.equal('inserted');
    expect(t.count).to.equal(5000);
    for (let i = 0; i < 5000; i++) expect(t.get(i)).to.equal(i);
    // Speculative stays the explicit choice.
    const s = cache.table<number>('s', { collisionMode: 'speculative', initialCapacity: 16, minCapacity: 16, maxCapacity: 16 });
    const results = new Set<string>();
    for (let i = 0; i < 100; i++) results.add(s.put(i, i));
    expect([...results].some((r) => r === 'collision' || r === 'overwritten')).to.equal(true);
    cache.close();
  });

  it('delete removes a key as Map.delete does; remove stays as its alias', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    const t = cache.table<string>('t');
    t.put('a', '1');
    t.put('b', '2');
    expect(t.delete('a')).to.equal(true);
    expect(t.delete('a')).to.equal(false);
    expect(t.remove('b')).to.equal(true);
    expect(t.count).to.equal(0);
    expect(t.stats.removes).to.equal(2);
    cache.close();
  });
});
