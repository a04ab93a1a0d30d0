import { expect } from 'chai';
import fc from 'fast-check';
import { openPile, type Pile, type PilePointer } from '@pile/core';
import { PileList } from '../src';
import { SEGMENT, expectPileError, removeDir, tempDir } from './helpers';

type Op =
  | { t: 'append' | 'prepend'; v: string }
  | { t: 'insertAfter'; i: number; v: string }
  | { t: 'set'; i: number; v: string }
  | { t: 'remove'; i: number }
  | { t: 'reopen' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constantFrom('append' as const, 'prepend' as const), v: fc.string({ maxLength: 20 }) }),
  fc.record({ t: fc.constant('insertAfter' as const), i: fc.nat(), v: fc.string({ maxLength: 20 }) }),
  fc.record({ t: fc.constant('set' as const), i: fc.nat(), v: fc.string({ maxLength: 200 }) }),
  fc.record({ t: fc.constant('remove' as const), i: fc.nat() }),
  { weight: 1, arbitrary: fc.constant({ t: 'reopen' as const }) },
);

describe('PileList against an array model (fast-check)', () => {
  it('agrees with the model through random operations and reopens', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 50 }), (ops) => {
        const dir = tempDir();
        let pile: Pile = openPile({ dir, segmentSize: SEGMENT });
        try {
          let l = PileList.open<string>(pile, 'model');
          // The model: [node, value] in list order; node ids are the list's own pointers.
          const m: [PilePointer, string][] = [];
          const removed: PilePointer[] = [];
          for (const op of ops) {
            switch (op.t) {
              case 'append':
                m.push([l.append(op.v), op.v]);
                break;
              case 'prepend':
                m.unshift([l.prepend(op.v), op.v]);
                break;
              case 'insertAfter': {
                if (m.length === 0) break;
                const k = op.i % m.length;
                m.splice(k + 1, 0, [l.insertAfter(m[k]![0], op.v), op.v]);
                break;
              }
              case 'set': {
                if (m.length === 0) break;
                const k = op.i % m.length;
                l.set(m[k]![0], op.v);
                m[k]![1] = op.v;
                break;
              }
              case 'remove': {
                if (m.length === 0) break;
                const [[node]] = m.splice(op.i % m.length, 1) as [[PilePointer, string]];
                l.remove(node);
                removed.push(node);
                break;
              }
              case 'reopen':
                pile.close();
                pile = openPile({ dir });
                l = PileList.open<string>(pile, 'model');
                break;
            }
            expect(l.length).to.equal(m.length);
          }
          expect([...l]).to.deep.equal(m.map(([, v]) => v));
          expect([...l.reversed()]).to.deep.equal(m.map(([, v]) => v).reverse());
          expect([...l.nodes()]).to.deep.equal(m.map(([n]) => n));
          expect(l.first).to.equal(m[0]?.[0]);
          expect(l.last).to.equal(m[m.length - 1]?.[0]);
          m.forEach(([n], k) => {
            expect(l.prev(n)).to.equal(m[k - 1]?.[0]);
            expect(l.next(n)).to.equal(m[k + 1]?.[0]);
          });
          for (const r of removed) expectPileError(() => l.get(r), 'PILE_STALE_POINTER');
          expect(pile.verify().ok).to.equal(true);
        } finally {
          pile.close();
          removeDir(dir);
        }
      }),
      { numRuns: 60 },
    );
  });
});
