import { expect } from 'chai';
import fc from 'fast-check';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile } from '../src/Pile';

const Big = z.object({ id: z.number(), n: z.bigint(), list: z.array(z.bigint()), maybe: z.bigint().optional() });
const EDGES = [
  0n,
  1n,
  -1n,
  2n ** 63n - 1n,
  -(2n ** 63n),
  2n ** 63n,
  -(2n ** 63n) - 1n,
  2n ** 64n,
  2n ** 70n,
  -(2n ** 100n),
  10n ** 40n + 7n,
];

describe('typed bigints of any size', () => {
  it('z.bigint() stores values beyond int64 and gives them back by get, field and inspect, also after a reopen', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-bigint-'));
    try {
      let pile = openPile({ dir, segmentSize: 1 << 20 });
      let view = pile.schema('big', Big);
      const ptrs = EDGES.map((n, i) => view.put({ id: i, n, list: [n, -n, 5n], maybe: i % 2 === 0 ? n * 3n : undefined }));
      const check = (): void => {
        EDGES.forEach((n, i) => {
          const want = { id: i, n, list: [n, -n, 5n], ...(i % 2 === 0 ? { maybe: n * 3n } : {}) };
          expect(view.get(ptrs[i]!)).to.deep.equal(want);
          expect(view.field(ptrs[i]!, 'n')).to.equal(n);
          expect(pile.get(ptrs[i]!)).to.deep.equal(want);
        });
      };
      check();
      pile.close();
      pile = openPile({ dir });
      view = pile.schema('big', Big);
      check();
      expect((pile.inspect(ptrs[8]!) as { n: bigint }).n).to.equal(2n ** 70n);
      pile.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('round-trips any bigint (property), int64 bounds keep 8 fixed bytes', () => {
    const pile = openPile({ segmentSize: 1 << 20 });
    const view = pile.schema('p', z.object({ n: z.bigint() }));
    fc.assert(
      fc.property(fc.oneof(fc.bigInt(), fc.bigInt({ min: -(2n ** 300n), max: 2n ** 300n })), (n) => {
        expect(view.get(view.put({ n }))).to.deep.equal({ n });
      }),
      { numRuns: 500 },
    );
    // A bounded bigint that fits int64 stays the 8-byte int64 layout, and its bounds are still checked.
    const small = pile.schema('s', z.object({ n: z.bigint().min(-5n).max(5n) }));
    expect(small.get(small.put({ n: -5n }))).to.deep.equal({ n: -5n });
    pile.close();
  });
});
