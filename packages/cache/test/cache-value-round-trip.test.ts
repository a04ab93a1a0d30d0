import { expect } from 'chai';
import { z } from 'zod';
import { openCache } from '../src';
import { SEG, expectPileError } from './helpers';

describe('cache values that would not read back as they were put are refused', () => {
  it('functions, boxed primitives and strings with lone surrogates; keys with lone surrogates stay distinct', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    try {
      const t = cache.table<unknown>('t');
      expectPileError(() => t.put('f', () => 1), 'PILE_INVALID_VALUE', 'a function');
      expectPileError(() => t.put('g', { a: 1, f: () => 1 }), 'PILE_INVALID_VALUE', 'a function');
      expectPileError(() => t.put('s', new String('abc')), 'PILE_INVALID_VALUE', 'boxed String');
      expectPileError(() => t.put('l', 'a\ud800'), 'PILE_INVALID_VALUE', 'lone surrogate');
      const u = cache.table('u', { schema: z.object({ name: z.string() }) });
      expectPileError(() => u.put('l', { name: '\udc00x' }), 'PILE_INVALID_VALUE', 'name: a string with a lone surrogate');
      expect(t.count + u.count).to.equal(0);
      // Keys are stored as WTF-8: two keys that differ only in a lone surrogate are two keys.
      t.put('k\ud800', 1);
      t.put('k\udc00', 2);
      expect([t.get('k\ud800'), t.get('k\udc00')]).to.deep.equal([1, 2]);
    } finally {
      cache.close();
    }
  });

  it('a Map, nested lone surrogates, -0, sparse arrays and class instances are refused with their path; Sets and Dates round-trip', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    try {
      const t = cache.table<unknown>('t');
      class Point {
        constructor(public x: number) {}
      }
      expectPileError(() => t.put('m', new Map([['a', 1]])), 'PILE_INVALID_VALUE', 'value: a Map would read back as a plain object');
      expectPileError(() => t.put('m', { inner: new Map() }), 'PILE_INVALID_VALUE', 'value.inner: a Map');
      expectPileError(() => t.put('s', { list: ['ok', 'a\ud800'] }), 'PILE_INVALID_VALUE', 'value.list[1]: a string with a lone surrogate');
      expectPileError(() => t.put('z', { n: -0 }), 'PILE_INVALID_VALUE', 'value.n: -0');
      expectPileError(() => t.put('h', [1, , 2]), 'PILE_INVALID_VALUE', 'value[1]: a sparse array'); // eslint-disable-line no-sparse-arrays
      expectPileError(() => t.put('c', { p: new Point(1) }), 'PILE_INVALID_VALUE', 'value.p: an instance of Point');
      expect(t.count).to.equal(0);
      const v = { s: new Set([1, 'a']), d: new Date(5), u: undefined };
      t.put('ok', v);
      expect(t.get('ok')).to.deep.equal(v);
    } finally {
      cache.close();
    }
  });

  it('a value or byte key larger than a segment is PILE_TOO_LARGE before anything is sized from it', function () {
    this.timeout(20_000);
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    try {
      const t = cache.table<unknown>('t');
      const huge = Buffer.allocUnsafeSlow(2 ** 31);
      const before = process.memoryUsage().arrayBuffers;
      expectPileError(() => t.put('v', huge), 'PILE_TOO_LARGE', 'cache entry');
      expectPileError(() => t.put(huge, 1), 'PILE_TOO_LARGE', 'cache entry');
      // Refused before a scratch buffer or key copy of that size was made.
      expect(process.memoryUsage().arrayBuffers - before).to.be.lessThan(SEG * 4);
      expectPileError(() => t.put('w', Buffer.alloc(SEG + 1)), 'PILE_TOO_LARGE');
      expect(t.count).to.equal(0);
      expect(t.put('ok', Buffer.alloc(10))).to.equal('inserted');
    } finally {
      cache.close();
    }
  });
});
