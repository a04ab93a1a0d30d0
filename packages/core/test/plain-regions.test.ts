import { expect } from 'chai';
import { openPile, type Pile } from '../src';
import type { Allocator } from '../src/Allocator';
import { walkPlainRegions } from '../src/PlainRegions';
import type { Segment } from '../src/Segment';

/** The pile's internals the walk takes. */
const inside = (pile: Pile): { segments: Segment[]; alloc: Allocator } => pile as unknown as { segments: Segment[]; alloc: Allocator };

describe('the one walk of a recovery from a checkpoint (PlainRegions)', () => {
  const SEG = 1 << 20;

  /** A pile of one segment whose records from `from` on are strings of every length up to 1100 bytes, and its region. */
  function appended(): { pile: Pile; from: number; region: [number, number][] } {
    const pile = openPile({ segmentSize: SEG });
    pile.put('the first record makes the segment');
    const from = inside(pile).alloc.tailAddr;
    for (let len = 0; len <= 1100; len++) pile.put('abcdefghijklmnopqrstuvwxyz'.repeat(43).slice(0, len));
    return { pile, from, region: [[0, from]] };
  }

  it('confirms the checksum of records of every length, and counts them', () => {
    const { pile, region } = appended();
    const { segments, alloc } = inside(pile);
    const found = walkPlainRegions(segments, alloc, SEG, region)!;
    expect(found).to.not.equal(undefined);
    expect(found.objectCount).to.equal(1101);
    expect(found.blocks).to.equal(1102);
    // One free run: the tail, to the segment's end.
    expect(found.runs.slice(1, 3)).to.deep.equal([alloc.tailAddr, SEG]);
    pile.close();
  });

  it('hands over when a record of any length is torn, or a journal, link or damaged block lies in the region', () => {
    for (const len of [0, 1, 2, 3, 4, 5, 31, 1023, 1024, 1100]) {
      const { pile, from, region } = appended();
      const { segments, alloc } = inside(pile);
      // Walk to the record of that length, and flip one bit of its last payload byte (of its checksum when it has none).
      let off = from;
      for (let i = 0; i < len; i++) off += segments[0]!.u32[off >>> 2]!;
      if (len === 0) segments[0]!.u32[(off >>> 2) + 3]! ^= 1;
      else segments[0]!.buf[off + 16 + len - 1]! ^= 1;
      expect(walkPlainRegions(segments, alloc, SEG, region), `length ${len}`).to.equal(undefined);
      pile.close();
    }
    const { pile, region } = appended();
    const { segments, alloc } = inside(pile);
    const p = pile.put('short');
    pile.set(p, 'x'.repeat(500)); // grown: a link and a body
    expect(walkPlainRegions(segments, alloc, SEG, region)).to.equal(undefined);
    pile.close();
  });
});
