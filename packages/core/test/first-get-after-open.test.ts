import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type PilePointer } from '../src';
import { buildCore } from './fixtures/build-core';

// A generic record is decoded from the mapped segment, bounded by the record. msgpackr copies its
// whole source up to the record's end when it has to load record structures in the middle of a
// read, which on the first get after an open made that get copy the segment up to the record
// (200 MB near the end of a 256 MiB segment). The catalog's structures are now in place before
// the first decode. Counted in bytes the get allocates, not in time: the machine is shared.

const MiB = 1 << 20;
const RECORDS = 1_000_000;
const CHILD = path.join(__dirname, 'fixtures', 'first-get.js');

interface Measured {
  value: unknown;
  bytes: number;
}

function record(i: number): { id: number; name: string; score: number; tags: string[] } {
  return { id: i, name: `user-${i}`, score: i * 0.5, tags: i % 3 === 0 ? ['a', 'b'] : ['c'] };
}

describe('first generic get after an open', function () {
  this.timeout(300_000);
  let tmp: string;
  let dir: string;
  let first: PilePointer;
  let last: PilePointer;
  let other: PilePointer;

  before(function () {
    buildCore();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-first-get-'));
    dir = path.join(tmp, 'p');
    const pile = openPile({ dir, segmentSize: 256 * MiB });
    for (let i = 0; i < RECORDS; i++) {
      const p = pile.put(record(i));
      if (i === 0) first = p;
      if (i === RECORDS - 2) other = p;
      if (i === RECORDS - 1) last = p;
    }
    // A second shape, put last: it is the newest structure in the catalog.
    other = pile.put({ kind: 'other', at: RECORDS });
    pile.close();
  });
  after(() => {
    if (tmp !== undefined) fs.rmSync(tmp, { recursive: true, force: true });
  });

  function run(ptrs: PilePointer[], mode: 'readwrite' | 'readonly', env: Record<string, string> = {}): Measured[] {
    const out = execFileSync(process.execPath, ['--expose-gc', CHILD, dir, JSON.stringify(ptrs), mode], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });
    return JSON.parse(out) as Measured[];
  }

  for (const mode of ['readwrite', 'readonly'] as const) {
    it(`allocates no more for the first get of the last record than for the next (${mode})`, () => {
      const [a, b, c] = run([last, first, other], mode);
      expect(a!.value).to.deep.equal(record(RECORDS - 1));
      expect(b!.value).to.deep.equal(record(0));
      expect(c!.value).to.deep.equal({ kind: 'other', at: RECORDS });
      // The record is 40-odd bytes some 50 MB into its segment: a copy up to it would be all of that.
      expect(a!.bytes, 'ArrayBuffer bytes allocated by the first get').to.be.below(64 * 1024);
      expect(a!.bytes).to.be.at.most(Math.max(4 * b!.bytes, 64 * 1024));
      expect(c!.bytes, 'ArrayBuffer bytes allocated by a get of the newest shape').to.be.below(64 * 1024);
    });
  }

  it('reads a record whose shape another process added after the open, allocating no more', () => {
    const got = run([last], 'readwrite', { PILE_ADD_SHAPE: '1' });
    expect(got).to.have.length(2);
    expect(got[1]!.value).to.deep.include({ addedBy: 'writer', nested: { shape: 'new', n: 7 } });
    expect(got[1]!.bytes, 'ArrayBuffer bytes allocated reading the new shape').to.be.below(64 * 1024);
  });
});
