import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { openPile, type Pile, type PilePointer } from '../src';
import { SEG, flipByte, markUnclean, metaFile, readU32, segFile, setMetaField, where, writeU32 } from './fixtures/pile-files';
import { codeOf } from './fixtures/expect-error';

function expectIntact(pile: Pile, records: Map<PilePointer, unknown>): void {
  for (const [ptr, value] of records) expect(isDeepStrictEqual(pile.get(ptr), value), `record ${ptr}`).to.equal(true);
}

/** Byte position of a block's header word `word` in its segment file. */
function headerAt(dir: string, ptr: PilePointer, word: number): [string, number] {
  const { segment, offset } = where(ptr);
  return [segFile(dir, segment), offset + word * 4];
}

describe('damaged block headers and generations', () => {
  let tmp: string;
  let dir: string;
  let n = 0;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-headers-'));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  beforeEach(() => {
    dir = path.join(tmp, `p${n++}`);
  });

  describe('generations survive compact() (issue 14.1)', () => {
    for (const mapped of [true, false]) {
      it(`a deleted record's pointer stays stale after compact releases its segment and the pile regrows (${mapped ? 'mapped' : 'in memory'})`, () => {
        const pile = openPile({ ...(mapped ? { dir } : {}), segmentSize: SEG });
        const stale: PilePointer[] = [];
        const keep = pile.put(Buffer.alloc(600_000, 1));
        for (let round = 0; round < 3; round++) {
          const old = pile.put(Buffer.alloc(600_000, 2 + round));
          stale.push(old);
          expect(pile.delete(old)).to.equal(true);
          expect(pile.compact().segmentsAfter).to.equal(1);
          const fresh = pile.put(Buffer.alloc(600_000, 9));
          for (const s of stale) {
            expect(
              codeOf(() => pile.get(s)),
              `round ${round}`,
            ).to.equal('PILE_STALE_POINTER');
            expect(pile.delete(s)).to.equal(false);
          }
          expect(pile.get<Buffer>(fresh)[0]).to.equal(9);
          pile.delete(fresh);
          pile.compact();
        }
        expect(pile.get<Buffer>(keep)[0]).to.equal(1);
        pile.close();
      });
    }

    it('the generation floor is kept in pile.meta: after a reopen, a regrown segment still refuses old pointers', () => {
      let pile = openPile({ dir, segmentSize: SEG });
      pile.put(Buffer.alloc(600_000, 1));
      const old = pile.put(Buffer.alloc(600_000, 2));
      pile.delete(old);
      pile.compact();
      pile.close();
      pile = openPile({ dir });
      const fresh = pile.put(Buffer.alloc(600_000, 3));
      expect(codeOf(() => pile.get(old))).to.equal('PILE_STALE_POINTER');
      expect(pile.delete(old)).to.equal(false);
      expect(pile.get<Buffer>(fresh)[0]).to.equal(3);
      pile.close();
      // And after an unclean open, whose recovery rebuilds the free lists.
      markUnclean(dir);
      pile = openPile({ dir });
      expect(pile.lastRecovery.ran).to.equal(true);
      expect(codeOf(() => pile.get(old))).to.equal('PILE_STALE_POINTER');
      expect(pile.get<Buffer>(fresh)[0]).to.equal(3);
      pile.close();
    });
  });

  describe('kind, state and flag bits (issue 14.3)', () => {
    it('a Buffer record whose kind bit flips to a mutable raw block: verify reports it, verifyOnRead throws PILE_CORRUPT', () => {
      let pile = openPile({ dir, segmentSize: SEG });
      const ptr = pile.put(Buffer.from('0123456789abcdef-a Buffer record'));
      const other = pile.put('a neighbour');
      pile.close();
      const [file, pos] = headerAt(dir, ptr, 1);
      flipByte(file, pos + 2, 0x40); // bit 22: kind 9 (buffer) becomes 8 (raw)
      pile = openPile({ dir, verifyOnRead: true });
      const report = pile.verify();
      expect(report.ok).to.equal(false);
      expect(report.corrupt.map((c) => c.offset)).to.include(where(ptr).offset);
      expect(codeOf(() => pile.get(ptr))).to.equal('PILE_CORRUPT');
      expect(pile.get(other)).to.equal('a neighbour');
      pile.close();
    });

    it('a sealed raw block whose SEALED flag flips, and a mutable raw block whose kind or size is damaged, are reported', () => {
      let pile = openPile({ dir, segmentSize: SEG });
      const sealed = pile.putRaw(Buffer.from('sealed bytes'), 7);
      const mutable = pile.allocRaw(64, 8);
      const mutable2 = pile.allocRaw(64, 9);
      pile.put('after');
      pile.close();
      const [f1, p1] = headerAt(dir, sealed, 1);
      flipByte(f1, p1 + 3, 0x20); // bit 29: SEALED
      const [f2, p2] = headerAt(dir, mutable, 1);
      flipByte(f2, p2 + 2, 0x40); // bit 22: kind 8 becomes 9
      const [f3, p3] = headerAt(dir, mutable2, 0);
      flipByte(f3, p3 + 1, 0x01); // size + 256
      pile = openPile({ dir, verifyOnRead: true });
      const offsets = pile.verify().corrupt.map((c) => c.offset);
      for (const p of [sealed, mutable, mutable2]) expect(offsets, `pointer ${p}`).to.include(where(p).offset);
      expect(codeOf(() => pile.rawBuffer(sealed))).to.equal('PILE_CORRUPT');
      expect(codeOf(() => pile.rawBuffer(mutable2))).to.equal('PILE_CORRUPT');
      // A write to the damaged mutable block refuses instead of freeing by its size.
      expect(codeOf(() => pile.delete(mutable2))).to.equal('PILE_CORRUPT');
      pile.close();
    });
  });

  describe('damaged sizes never spread to healthy records (issue 14.4)', () => {
    it('a flipped bit in a free block size word: later puts never carve over live neighbours (clean open)', () => {
      let pile = openPile({ dir, segmentSize: SEG });
      const live = new Map<PilePointer, unknown>();
      const freed: PilePointer[] = [];
      for (let i = 0; i < 40; i++) {
        const v = `record ${i} `.padEnd(100, 'x');
        const p = pile.put(v);
        if (i % 2 === 1) freed.push(p);
        else live.set(p, v);
      }
      for (const p of freed) pile.delete(p);
      pile.close();
      for (const p of freed.slice(0, 5)) {
        const [file, pos] = headerAt(dir, p, 0);
        flipByte(file, pos + 1, 0x04); // size + 1024: the block now claims ~8 live neighbours
      }
      pile = openPile({ dir, verifyOnRead: true });
      for (let i = 0; i < 60; i++) {
        const v = `new ${i} `.padEnd(i % 3 === 0 ? 100 : 40 + i, 'y');
        live.set(pile.put(v), v);
      }
      expectIntact(pile, live);
      pile.close();
    });

    it('a flipped bit in a free block size word: an unclean open does not merge over live neighbours either', () => {
      let pile = openPile({ dir, segmentSize: SEG });
      const live = new Map<PilePointer, unknown>();
      const freed: PilePointer[] = [];
      for (let i = 0; i < 40; i++) {
        const v = `record ${i} `.padEnd(112, 'x');
        const p = pile.put(v);
        if (i % 4 === 1) freed.push(p);
        else live.set(p, v);
      }
      for (const p of freed) pile.delete(p);
      pile.close();
      const [file, pos] = headerAt(dir, freed[2]!, 0);
      flipByte(file, pos + 1, 0x02); // size 128 + 512 = 5 blocks: lands on a real header
      markUnclean(dir);
      pile = openPile({ dir, verifyOnRead: true });
      for (let i = 0; i < 60; i++) {
        const v = `new ${i} `.padEnd(112, 'y');
        live.set(pile.put(v), v);
      }
      expectIntact(pile, live);
      pile.close();
    });

    for (const [damaged, how, code] of [
      [128 + 256, 'one flipped bit: undone, the record dropped as torn', 'PILE_STALE_POINTER'],
      [512, 'two flipped bits: left in place as damaged', 'PILE_CORRUPT'],
    ] as const) {
      it(`after an unclean open, a torn record whose size spans live records is not freed by that size (${how})`, () => {
        const dir = path.join(tmp, `torn-${damaged}`);
        let pile = openPile({ dir, segmentSize: SEG });
        const live = new Map<PilePointer, unknown>();
        const ptrs: PilePointer[] = [];
        for (let i = 0; i < 30; i++) {
          const v = `record ${i} `.padEnd(112, 'z'); // 128-byte blocks
          const p = pile.put(v);
          ptrs.push(p);
          live.set(p, v);
        }
        pile.close();
        const torn = ptrs[10]!;
        live.delete(torn);
        const [file, pos] = headerAt(dir, torn, 0);
        expect(readU32(file, pos)).to.equal(128);
        writeU32(file, pos, damaged); // spans the next records exactly, ending on a real header
        markUnclean(dir);
        pile = openPile({ dir, verifyOnRead: true });
        expect(pile.lastRecovery.ran).to.equal(true);
        for (let i = 0; i < 40; i++) {
          const v = `new ${i} `.padEnd(112, 'w');
          live.set(pile.put(v), v);
        }
        expectIntact(pile, live);
        expect(codeOf(() => pile.get(torn))).to.equal(code);
        pile.close();
        // A second unclean open keeps it so.
        markUnclean(dir);
        pile = openPile({ dir, verifyOnRead: true });
        expectIntact(pile, live);
        pile.close();
      });
    }
  });

  describe('free-list links (issue 14.12)', () => {
    it('a flipped bit in a link makes no fractional address: puts go on, with no RangeError and no live record touched', () => {
      for (const byte of [0, 1, 3, 6, 7]) {
        const d = path.join(tmp, `link-${byte}`);
        let pile = openPile({ dir: d, segmentSize: SEG });
        const live = new Map<PilePointer, unknown>();
        const freed: PilePointer[] = [];
        for (let i = 0; i < 20; i++) {
          const v = `r${i} `.padEnd(60, 'q');
          const p = pile.put(v);
          if (i % 2 === 0) freed.push(p);
          else live.set(p, v);
        }
        for (const p of freed) pile.delete(p);
        pile.close();
        // The last freed block heads its list; its next link (f64 at +16) names the one before.
        const [file, pos] = headerAt(d, freed[freed.length - 1]!, 4);
        flipByte(file, pos + byte, 0x01);
        flipByte(...headerAt(d, freed[3]!, 6), 0x10); // a prev link too
        pile = openPile({ dir: d, verifyOnRead: true });
        for (let i = 0; i < 30; i++) {
          const v = `n${i} `.padEnd(60, 'p');
          live.set(pile.put(v), v);
        }
        expectIntact(pile, live);
        pile.close();
      }
    });
  });

  it('a pile of format version 1 is refused with PILE_FORMAT_VERSION naming pile.meta', () => {
    openPile({ dir, segmentSize: SEG }).close();
    setMetaField(dir, 4, 1);
    const code = codeOf(() => openPile({ dir }));
    expect(code).to.equal('PILE_FORMAT_VERSION');
    try {
      openPile({ dir });
    } catch (err) {
      expect(String(err)).to.include(metaFile(dir)).and.include('format version 1');
    }
  });
});
