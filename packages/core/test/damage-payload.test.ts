import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile } from '../src';
import { BLOCK_HEADER_SIZE } from '../src/storage/BlockFormat';
import { codeOf } from './fixtures/expect-error';
import { SEG, segFile, where } from './fixtures/pile-files';

// A generic record is unpacked from the segment itself, bounded by its length (no copy per get):
// a damaged payload that would make msgpackr read into the next block, or stop short of its
// end, must be PILE_CORRUPT, never a value made partly of a neighbour's bytes.
describe('a damaged MessagePack payload is PILE_CORRUPT', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-payload-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const [header, what] of [
    [0x93, 'claims one element more (reads into the next block)'],
    [0x91, 'claims one element fewer (ends before its length)'],
  ] as const) {
    it(`an array header that ${what}`, () => {
      const pile = openPile({ dir, segmentSize: SEG });
      const ptr = pile.put(['a', 'b']);
      const next = pile.put(['c', 'd']);
      pile.close();
      const { segment, offset } = where(ptr);
      const fd = fs.openSync(segFile(dir, segment), 'r+');
      const at = offset + BLOCK_HEADER_SIZE;
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, at);
      expect(b[0], 'the payload starts with a fixarray of 2').to.equal(0x92);
      fs.writeSync(fd, Buffer.of(header), 0, 1, at);
      fs.closeSync(fd);
      const again = openPile({ dir, segmentSize: SEG });
      try {
        expect(codeOf(() => again.get(ptr))).to.equal('PILE_CORRUPT');
        expect(again.get(next)).to.deep.equal(['c', 'd']);
      } finally {
        again.close();
      }
    });
  }
});
