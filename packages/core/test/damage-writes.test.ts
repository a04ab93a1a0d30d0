import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, PileError, type Pile, type PilePointer } from '../src';

const SEG = 1 << 20;
const OFFSET_DIV = SEG / 8;

/** Where the header of the block `ptr` names starts in its segment file. */
function headerAt(dir: string, ptr: PilePointer): { file: string; offset: number } {
  const off = (ptr % OFFSET_DIV) * 8;
  const seg = Math.floor(ptr / OFFSET_DIV) % 2 ** 14;
  return { file: path.join(dir, `seg-${String(seg).padStart(6, '0')}.pile`), offset: off };
}

function corruptCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof PileError ? err.code : String(err);
  }
  return undefined;
}

describe('writes to a damaged record', () => {
  let dir: string;
  let pile: Pile;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-damage-writes-'));
    pile = openPile({ dir, segmentSize: SEG });
  });
  afterEach(() => {
    pile.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Doubles the size word of `victim`'s header in the file: the mapping sees it at once. */
  function growSizeWord(victim: PilePointer): void {
    const { file, offset } = headerAt(dir, victim);
    const fd = fs.openSync(file, 'r+');
    const b = Buffer.alloc(4);
    fs.readSync(fd, b, 0, 4, offset);
    b.writeUInt32LE(b.readUInt32LE(0) * 2, 0);
    fs.writeSync(fd, b, 0, 4, offset);
    fs.closeSync(fd);
  }

  it('delete refuses with PILE_CORRUPT instead of freeing the neighbour, which still reads', () => {
    const victim = pile.put('v'.repeat(40));
    const neighbour = pile.put('neighbour');
    growSizeWord(victim);
    expect(corruptCode(() => pile.delete(victim))).to.equal('PILE_CORRUPT');
    expect(pile.get(neighbour)).to.equal('neighbour');
    const again = pile.put('n'.repeat(40));
    expect(pile.get(neighbour)).to.equal('neighbour');
    expect(pile.get(again)).to.equal('n'.repeat(40));
  });

  it('set refuses with PILE_CORRUPT instead of writing over the neighbour', () => {
    const victim = pile.put({ a: 1 }, { preallocate: 32 });
    const neighbour = pile.put('neighbour');
    growSizeWord(victim);
    expect(corruptCode(() => pile.set(victim, 'x'.repeat(100)))).to.equal('PILE_CORRUPT');
    expect(pile.get(neighbour)).to.equal('neighbour');
    expect(pile.verify().corrupt.map((c) => c.reason)).to.include('checksum mismatch');
  });

  it('a sound record is deleted and set as usual', () => {
    const p = pile.put('ok');
    pile.set(p, 'still ok');
    expect(pile.get(p)).to.equal('still ok');
    expect(pile.delete(p)).to.equal(true);
    expect(pile.verify().ok).to.equal(true);
  });
});
