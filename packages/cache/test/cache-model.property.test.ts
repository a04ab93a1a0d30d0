import { expect } from 'chai';
import fc from 'fast-check';
import { openCache, type CacheKey, type CacheTable, type PileCache } from '../src';
import { SEG, tempDir } from './helpers';

/** A small key domain of mixed types, so keys collide, repeat and differ only by type. */
const keyArb: fc.Arbitrary<CacheKey> = fc.oneof(
  fc.integer({ min: 0, max: 40 }).map((n) => `k${n}`),
  fc.integer({ min: 0, max: 40 }),
  fc.bigInt({ min: 0n, max: 40n }),
  fc.integer({ min: 0, max: 40 }).map((n) => new Uint8Array([n])),
);
/** Map keys: type-tagged so that 1, '1', 1n and bytes stay apart as they do in the cache. */
const mk = (k: CacheKey): string => (k instanceof Uint8Array ? `b:${[...k].join(',')}` : `${typeof k}:${String(k)}`);

type Cmd =
  | { op: 'put'; key: CacheKey; value: number; priority: number }
  | { op: 'remove'; key: CacheKey }
  | { op: 'get'; key: CacheKey }
  | { op: 'reopen' };

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ op: fc.constant('put' as const), key: keyArb, value: fc.integer(), priority: fc.integer({ min: 0, max: 3 }) }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('remove' as const), key: keyArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('get' as const), key: keyArb }) },
  { weight: 1, arbitrary: fc.constant({ op: 'reopen' as const }) },
);

describe('cache model (property)', () => {
  it('durable: identical contents to a Map through random put/remove/reopen', () => {
    fc.assert(
      fc.property(fc.array(cmdArb, { maxLength: 80 }), (cmds) => {
        const tmp = tempDir();
        const open = (): PileCache => openCache({ dir: tmp.dir, segmentSize: SEG, sweepIntervalSec: 0 });
        let cache = open();
        const opts = { collisionMode: 'durable' as const, initialCapacity: 16, minCapacity: 16 };
        let t: CacheTable<number> = cache.table<number>('m', opts);
        const model = new Map<string, number>();
        try {
          for (const c of cmds) {
            if (c.op === 'put') {
              const r = t.put(c.key, c.value, { priority: c.priority });
              expect(r).to.equal(model.has(mk(c.key)) ? 'replaced' : 'inserted');
              model.set(mk(c.key), c.value);
            } else if (c.op === 'remove') {
              expect(t.remove(c.key)).to.equal(model.delete(mk(c.key)));
            } else if (c.op === 'get') {
              expect(t.get(c.key)).to.equal(model.get(mk(c.key)));
            } else {
              cache.close();
              cache = open();
              t = cache.table<number>('m', opts);
            }
            expect(t.count).to.equal(model.size);
          }
          const got = new Map([...t.entries()].map(([k, v]) => [mk(k), v]));
          expect(got).to.deep.equal(model);
        } finally {
          cache.close();
          tmp.cleanup();
        }
      }),
      { numRuns: 40 },
    );
  });

  it('speculative: never returns a wrong value, and every value returned was the latest put of its key', () => {
    fc.assert(
      fc.property(fc.array(cmdArb, { maxLength: 150 }), (cmds) => {
        const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
        // Tiny and unable to grow: overwrites and collisions happen all the time.
        const t = cache.table<number>('m', { collisionMode: 'speculative', initialCapacity: 16, minCapacity: 16, maxCapacity: 16 });
        const latest = new Map<string, number>();
        try {
          for (const c of cmds) {
            if (c.op === 'put') {
              const r = t.put(c.key, c.value, { priority: c.priority });
              if (r === 'collision') {
                expect(latest.has(mk(c.key)) && t.has(c.key)).to.equal(false);
                latest.delete(mk(c.key));
              } else latest.set(mk(c.key), c.value);
              if (r !== 'collision') expect(t.get(c.key)).to.equal(c.value);
            } else if (c.op === 'remove') {
              t.remove(c.key);
              latest.delete(mk(c.key));
            } else if (c.op === 'get') {
              const v = t.get(c.key);
              if (v !== undefined) expect(v).to.equal(latest.get(mk(c.key)));
            }
            expect(t.count).to.be.at.most(16);
          }
          for (const [k, v] of t.entries()) expect(v).to.equal(latest.get(mk(k)));
        } finally {
          cache.close();
        }
      }),
      { numRuns: 100 },
    );
  });
});
