import { expect } from 'chai';
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { openPile, type Pile } from '../src/Pile';
import { isPileError } from '../src/PileError';

// The value check clears most values with a quick walk and gives only the rest to the walk that
// names the fault: whatever the quick walk lets through must read back exactly, and whatever is
// refused must be refused with the documented code.
describe('generic values: a value is either refused or read back exactly', () => {
  let pile: Pile;
  before(() => {
    pile = openPile({ segmentSize: 4 << 20 });
  });
  after(() => pile.close());

  const awkward = fc.oneof(
    fc.constantFrom(-0, 0, NaN, '\ud800', 'a\udc00b', '\ud83d\ude00', 'x'.repeat(70) + '\udfff', '__proto__'),
    fc.string({ unit: 'binary', maxLength: 80 }),
    fc.double(),
  );
  const values = fc.anything({
    withMap: true,
    withSet: true,
    withDate: true,
    withTypedArray: true,
    withSparseArray: true,
    withBigInt: true,
    withBoxedValues: true,
    maxDepth: 3,
    key: fc.oneof(fc.string({ maxLength: 6 }), fc.constant('__proto__')),
    values: [awkward, fc.boolean(), fc.integer(), fc.constant(null), fc.constant(undefined)],
  });

  it('random values with -0, lone surrogates, holes, boxed values, Maps and Sets', () => {
    let refused = 0;
    let stored = 0;
    fc.assert(
      fc.property(values, (v) => {
        let ptr;
        try {
          ptr = pile.put(v);
        } catch (err) {
          if (!isPileError(err) || err.code !== 'PILE_INVALID_VALUE') throw err;
          refused++;
          return;
        }
        stored++;
        const got = pile.get(ptr);
        if (!isDeepStrictEqual(got, v)) throw new Error(`stored, but read back otherwise: ${String(got)}`);
      }),
      { numRuns: 2000, seed: 15 },
    );
    // Both ways are taken, so neither side of the check goes untested.
    expect(refused).to.be.greaterThan(50);
    expect(stored).to.be.greaterThan(50);
  });
});
