import { expect } from 'chai';
import fc from 'fast-check';
import { z } from 'zod';
import { compileSchema, openPile, type PilePointer } from '../src';
import { TYPED_PREFIX, blockSizeFor } from '../src/storage/BlockFormat';

// A typed put is encoded for an upper bound of its length (strings at 3 bytes per UTF-16 unit).
// While the pile grows it is encoded at the start of the tail, which is then cut to the exact
// size; in a block from a free list, the rest goes back through free() after encoding.

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

  it('a freed block that can hold the record is reused before the tail is cut', () => {
    const pile = openPile({ segmentSize: SEG });
    try {
      const view = pile.schema('doc', Doc);
      const first = view.put({ id: 1, title: 'x'.repeat(200), tags: ['a', 'b'] });
      view.put({ id: 2, title: 'second', tags: [] });
      const { allocatedBytes, freeBytes } = pile.stats;
      const firstBlock = blockSizeFor(TYPED_PREFIX + pile.sizeOf(first));
      pile.delete(first);
      // Much shorter than the freed record, but its bound (3 bytes per unit) is not.
      const reused = view.put({ id: 3, title: 'y'.repeat(60), tags: ['c'] });
      // Entries run in address order: the new record sits where the first one was.
      expect([...pile.entries()][0]!.pointer).to.equal(reused);
      const kept = blockSizeFor(TYPED_PREFIX + pile.sizeOf(reused));
      expect(pile.stats.allocatedBytes).to.equal(allocatedBytes - firstBlock + kept);
      expect(pile.stats.freeBytes + pile.stats.allocatedBytes).to.equal(freeBytes + allocatedBytes);
      expect(view.get(reused)).to.deep.equal({ id: 3, title: 'y'.repeat(60), tags: ['c'] });
      expect(pile.verify().ok).to.equal(true);
    } finally {
      pile.close();
    }
  });

  it('a free block handed out whole (its rest too small to split) is trimmed by its real size', () => {
    // The free block is 8 to 24 bytes larger than the block the put asks for, so the allocator hands
    // it out whole. Where the requested size would end, the freed record left bytes that read as a
    // free block covering the next record: a trim that took the requested size for the block's
    // would free a "rest" ending there, and merge the next record into free space.
    const Rec = z.object({ s: z.string() });
    const codec = compileSchema(Rec);
    const bound = blockSizeFor(TYPED_PREFIX + codec.measureBound({ s: 'abcdefghijklmnopqrstuvwxyz0123456789ABCD' }));
    const afterBlock = blockSizeFor(TYPED_PREFIX + codec.measure({ s: 'after' }));
    for (let extra = 8; extra < 32; extra += 8) {
      const pile = openPile({ segmentSize: SEG });
      try {
        const view = pile.schema('rec', Rec);
        const stale = Buffer.alloc(bound + extra - 16);
        // At block offset `bound` (payload offset bound - 16): size word, then a FREE word1 (zero).
        stale.writeUInt32LE(extra + afterBlock, bound - 16);
        const gap = pile.put(stale);
        const after = view.put({ s: 'after' });
        pile.delete(gap);
        const trimmed = view.put({ s: 'abcdefghijklmnopqrstuvwxyz0123456789ABCD' });
        expect(view.get(after)).to.deep.equal({ s: 'after' });
        expect(view.get(trimmed)).to.deep.equal({ s: 'abcdefghijklmnopqrstuvwxyz0123456789ABCD' });
        const report = pile.verify();
        expect(report.ok, JSON.stringify(report)).to.equal(true);
        expect(pile.stats.objectCount).to.equal(2);
      } finally {
        pile.close();
      }
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

  it('agrees with a Map model through puts into freed blocks of every size, sets and deletes; verify() holds after each (property)', () => {
    // Lone surrogates are refused (test/value-round-trip.test.ts): every width of UTF-8 but those.
    const text = fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀'), maxLength: 700 });
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ put: text, tags: fc.array(text, { maxLength: 4 }) }),
            fc.record({ set: text, at: fc.nat() }),
            fc.record({ del: fc.nat() }),
            fc.record({ raw: fc.nat({ max: 600 }) }),
          ),
          { maxLength: 80 },
        ),
        (ops) => {
          const pile = openPile({ segmentSize: SEG });
          try {
            const view = pile.schema('doc', Doc);
            const live = new Map<PilePointer, Doc>();
            let id = 0;
            let generic = 0;
            for (const op of ops) {
              if ('put' in op) {
                const doc = { id: id++, title: op.put, tags: op.tags };
                live.set(view.put(doc), doc);
              } else if ('raw' in op) {
                // Generic records of any size in between: free blocks of every size for the puts to land
                // in, left full of words that read as free-block headers, so that any write or merge
                // that trusts stale bytes shows in verify().
                const bait = Buffer.alloc(op.raw);
                for (let i = 0; i + 8 <= bait.length; i += 8) bait.writeUInt32LE(64, i);
                const freed = pile.put(bait);
                pile.put(Buffer.alloc(op.raw % 97)); // after it, so that it is not merged into the tail
                pile.delete(freed);
                generic++;
              } else if (live.size > 0) {
                const ptr = [...live.keys()][('set' in op ? op.at : op.del) % live.size]!;
                if ('set' in op) {
                  const doc = { id: id++, title: op.set, tags: [] };
                  view.set(ptr, doc);
                  live.set(ptr, doc);
                } else {
                  pile.delete(ptr);
                  live.delete(ptr);
                }
              }
              const report = pile.verify();
              expect(report.ok, JSON.stringify(report)).to.equal(true);
            }
            for (const [ptr, doc] of live) expect(view.get(ptr)).to.deep.equal(doc);
            const report = pile.verify();
            expect(report.ok, JSON.stringify(report)).to.equal(true);
            expect(pile.stats.objectCount).to.equal(live.size + generic);
          } finally {
            pile.close();
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
