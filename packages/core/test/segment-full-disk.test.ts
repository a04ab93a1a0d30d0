import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type PilePointer } from '../src';
import { segmentFileName } from '../src/storage/Segment';
import { buildCore } from './fixtures/build-core';
import { expectPileError } from './fixtures/expect-error';

// A full disk while a new segment file is written full of zeros (file systems without
// posix_fallocate): a short write must not leave a file shorter than its mapping (the first store
// past its end would kill the process with SIGBUS), and the segment must not be counted.

const MiB = 1 << 20;
const SHORT = 1_040_384; // 1 MiB less 8 KiB: the file a short write left in the field

describe('segments on a full disk', function () {
  this.timeout(120_000);
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-full-'));
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('a short zero-fill write fails the put with PILE_OUT_OF_SPACE (ENOSPC), not SIGBUS; every acknowledged record reopens', () => {
    buildCore();
    const dir = path.join(tmp, 'p');
    // Room for segment 0 and all but 8 KiB of segment 1.
    const r = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'full-disk-writer.js'), dir, String(MiB + SHORT)], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.signal, r.stderr).to.equal(null);
    expect(r.status, r.stderr).to.equal(0);
    const out = JSON.parse(r.stdout) as { acked: PilePointer[]; code: string; message: string };
    expect(out.code).to.equal('PILE_OUT_OF_SPACE');
    expect(out.message).to.contain('ENOSPC').and.contain(segmentFileName(1));
    expect(out.acked.length).to.be.greaterThan(500);
    // The half-made file is gone and not counted.
    expect(fs.existsSync(path.join(dir, segmentFileName(1)))).to.equal(false);
    const pile = openPile({ dir });
    try {
      expect(pile.stats.segmentCount).to.equal(1);
      out.acked.forEach((p, i) => expect(pile.get<string>(p)).to.equal(`record ${i} ${'x'.repeat(1000)}`));
      expect(pile.verify().ok).to.equal(true);
      // With room again, the pile grows as usual.
      for (let i = 0; i < 2000; i++) pile.put(`more ${i} ${'y'.repeat(1000)}`);
      expect(pile.stats.segmentCount).to.be.greaterThan(1);
    } finally {
      pile.close();
    }
  });

  /** A pile whose last segment (1) holds no record after a clean close, and its records in segment 0. */
  function pileWithEmptyLastSegment(dir: string, keepRecordInLast: boolean): { ptrs: PilePointer[] } {
    const pile = openPile({ dir, segmentSize: MiB });
    const ptrs: PilePointer[] = [];
    for (let i = 0; i < 500; i++) ptrs.push(pile.put(`r${i} ${'z'.repeat(1000)}`));
    const big = pile.put(Buffer.alloc(900_000, 1)); // does not fit in segment 0's rest
    expect(pile.stats.segmentCount).to.equal(2);
    if (!keepRecordInLast) pile.delete(big);
    pile.close();
    return { ptrs };
  }

  it('an open finds a short last segment that holds no record: drops it and recovers', () => {
    const dir = path.join(tmp, 'q');
    const { ptrs } = pileWithEmptyLastSegment(dir, false);
    fs.truncateSync(path.join(dir, segmentFileName(1)), SHORT);
    // Read-only opens can not repair: refused as before.
    expectPileError(() => openPile({ dir, readonly: true }), 'PILE_CORRUPT', segmentFileName(1));
    let pile = openPile({ dir });
    try {
      expect(pile.lastRecovery.ran).to.equal(true);
      expect(pile.stats.segmentCount).to.equal(1);
      expect(fs.existsSync(path.join(dir, segmentFileName(1)))).to.equal(false);
      ptrs.forEach((p, i) => expect(pile.get<string>(p)).to.equal(`r${i} ${'z'.repeat(1000)}`));
      expect(pile.verify().ok).to.equal(true);
      pile.put(Buffer.alloc(900_000, 2));
      expect(pile.stats.segmentCount).to.equal(2);
    } finally {
      pile.close();
    }
    pile = openPile({ dir });
    try {
      expect(pile.verify().ok).to.equal(true);
      expect(pile.stats.objectCount).to.equal(501);
    } finally {
      pile.close();
    }
  });

  it('a short last segment that holds a record is still refused (PILE_CORRUPT), nothing deleted', () => {
    const dir = path.join(tmp, 'r');
    pileWithEmptyLastSegment(dir, true);
    fs.truncateSync(path.join(dir, segmentFileName(1)), SHORT);
    expectPileError(() => openPile({ dir }), 'PILE_CORRUPT', segmentFileName(1));
    expect(fs.statSync(path.join(dir, segmentFileName(1))).size).to.equal(SHORT);
  });
});
