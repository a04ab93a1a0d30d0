import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isPileError, openPile, type Pile, type PilePointer } from '../src';

// A segment that compact() in one process released (its file deleted) and that a process then made
// again at the same index: another open that had mapped the old file read the new segment's records
// as stale (PILE_STALE_POINTER for records that were live: the old mapping holds the old blocks).
// The read that finds no live record now checks whether its segment was made again (a read-only
// open: the file at the path is another inode; a writer: the incarnation in pile.coord moved) and
// reads again in the new one (SegmentTable.replacedSegment; docs/concurrency.md).

const CHILD = `
const { openPile } = require(${JSON.stringify(path.join(__dirname, '..', 'dist', 'index.js'))});
const { randomBytes } = require('node:crypto');
const pile = openPile({ dir: process.env.PILE_DIR });
for (const p of JSON.parse(process.env.PILE_FREE)) pile.delete(p);
pile.compact();
const released = pile.stats.segmentCount;
const fresh = [];
for (let i = 0; i < 5; i++) fresh.push(pile.put(Buffer.concat([Buffer.from([100 + i]), randomBytes(300000)])));
process.stdout.write(JSON.stringify({ released, segments: pile.stats.segmentCount, fresh }));
pile.close();
`;

describe('a segment released by compact() and made again by another process', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-remade-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const mode of ['read-only', 'read-write'] as const) {
    it(`a ${mode} open that mapped the old segment reads the new one's records, and a deleted one is still stale`, async () => {
      const w = openPile({ dir, segmentSize: 1 << 20 });
      // Incompressible values of 300 kB: three a segment, so 8 of them fill segments 0 to 2.
      const ptrs = Array.from({ length: 8 }, (_, i) => w.put(Buffer.concat([Buffer.from([i]), randomBytes(300_000)])));
      expect(w.stats.segmentCount).to.equal(3);
      let r: Pile = w;
      if (mode === 'read-only') {
        w.close();
        r = openPile({ dir, readonly: true });
      }
      for (const [i, p] of ptrs.entries()) expect((r.get(p) as Buffer)[0]).to.equal(i); // every segment mapped
      await new Promise(setImmediate); // this process's writer turn is handed back

      const out = spawnSync(process.execPath, ['-e', CHILD], {
        env: { ...process.env, PILE_DIR: dir, PILE_FREE: JSON.stringify(ptrs.slice(3)) },
        encoding: 'utf8',
      });
      expect(out.status, out.stderr).to.equal(0);
      const { released, segments, fresh } = JSON.parse(out.stdout) as { released: number; segments: number; fresh: PilePointer[] };
      expect({ released, segments }).to.deep.equal({ released: 1, segments: 3 });

      for (const [i, p] of fresh.entries()) {
        expect(r.has(p)).to.equal(true);
        expect((r.get(p) as Buffer)[0]).to.equal(100 + i);
      }
      for (const [i, p] of ptrs.slice(0, 3).entries()) expect((r.get(p) as Buffer)[0]).to.equal(i);
      expect(() => r.get(ptrs[6]!))
        .to.throw()
        .that.satisfies((e: unknown) => isPileError(e, 'PILE_STALE_POINTER'));
      expect(r.has(ptrs[6]!)).to.equal(false);
      r.close();
    });
  }
});
