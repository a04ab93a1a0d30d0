import { expect } from 'chai';
import fc from 'fast-check';
import { z } from 'zod';
import { KIND_RAW, KIND_TYPED, STATE_USED, word1 } from '../src/storage/BlockFormat';
import { openPile, type Pile } from '../src/Pile';
import type { PilePointer } from '../src/records/PilePointer';
import { compileQuickLocate } from '../src/records/PointerCheck';
import { LOCATE_FIELDS } from '../src/records/RecordStore';
import { PointerFormat, SEGMENT_DIV } from '../src/records/PointerFormat';

// The typed and raw read paths first try the compiled fast check (PointerCheck), and fall back to
// the full resolve() only when it misses. Both must agree on every number: what the fast check
// accepts must be a live, unlinked record of the wanted kind that resolve() finds at the same
// offset, and what resolve() finds as such a record the fast check must accept (no verifyOnRead).
// The pile's scratch fields (hSeg/hOff after a resolve) are read here: the agreement is an
// internal property, the public API hides which path served a read.

const MiB = 1 << 20;
const TYPED_USED = word1(0, KIND_TYPED, STATE_USED, 0);
const RAW_USED = word1(0, KIND_RAW, STATE_USED, 0);

interface Internals {
  segments: unknown[];
  hSeg: { index: number } | undefined;
  hOff: number;
  dSeg: unknown;
  dOff: number;
  typedWordMask: number;
  rawWordMask: number;
}

/** What the compiled check is called on: the fields it reads and writes, by the names the pile gives them. */
function locateScratch(inner: Internals): Record<string, unknown> {
  return { [LOCATE_FIELDS.segments]: inner.segments, [LOCATE_FIELDS.seg]: undefined };
}

/** A pile with live, deleted, grown (linked) typed records and raw blocks over three segments. */
function buildPile(): { pile: Pile; known: number[] } {
  const pile = openPile({ segmentSize: MiB });
  const view = pile.schema('r', z.object({ id: z.number(), name: z.string() }));
  const known: number[] = [];
  for (let i = 0; i < 20_000; i++) {
    const p = view.put({ id: i, name: 'n'.repeat(i % 97) });
    known.push(p);
    if (i % 7 === 0) pile.delete(p);
    else if (i % 11 === 0) view.set(p, { id: i, name: 'grown past its block '.repeat(20) });
    if (i % 13 === 0) known.push(pile.allocRaw(i % 300, i));
    if (i % 17 === 0) known.push(pile.putRaw(Buffer.alloc(i % 200, i & 0xff), i));
  }
  return { pile, known };
}

describe('fast pointer check and full resolve', () => {
  let pile: Pile;
  let known: number[];
  before(() => ({ pile, known } = buildPile()));
  after(() => pile.close());

  function agree(ptr: number): void {
    const inner = pile as unknown as Internals;
    const fmt = new PointerFormat(pile.segmentSize);
    const quick = compileQuickLocate(fmt, LOCATE_FIELDS);
    for (const [want, mask, kind] of [
      [TYPED_USED, inner.typedWordMask, 'typed'],
      [RAW_USED, inner.rawWordMask, 'raw'],
    ] as const) {
      const scratch = locateScratch(inner);
      const off = quick.call(scratch, ptr, want, mask);
      const live = pile.has(ptr as PilePointer);
      const unlinked = live && inner.hSeg === inner.dSeg && inner.hOff === inner.dOff;
      const sameKind = unlinked && kindAt(ptr) === kind;
      if (off >= 0) {
        expect(live, `fast check accepted ${ptr} (${kind}), resolve did not`).to.equal(true);
        expect(unlinked, `fast check accepted the linked record ${ptr}`).to.equal(true);
        expect(sameKind, `fast check accepted ${ptr} as ${kind}`).to.equal(true);
        expect(inner.hOff, `offset of ${ptr}`).to.equal(off);
        expect((scratch[LOCATE_FIELDS.seg] as { index: number } | undefined)?.index, `segment of ${ptr}`).to.equal(inner.hSeg?.index);
      } else {
        expect(sameKind, `resolve found the unlinked ${kind} record ${ptr}, the fast check missed it`).to.equal(false);
      }
    }
  }

  /** 'typed', 'raw' or another kind name of the live record `ptr` names (resolve() just ran). */
  function kindAt(ptr: number): string | undefined {
    try {
      pile.rawTag(ptr as PilePointer);
      return 'raw';
    } catch {
      return pile.schemaOf(ptr as PilePointer) !== undefined ? 'typed' : 'other';
    } finally {
      pile.has(ptr as PilePointer);
    }
  }

  /** A pointer near a known one: another tag, segment or offset, or a few units off. */
  const near = (fmt: PointerFormat): fc.Arbitrary<number> =>
    fc.tuple(fc.constantFrom(...known), fc.integer({ min: 0, max: 5 }), fc.integer({ min: -64, max: 64 })).map(([p, how, d]) => {
      switch (how) {
        case 0:
          return p;
        case 1:
          return p + d;
        case 2:
          return p + d * fmt.offsetDiv; // another segment, same offset
        case 3:
          return p + d * fmt.offsetDiv * SEGMENT_DIV; // another tag
        case 4:
          return p + d * 0.5; // not an integer
        default:
          return p - (p % fmt.offsetDiv) + fmt.offsetDiv - 1 - (d & 7); // the end of its segment
      }
    });

  it('agree on the pointers of the pile, stale ones included, and numbers next to them', () => {
    const fmt = new PointerFormat(pile.segmentSize);
    fc.assert(
      fc.property(near(fmt), (p) => agree(p)),
      { seed: 15, numRuns: 20_000 },
    );
  });

  it('agree on arbitrary numbers', () => {
    const anyNumber = fc.oneof(
      fc.integer({ min: -10, max: 2 ** 31 }),
      fc.maxSafeNat(),
      fc.double({ noNaN: false }),
      fc.constantFrom(0, -0, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, Infinity, NaN),
    );
    fc.assert(
      fc.property(anyNumber, (p) => agree(p)),
      { seed: 15, numRuns: 20_000 },
    );
  });

  it('can tell: the pile holds live, stale, linked and raw pointers that each path sees', () => {
    const inner = pile as unknown as Internals;
    const quick = compileQuickLocate(new PointerFormat(pile.segmentSize), LOCATE_FIELDS);
    const counts = { typed: 0, raw: 0, stale: 0, linked: 0 };
    for (const p of known) {
      const scratch = locateScratch(inner);
      if (quick.call(scratch, p, TYPED_USED, inner.typedWordMask) >= 0) counts.typed++;
      else if (quick.call(scratch, p, RAW_USED, inner.rawWordMask) >= 0) counts.raw++;
      else if (!pile.has(p as PilePointer)) counts.stale++;
      else counts.linked++;
    }
    expect(counts.typed).to.be.greaterThan(1000);
    expect(counts.raw).to.be.greaterThan(100);
    expect(counts.stale).to.be.greaterThan(1000);
    expect(counts.linked).to.be.greaterThan(100);
  });
});
