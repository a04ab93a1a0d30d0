import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { openPile, type PilePointer } from '../src';
import { FORMAT_VERSION } from '../src/storage/BlockFormat';
import { metaFile } from './fixtures/pile-files';

/**
 * Piles of format 3 (one set of free lists threaded through every segment, made by a build before
 * per-segment free lists: test/fixtures/format3/make.js, run with 537bb7d) open in this build: one
 * scan of every segment makes each segment's lists and counters, the meta file says format 4 from
 * then on, and the next open after a clean close scans nothing.
 */

const FIXTURES = path.join(__dirname, 'fixtures', 'format3');
const valueOf = (i: number): string => `record ${i} `.padEnd(300 + (i % 7) * 40, String.fromCharCode(97 + (i % 26)));

/** What each fixture holds: every fifth record deleted; in killed/, of records 2600-4599, i % 3 === 0 deleted and i % 3 === 1 set to upper case. */
function expected(killed: boolean): Map<number, string | undefined> {
  const ptrs = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'records.json'), 'utf8')) as number[];
  const out = new Map<number, string | undefined>();
  ptrs.forEach((p, i) => {
    let v: string | undefined = i % 5 === 0 ? undefined : valueOf(i);
    if (killed && v !== undefined && i >= 2600 && i < 4600) {
      if (i % 3 === 0) v = undefined;
      else if (i % 3 === 1) v = v.toUpperCase();
    }
    out.set(p, v);
  });
  return out;
}

describe('format 3 piles open in format 4 (migration by one scan)', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-format3-'));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  function unpack(name: string): string {
    const dir = path.join(tmp, name);
    fs.mkdirSync(dir);
    for (const f of fs.readdirSync(path.join(FIXTURES, name))) {
      fs.writeFileSync(path.join(dir, f.replace(/\.gz$/, '')), zlib.gunzipSync(fs.readFileSync(path.join(FIXTURES, name, f))));
    }
    return dir;
  }

  for (const name of ['clean', 'killed']) {
    it(`a format-3 pile ${name === 'clean' ? 'closed cleanly' : 'whose writer was killed after deletes and sets'}: every record, verify, then format 4`, () => {
      const dir = unpack(name);
      expect(fs.readFileSync(metaFile(dir)).readUInt32LE(4)).to.equal(3);
      const want = expected(name === 'killed');
      let pile = openPile({ dir, verifyOnRead: true });
      try {
        expect(pile.lastRecovery.ran).to.equal(true);
        expect(pile.lastRecovery.full).to.equal(true);
        let live = 0;
        for (const [p, v] of want) {
          if (v === undefined) expect(() => pile.get(p as PilePointer)).to.throw(/PILE_STALE_POINTER|names no live record/);
          else {
            expect(pile.get(p as PilePointer)).to.equal(v);
            live++;
          }
        }
        expect(pile.stats.objectCount).to.equal(live);
        expect(pile.verify().ok).to.equal(true);
        // Writes on: a delete and a put in the migrated lists.
        const first = [...want].find(([, v]) => v !== undefined)![0] as PilePointer;
        pile.delete(first);
        pile.put('after the migration');
        expect(pile.verify().ok).to.equal(true);
      } finally {
        pile.close();
      }
      expect(fs.readFileSync(metaFile(dir)).readUInt32LE(4)).to.equal(FORMAT_VERSION);
      pile = openPile({ dir });
      try {
        expect(pile.lastRecovery.ran).to.equal(false);
        expect(pile.verify().ok).to.equal(true);
      } finally {
        pile.close();
      }
    });
  }
});
