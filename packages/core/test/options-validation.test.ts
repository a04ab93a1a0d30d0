import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type PileOptions } from '../src/Pile';
import { PileError } from '../src/PileError';
import { expectPileError } from './fixtures/expect-error';

const MiB = 1 << 20;

/** The open fails with PILE_INVALID_OPTION and the message names `option`. */
function rejects(options: unknown, option: string): PileError {
  const err = expectPileError(() => openPile(options as PileOptions), 'PILE_INVALID_OPTION');
  expect(err.message).to.include(option);
  return err;
}

describe('options validation', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-options-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('refuses a segmentSize that is not a power of two, naming the option and the range', () => {
    const err = rejects({ segmentSize: 3 * MiB }, 'segmentSize');
    expect(err.message).to.include(String(3 * MiB));
    rejects({ segmentSize: MiB + 8 }, 'segmentSize');
    rejects({ segmentSize: 1.5 * MiB }, 'segmentSize');
    rejects({ segmentSize: '1048576' }, 'segmentSize');
    rejects({ segmentSize: Number.NaN }, 'segmentSize');
  });

  it('refuses a checkpointBytes below 1 MiB or not an integer, and a checkpointInterval outside 0 .. 2^31-1 ms', () => {
    for (const bad of [0, MiB - 1, MiB + 0.5, '1048576', Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(rejects({ dir, checkpointBytes: bad }, 'checkpointBytes').message).to.include(String(bad));
    }
    for (const bad of [-1, 0.5, '5', 2 ** 31, Number.NaN]) rejects({ dir, checkpointInterval: bad }, 'checkpointInterval');
    expect(fs.readdirSync(dir)).to.deep.equal([]);
    openPile({ dir, checkpointBytes: MiB, checkpointInterval: 0 }).close();
  });

  it('refuses a warm that is not a boolean, and warm for an in-memory pile', () => {
    for (const bad of [1, 'yes', null]) rejects({ dir, warm: bad }, 'warm');
    expect(rejects({ warm: true }, 'warm').message).to.include('in-memory');
    expect(fs.readdirSync(dir)).to.deep.equal([]);
    openPile({ warm: false }).close();
  });

  it('refuses a segmentSize outside 1 MiB .. 1 GiB and accepts both ends', () => {
    rejects({ segmentSize: MiB / 2 }, 'segmentSize');
    rejects({ segmentSize: 2 * 1024 * MiB }, 'segmentSize');
    rejects({ segmentSize: 0 }, 'segmentSize');
    rejects({ segmentSize: -MiB }, 'segmentSize');
    const small = openPile({ segmentSize: MiB });
    expect(small.segmentSize).to.equal(MiB);
    small.close();
    // 1 GiB is valid; an in-memory pile allocates nothing until the first put.
    const big = openPile({ segmentSize: 1024 * MiB });
    expect(big.segmentSize).to.equal(1024 * MiB);
    expect(big.stats.segmentCount).to.equal(0);
    big.close();
  });

  it('refuses a maxMemory below one segment or not a positive integer', () => {
    const err = rejects({ segmentSize: 2 * MiB, maxMemory: MiB }, 'maxMemory');
    expect(err.message).to.include('segmentSize');
    rejects({ maxMemory: 32 * MiB }, 'maxMemory'); // below the default 64 MiB segment
    rejects({ maxMemory: 0 }, 'maxMemory');
    rejects({ maxMemory: -1 }, 'maxMemory');
    rejects({ maxMemory: 1.5 * MiB }, 'maxMemory');
    rejects({ maxMemory: Number.POSITIVE_INFINITY }, 'maxMemory');
    const p = openPile({ segmentSize: MiB, maxMemory: MiB });
    expect(p.maxMemory).to.equal(MiB);
    p.close();
  });

  it('a refused maxMemory leaves no pile behind in the directory', () => {
    rejects({ dir, segmentSize: 2 * MiB, maxMemory: MiB }, 'maxMemory');
    expect(fs.readdirSync(dir)).to.deep.equal([]);
    // The directory is still free for a pile of any segment size.
    const p = openPile({ dir, segmentSize: MiB });
    expect(p.segmentSize).to.equal(MiB);
    p.close();
  });

  it('refuses unknown options by name (a typo is not silently ignored)', () => {
    rejects({ segmentsize: MiB }, 'segmentsize');
    rejects({ directory: dir }, 'directory');
    expect(fs.readdirSync(dir)).to.deep.equal([]);
  });

  it('refuses options of the wrong type, naming each', () => {
    rejects({ dir: '' }, 'dir');
    rejects({ dir: 42 }, 'dir');
    rejects({ readonly: 'yes' }, 'readonly');
    rejects({ verifyOnRead: 1 }, 'verifyOnRead');
    rejects({ onProgress: 'log' }, 'onProgress');
    rejects({ create: 'no' }, 'create');
    rejects(null, 'options');
    rejects('dir', 'options');
  });

  it('refuses readonly without dir: an in-memory pile can not be read-only', () => {
    const err = rejects({ readonly: true }, 'readonly');
    expect(err.message).to.include('in-memory');
  });

  it('refuses readonly or create: false on a directory that holds no pile', () => {
    rejects({ dir, readonly: true }, 'dir');
    rejects({ dir, create: false }, 'dir');
    expect(fs.readdirSync(dir)).to.deep.equal([]);
  });

  it("refuses a segmentSize that differs from an existing pile's, and adopts the pile's when omitted", () => {
    const p = openPile({ dir, segmentSize: 2 * MiB });
    p.put('x');
    p.close();
    const err = rejects({ dir, segmentSize: MiB }, 'segmentSize');
    expect(err.message)
      .to.include(String(2 * MiB))
      .and.to.include(dir);
    const q = openPile({ dir });
    expect(q.segmentSize).to.equal(2 * MiB);
    q.close();
    // The refused open left the pile intact and unlocked.
    const r = openPile({ dir, segmentSize: 2 * MiB });
    expect([...r.entries()]).to.have.length(1);
    r.close();
  });

  it('refuses a bad preallocate on put, naming it, and writes nothing', () => {
    const p = openPile({ segmentSize: MiB });
    for (const bad of [-1, 1.5, Number.NaN, '10']) {
      const err = expectPileError(() => p.put('x', { preallocate: bad as number }), 'PILE_INVALID_OPTION');
      expect(err.message).to.include('preallocate');
    }
    expect(p.stats.objectCount).to.equal(0);
    p.close();
  });
});
