import { expect } from 'chai';
import { openCache, type CacheTable, type PileCache, type TableHook } from '../src';
import { SEG, expectPileError } from './helpers';

describe('cache: option keys and iterations across resizes', () => {
  let cache: PileCache;
  beforeEach(() => {
    cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
  });
  afterEach(() => cache.close());

  it('refuses an option put or get does not know, naming it, and stores nothing', () => {
    const t = cache.table<string>('t');
    expectPileError(() => t.put('k', 'v', { ttl: 5 } as never), 'PILE_INVALID_OPTION', 'option ttl');
    expect(t.has('k')).to.equal(false);
    expectPileError(() => t.get('k', { maxAge: 5 } as never), 'PILE_INVALID_OPTION', 'option maxAge');
    expectPileError(() => t.getOrPut('k', () => 'v', { prio: 1 } as never), 'PILE_INVALID_OPTION', 'option prio');
    expectPileError(() => cache.table('u', { ttl: 5 } as never), 'PILE_INVALID_OPTION', 'option ttl');
    // Known keys, also when undefined, still pass.
    expect(t.put('k', 'v', { maxAgeSec: undefined, priority: 3 })).to.equal('inserted');
    expect(t.get('k', { maxAgeSec: 60 })).to.equal('v');
  });

  it('an iteration left unfinished does not stop the table from shrinking', () => {
    const t = cache.table<number>('t', { initialCapacity: 1024, minCapacity: 16 });
    for (let k = 0; k < 600; k++) t.put(k, k);
    const grown = t.capacity;
    const it = t.keys();
    expect(it.next().done).to.equal(false); // abandoned: neither run to the end nor returned
    for (let k = 0; k < 590; k++) t.delete(k);
    expect(t.stats.shrinks).to.be.greaterThan(0);
    expect(t.capacity).to.be.lessThan(grown);
    expect([...t.keys()].sort((a, b) => (a as number) - (b as number))).to.deep.equal([590, 591, 592, 593, 594, 595, 596, 597, 598, 599]);
  });

  it('sees every entry once while deletes shrink the table under the iteration', () => {
    const t = cache.table<number>('t', { minCapacity: 16 });
    for (let k = 0; k < 2000; k++) t.put(k, k);
    const shrinksBefore = t.stats.shrinks;
    const seen: number[] = [];
    for (const k of t.keys()) {
      seen.push(k as number);
      t.delete(k);
    }
    expect(t.stats.shrinks).to.be.greaterThan(shrinksBefore);
    expect(seen.sort((a, b) => a - b)).to.deep.equal([...Array(2000).keys()]);
    expect(t.count).to.equal(0);
  });

  it('sees every entry present from start to end once while puts grow the table under the iteration', () => {
    const t = cache.table<number>('t', { initialCapacity: 16, minCapacity: 16 });
    for (let k = 0; k < 10; k++) t.put(k, k);
    const grows = t.stats.grows;
    const seen = new Map<number, number>();
    let next = 1000;
    for (const [k, v] of t.entries()) {
      seen.set(k as number, (seen.get(k as number) ?? 0) + 1);
      expect(v).to.equal(k);
      // New keys with a larger hash are seen too: stop adding after a while, or the walk never ends.
      if (next < 1500) for (let n = 0; n < 50; n++, next++) t.put(next, next);
    }
    expect(t.stats.grows).to.be.greaterThan(grows);
    expect(next).to.equal(1500);
    for (let k = 0; k < 10; k++) expect(seen.get(k), `key ${k}`).to.equal(1);
    for (const [k, n] of seen) expect(n, `key ${k}`).to.equal(1);
  });

  it('keys() and entries() follow the hook like get: nothing while not serving, nothing below the epoch', () => {
    const t = cache.table<string>('t') as CacheTable<string>;
    t.put('old', 'o');
    const hook: TableHook = { serving: false, epoch: 0, changed: () => undefined };
    t.setHook(hook);
    expect(t.get('old')).to.equal(undefined);
    expect([...t.keys()]).to.deep.equal([]);
    expect([...t.entries()]).to.deep.equal([]);
    hook.serving = true;
    hook.epoch = t.sequence;
    t.put('new', 'n');
    expect(t.get('old')).to.equal(undefined);
    expect([...t.keys()]).to.deep.equal(['new']);
    expect([...t.entries()]).to.deep.equal([['new', 'n']]);
    // An iteration ends at the first step after the table stops serving.
    t.put('new2', 'n2');
    const it = t.keys();
    expect(it.next().done).to.equal(false);
    hook.serving = false;
    expect(it.next().done).to.equal(true);
    t.setHook(undefined);
  });
});
