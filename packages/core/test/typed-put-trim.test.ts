import { expect } from 'chai';
import fc from 'fast-check';
import { z } from 'zod';
import { openPile, type PilePointer } from '../src';
import { TYPED_PREFIX, blockSizeFor } from '../src/BlockFormat';

// A typed put allocates for an upper bound of its length (strings at 3 bytes per UTF-16 unit)
// and gives back what encoding did not use: to the tail, or through free() to the free lists.

const SEG = 1 << 20;
const Doc = z.object({ id: z.number().int(), title: z.string(), tags: z.array(z.string()) });
type Doc = z.infer<typeof Doc>;

describe('typed put: allocation for a length bound, then trimmed', () => {
  it('records cut from the tail keep exactly their block size: nothing is lost to the bound', () => {
    const pile = openPile({ segmentSize: SEG });
    try {
      const view = pile.schema('doc', Doc);
      const before = pile.stats.allocatedBytes;
      let expected = 0;
      for (let i = 0; i < 5000; i++) {
        const ptr = view.put({ id: i, title: `title ${i} ${'é'.repeat(i % 40)}`, tags: i % 2 === 0 ? ['a', '😀'.repeat(i % 5)] : [] });
        // sizeOf counts the codec's bytes; the block also holds the schema id.
        expected += blockSizeFor(TYPED_PREFIX + pile.sizeOf(ptr));
      }
      expect(pile.stats.allocatedBytes - before).to.equal(expected);
      expect(pile.verify().ok).to.equal(true);
    } finally {
      pile.close();
    }
  });

  it('a record whose bound exceeds a segment is measured exactly and stored', () => {
    const pile = openPile({ segmentSize: SEG });
    try {
      const view = pile.schema('doc', Doc);
      // 400 k ASCII characters: the bound (1.2 MB) is more than a 1 MiB segment holds, the record is not.
      const title = 'a'.repeat(400_000);
      const ptr = view.put({ id: 1, title, tags: [] });
      expect(view.get(ptr).title).to.equal(title);
      expect(pile.verify().ok).to.equal(true);
    } finally {
      pile.close();
    }
  });

  it('agrees with a Map model through puts into freed blocks and deletes; verify() holds (property)', () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀', '\ud800'), maxLength: 700 });
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.record({ put: text, tags: fc.array(text, { maxLength: 4 }) }), fc.record({ del: fc.nat() })), { maxLength: 80 }),
        (ops) => {
          const pile = openPile({ segmentSize: SEG });
          try {
            const view = pile.schema('doc', Doc);
            const live = new Map<PilePointer, Doc>();
            let id = 0;
            for (const op of ops) {
              if ('put' in op) {
                const doc = { id: id++, title: op.put, tags: op.tags };
                live.set(view.put(doc), doc);
              } else if (live.size > 0) {
                const ptr = [...live.keys()][op.del % live.size]!;
                pile.delete(ptr);
                live.delete(ptr);
              }
            }
            // Lone surrogates are stored as U+FFFD, as Buffer's UTF-8 encoder writes them.
            const fix = (s: string): string => Buffer.from(s, 'utf8').toString('utf8');
            for (const [ptr, doc] of live) expect(view.get(ptr)).to.deep.equal({ ...doc, title: fix(doc.title), tags: doc.tags.map(fix) });
            const report = pile.verify();
            expect(report.ok, JSON.stringify(report)).to.equal(true);
            expect(pile.stats.objectCount).to.equal(live.size);
          } finally {
            pile.close();
          }
        },
      ),
      { numRuns: 80 },
    );
  });
});
