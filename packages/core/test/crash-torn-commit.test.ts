import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type PilePointer } from '../src';
import { GEN_MASK, KIND_STRING, STATE_FREE, STATE_RESERVED, blockSizeFor, genCheck, sizeCheck, word1 } from '../src/storage/BlockFormat';
import { blockChecksum } from '../src/storage/Checksum';
import { SEG, markUnclean, readU32, segFile, where, writeU32 } from './fixtures/pile-files';
import { codeOf } from './fixtures/expect-error';

/** The generation a pointer of a 1 MiB-segment pile carries (all 22 bits: its tag mask is GEN_MASK). */
const genOf = (ptr: PilePointer): number => Math.floor(ptr / 2 ** 31);
/** Payload length of every candidate value (one block size, so the reused block fits exactly). */
const VALUE_LENGTH = 40;
const valueOf = (i: number): string => `torn ${i}`.padEnd(VALUE_LENGTH, '.');

/** The checksum a commit of `value` as a string record of generation `gen` stores in word 3. */
function checksumOf(value: string, gen: number): number {
  const size = blockSizeFor(VALUE_LENGTH);
  const buf = Buffer.alloc(size);
  buf.write(value, 16, 'utf8');
  const u32 = new Uint32Array(buf.buffer, buf.byteOffset, size >>> 2);
  return blockChecksum(buf, u32, 0, size, word1(gen, KIND_STRING, 0, 0), VALUE_LENGTH);
}

/** The first candidate value whose checksum at `gen` has (or has not) all the bits above a generation set, as a generation check word has. */
function valueWithChecksum(gen: number, checkHigh: boolean): string {
  for (let i = 0; ; i++) {
    if ((checksumOf(valueOf(i), gen) >>> 22 === 0x3ff) === checkHigh) return valueOf(i);
  }
}

/**
 * A writer killed inside commit() after some of its stores leaves the block's header in one of these
 * states (commit stores word1 with the kind, still reserved; the checksum in word 3, where the
 * generation check was; the length in word 2, where the size check was; then word1 used).
 */
interface Torn {
  name: string;
  /** Word 3 holds the checksum (else still the generation check). */
  checksum: boolean;
  /** Word 2 holds the length (else still the size check). */
  length: boolean;
  /** The checksum has the 10 high bits that a generation check word has. */
  checkHigh?: boolean;
  /** Damage on top: the lowest set bit of word1's generation flipped, so that it reads lower. */
  genBitLost?: boolean;
}

const STATES: Torn[] = [
  { name: 'after the checksum store, before the length', checksum: true, length: false, checkHigh: false },
  {
    name: 'after the checksum store, before the length, a checksum whose high bits look like a check word',
    checksum: true,
    length: false,
    checkHigh: true,
  },
  { name: 'after the length store, before the state', checksum: true, length: true, checkHigh: false },
  {
    name: 'after the length store, before the state, a checksum whose high bits look like a check word',
    checksum: true,
    length: true,
    checkHigh: true,
  },
  { name: 'after the kind store, before the checksum', checksum: false, length: false },
  {
    name: 'after the kind store, before the checksum, with a bit of the generation in word1 lost',
    checksum: false,
    length: false,
    genBitLost: true,
  },
];

describe('a writer killed inside a commit: recovery keeps the block generation exact', () => {
  let tmp: string;
  let n = 0;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-torn-commit-'));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  for (const torn of STATES) {
    it(`${torn.name}: the block is freed at its own generation, the next record there gets the one after`, () => {
      const dir = path.join(tmp, `p${n++}`);
      let pile = openPile({ dir, segmentSize: SEG });
      const before = pile.put('the record before');
      // A probe finds the offset and generation of the next cut; deleted, the tail takes its place back.
      const probe = pile.put(valueOf(-1));
      const off = where(probe).offset;
      const gen = genOf(probe) + 1;
      pile.delete(probe);
      const value = torn.checkHigh === undefined ? valueOf(0) : valueWithChecksum(gen, torn.checkHigh);
      const ptr = pile.put(value);
      expect(where(ptr).offset).to.equal(off);
      expect(genOf(ptr)).to.equal(gen);
      const after = pile.put('the record after, so that the freed block does not join the tail');
      pile.close();

      // The header as the killed commit left it; word 0 (the size) is the allocator's and holds.
      const file = segFile(dir, where(ptr).segment);
      const size = readU32(file, off);
      expect(size).to.equal(blockSizeFor(VALUE_LENGTH));
      const checksum = readU32(file, off + 12);
      // The case tests what it says: the checksum does (or does not) look like a check word.
      if (torn.checkHigh !== undefined) expect(checksum >>> 22 === 0x3ff).to.equal(torn.checkHigh);
      const g = torn.genBitLost === true ? gen & (gen - 1) : gen;
      writeU32(file, off + 4, word1(g, KIND_STRING, STATE_RESERVED, 0));
      writeU32(file, off + 8, torn.length ? VALUE_LENGTH : sizeCheck(size));
      writeU32(file, off + 12, torn.checksum ? checksum : genCheck(gen));
      markUnclean(dir);

      pile = openPile({ dir });
      try {
        expect(pile.lastRecovery.ran).to.equal(true);
        expect(pile.lastRecovery.corrupt).to.deep.equal([]);
        expect(pile.verify().ok).to.equal(true);
        expect(pile.get(before)).to.equal('the record before');
        expect(pile.get(after)).to.equal('the record after, so that the freed block does not join the tail');
        expect(codeOf(() => pile.get(ptr))).to.equal('PILE_STALE_POINTER');
        // The next record of that size takes the freed block, one generation up: not a random one.
        const next = pile.put(valueOf(1));
        expect(where(next)).to.deep.equal(where(ptr));
        expect(genOf(next)).to.equal(gen + 1);
        expect(pile.get(next)).to.equal(valueOf(1));
        pile.delete(next);
      } finally {
        pile.close();
      }
      // Deleted again: a free block of exactly that generation, its check word agreeing.
      const w1 = readU32(file, off + 4);
      expect((w1 >>> 26) & 3).to.equal(STATE_FREE);
      expect(w1 & GEN_MASK).to.equal(gen + 1);
      expect(readU32(file, off + 12)).to.equal(genCheck(gen + 1));
    });
  }
});
