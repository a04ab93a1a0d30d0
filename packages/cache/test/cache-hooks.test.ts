import { expect } from 'chai';
import { openCache, type CacheKey, type PileCache, type TableHook } from '../src';
import { SEG, expectPileError } from './helpers';

function recorder(): TableHook & { log: [string, CacheKey][] } {
  const log: [string, CacheKey][] = [];
  return {
    serving: true,
    epoch: 0,
    log,
    changed: (op, key) => {
      log.push([op, key]);
    },
  };
}

describe('cache table hooks', () => {
  let cache: PileCache;
  beforeEach(() => {
    cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
  });
  afterEach(() => cache.close());

  it('reports local puts, deletes (present or not) and rejuvenates before writing them', () => {
    const t = cache.table<string>('t', { collisionMode: 'speculative', initialCapacity: 16, maxCapacity: 16 });
    const h = recorder();
    t.setHook(h);
    t.put('a', '1');
    t.put('a', '2');
    t.rejuvenate('a');
    t.delete('a');
    t.remove('never'); // the deprecated alias too
    expect(h.log).to.deep.equal([
      ['put', 'a'],
      ['put', 'a'],
      ['expiry', 'a'],
      ['delete', 'a'],
      ['delete', 'never'],
    ]);
    // Before the write (it sees the old count), and it may use other tables of the cache.
    const other = cache.table<string>('other');
    t.setHook(undefined);
    t.setHook({
      serving: true,
      epoch: 0,
      changed: (op, key) => {
        h.log.push([`${op}:${t.count}`, key]);
        other.put(key, 'x');
      },
    });
    t.put('c', 'new');
    expect(h.log.at(-1)).to.deep.equal(['put:0', 'c']);
    expect([t.get('c'), other.get('c')]).to.deep.equal(['new', 'x']);
    t.setHook(undefined);
    h.log.length = 5;
    t.setHook(undefined);
    t.put('b', '1');
    expect(h.log).to.have.length(5);
  });

  it('serves nothing while serving is false, and counts misses', () => {
    const t = cache.table<string>('t');
    const h = recorder();
    t.setHook(h);
    t.put('a', '1');
    h.serving = false;
    expect(t.get('a')).to.equal(undefined);
    expect(t.has('a')).to.equal(false);
    expect(t.stats.misses).to.equal(1);
    h.serving = true;
    expect(t.get('a')).to.equal('1');
    expect(t.count).to.equal(1);
  });

  it('treats entries stored before the epoch as absent until they are stored again', () => {
    const t = cache.table<string>('t');
    const h = recorder();
    t.setHook(h);
    t.put('old', '1');
    t.put('kept', '1');
    h.epoch = t.sequence;
    expect(t.get('old')).to.equal(undefined);
    expect(t.has('old')).to.equal(false);
    expect(t.rejuvenate('old')).to.equal(false);
    t.put('kept', '2');
    expect(t.get('kept')).to.equal('2');
    expect(t.count).to.equal(2);
  });

  it('refuses a second hook', () => {
    const t = cache.table<string>('t');
    t.setHook(recorder());
    expectPileError(() => t.setHook(recorder()), 'PILE_LOCKED', "'t'");
  });

  it('attaches a cache-wide hook to existing tables and to tables created later', () => {
    cache.table<string>('before');
    const seen: string[] = [];
    const h = recorder();
    cache.setHook((t) => {
      seen.push(t.name);
      return t.name === 'skipped' ? undefined : h;
    });
    cache.table<string>('after').put('k', 'v');
    cache.table<string>('skipped').put('k', 'v');
    cache.table<string>('before').delete('k');
    expect(seen).to.deep.equal(['before', 'after', 'skipped']);
    expect(h.log).to.deep.equal([
      ['put', 'k'],
      ['delete', 'k'],
    ]);
    cache.setHook(undefined);
    cache.table<string>('after').put('k', 'w');
    expect(h.log).to.have.length(2);
  });
});
