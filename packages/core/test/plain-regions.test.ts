import { expect } from 'chai';
import { native } from '@pile/native';
import { openPile, type Pile } from '../src';
import { blockDamage } from '../src/storage/Checksum';
import type { Allocator } from '../src/alloc/Allocator';
import { walkPlainRegions } from '../src/recovery/PlainRegions';
import type { Segment } from '../src/storage/Segment';

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

  it("the native step (@pile/native's plainRecords) accepts a record exactly when the checks here do", () => {
    const { pile, from } = appended();
    const { segments } = inside(pile);
    const seg = segments[0]!;
    // Raw records, mutable (a checksum of the header alone) and sealed, of a few lengths.
    for (const len of [0, 5, 64, 1000]) {
      pile.allocRaw(len, 7);
      pile.putRaw(new Uint8Array(len).fill(len & 0xff), 9);
    }
    const out = new Float64Array(4);
    const offsets: number[] = [];
    for (let off = from; off < inside(pile).alloc.tailAddr; off += seg.u32[off >>> 2]!) offsets.push(off);
    // Every string record below 1 KiB in one step; it stops at the first of 1,024 bytes (CRC32, left to the code here).
    native.plainRecords(seg.u32, 0, from, SEG, SEG, out);
    expect([out[0], out[1]]).to.deep.equal([offsets[1024], 1024]);
    // From there, record by record, through a window that starts 64 KiB lower.
    const base = (1 << 16) * Math.floor(offsets[1024]! / (1 << 16));
    const win = seg.u32.subarray(base >>> 2);
    for (const off of offsets.slice(1024)) {
      const size = seg.u32[off >>> 2]!;
      const length = seg.u32[(off >>> 2) + 2]!;
      native.plainRecords(win, base, off, off + size, SEG, out);
      expect([out[0], out[1]], `record at ${off} of length ${length}`).to.deep.equal(length < 1024 ? [off + size, 1] : [off, 0]);
    }
    // One bit flipped in the length, the checksum or the payload of a record: the native step
    // accepts it when blockDamage finds nothing wrong, and only then (it does not: every flip shows).
    let flips = 0;
    for (const i of [0, 1, 2, 3, 4, 5, 31, 500, 1023, 1101, 1102, 1104, 1106]) {
      const off = offsets[i]!;
      const size = seg.u32[off >>> 2]!;
      for (let byte = 8; byte < size; byte += 5) {
        for (const bit of [0, 3, 7]) {
          seg.buf[off + byte]! ^= 1 << bit;
          native.plainRecords(seg.u32, 0, off, off + size, SEG, out);
          const holds = blockDamage(seg.buf, seg.u32, off) === undefined && seg.u32[(off >>> 2) + 2]! < 1024;
          expect(out[1] === 1, `record ${i}, byte ${byte}, bit ${bit}`).to.equal(holds);
          seg.buf[off + byte]! ^= 1 << bit;
          flips++;
        }
      }
    }
    expect(flips).to.be.greaterThan(1000);
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
