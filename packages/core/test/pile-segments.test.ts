import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { openPile } from '../src/Pile';
import { PileError } from '../src/PileError';
import { expectPileError } from './fixtures/expect-error';
import { segmentFiles } from '../src/storage/Segment';
import { buildCore } from './fixtures/build-core';

const MiB = 1 << 20;
/** Largest payload one segment holds: the segment minus its 64-byte header and one 16-byte block header. */
const MAX_PAYLOAD = MiB - 64 - 16;

/**
 * The growth of V8's external memory while an in-memory pile of 1 MiB segments takes ten 255 KiB
 * buffers, measured in a fresh process: in this one, earlier tests' buffers may be freed between
 * the two readings and hide the segments.
 */
function externalGrowthOfTenPuts(): number {
  buildCore();
  const script = `
    const { openPile } = require(${JSON.stringify(path.join(__dirname, '..', 'dist', 'index.js'))});
    const pile = openPile({ segmentSize: ${MiB} });
    const chunk = Buffer.alloc(${MiB / 4 - 1024}, 7);
    const before = process.memoryUsage().external;
    for (let i = 0; i < 10; i++) pile.put(chunk);
    process.stdout.write(String(process.memoryUsage().external - before));
    pile.close();`;
  return Number(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
}

describe('segments', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-segments-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  describe('in memory', () => {
    it('keeps records in off-heap memory, segment by segment', () => {
      const pile = openPile({ segmentSize: MiB });
      expect(pile.persistent).to.equal(false);
      expect(pile.stats.segmentCount).to.equal(0);
      // Four of these fit a segment.
      const chunk = Buffer.alloc(MiB / 4 - 1024, 7);
      for (let i = 0; i < 10; i++) pile.put(chunk);
      const st = pile.stats;
      expect(st.segmentCount).to.equal(3);
      expect(st.totalBytes).to.equal(3 * MiB);
      // The three segments are external memory (mapped anonymous pages V8 counts as ArrayBuffer
      // backing stores), not V8 heap objects.
      pile.close();
      expect(externalGrowthOfTenPuts()).to.be.at.least(3 * MiB - MiB / 2);
    });

    /** Runs `fn` and returns the names of the fs calls it made (the core imports node:fs by binding, so patching the module is seen). */
    function fsCalls(fn: () => void): string[] {
      const fsMod = require('node:fs') as Record<string, unknown>;
      const names = [
        'openSync',
        'writeSync',
        'writeFileSync',
        'mkdirSync',
        'renameSync',
        'rmSync',
        'unlinkSync',
        'readSync',
        'existsSync',
        'statSync',
        'fstatSync',
        'fsyncSync',
        'ftruncateSync',
        'closeSync',
        'readdirSync',
      ];
      const calls: string[] = [];
      const originals = names.map((k) => fsMod[k] as (...a: unknown[]) => unknown);
      names.forEach((k, i) => {
        fsMod[k] = (...args: unknown[]) => {
          calls.push(k);
          return originals[i]!(...args);
        };
      });
      try {
        fn();
      } finally {
        names.forEach((k, i) => {
          fsMod[k] = originals[i];
        });
      }
      return calls;
    }

    const workload = (options: { dir?: string }) => () => {
      const pile = openPile({ ...options, segmentSize: MiB });
      const p = pile.put({ a: 1 });
      pile.set(p, { a: 'x'.repeat(5000) });
      for (let i = 0; i < 300; i++) pile.put('y'.repeat(5000));
      pile.setRoot('root', p);
      pile.delete(p);
      pile.verify();
      pile.flush();
      pile.compact();
      pile.close();
    };

    it('never touches the file system', () => {
      // A first run outside the watch: msgpackr, loaded on first use, reads its own files to load.
      workload({})();
      expect(fsCalls(workload({}))).to.deep.equal([]);
      // The same workload on a mapped pile is seen doing file work: the watch is effective.
      expect(fsCalls(workload({ dir }))).to.include.members(['openSync', 'writeSync', 'fsyncSync']);
    });

    it('roots work in memory too (for the life of the pile)', () => {
      const pile = openPile({ segmentSize: MiB });
      const p = pile.put('root value');
      pile.setRoot('main', p);
      expect(pile.getRoot('main')).to.equal(p);
      expect(pile.roots()).to.deep.equal(['main']);
      pile.setRoot('main', null);
      expect(pile.getRoot('main')).to.equal(undefined);
      pile.close();
    });
  });

  describe('mapped', () => {
    it('one preallocated file of segmentSize bytes per segment, plus the meta file', () => {
      const pile = openPile({ dir, segmentSize: MiB });
      expect(pile.persistent).to.equal(true);
      for (let i = 0; i < 10; i++) pile.put(Buffer.alloc(MiB / 4 - 1024, i)); // four to a segment
      const segFiles = fs
        .readdirSync(dir)
        .filter((f) => f.startsWith('seg-'))
        .sort();
      expect(segFiles).to.have.length(pile.stats.segmentCount);
      expect(pile.stats.segmentCount).to.equal(3);
      for (const f of segFiles) expect(fs.statSync(path.join(dir, f)).size).to.equal(MiB);
      expect(fs.readdirSync(dir)).to.include('pile.meta');
      pile.close();
    });

    it('is mapped shared and read-write: a put is in the file at once, before flush or close', () => {
      const pile = openPile({ dir, segmentSize: MiB });
      const marker = `marker-${process.pid}-${Date.now()}`;
      pile.put(marker);
      const file = fs.readdirSync(dir).find((f) => f.startsWith('seg-'))!;
      expect(fs.readFileSync(path.join(dir, file)).includes(Buffer.from(marker))).to.equal(true);
      const p = pile.put('before-set');
      pile.set(p, 'after--set');
      expect(fs.readFileSync(path.join(dir, file)).includes(Buffer.from('after--set'))).to.equal(true);
      pile.close();
    });

    describe('a new segment file has all its disk blocks (no sparse holes to fault on later)', () => {
      const { reserve, zeroFill } = segmentFiles;
      let reserved: number;
      let filled: number;
      beforeEach(() => {
        reserved = filled = 0;
        segmentFiles.reserve = (fd, size) => {
          reserved++;
          return reserve(fd, size);
        };
        segmentFiles.zeroFill = (fd, size) => {
          filled++;
          zeroFill(fd, size);
        };
      });
      afterEach(() => {
        segmentFiles.reserve = reserve;
        segmentFiles.zeroFill = zeroFill;
      });

      function fillThreeSegments(): void {
        const pile = openPile({ dir, segmentSize: MiB });
        const written = Array.from({ length: 10 }, (_, i) => pile.put(Buffer.alloc(MiB / 4 - 1024, i)));
        pile.close();
        for (const f of fs.readdirSync(dir).filter((n) => n.startsWith('seg-'))) {
          const st = fs.statSync(path.join(dir, f));
          expect(st.size, f).to.equal(MiB);
          expect(st.blocks * 512, f).to.be.at.least(MiB);
        }
        const again = openPile({ dir, verifyOnRead: true });
        written.forEach((ptr, i) => expect((again.get(ptr) as Buffer).equals(Buffer.alloc(MiB / 4 - 1024, i))).to.equal(true));
        expect(again.verify().ok).to.equal(true);
        again.close();
      }

      it('reserved with posix_fallocate, not written', () => {
        fillThreeSegments();
        expect(reserved).to.equal(3);
        expect(filled).to.equal(0);
      });

      it('written full of zeros where the file system can not reserve', () => {
        segmentFiles.reserve = () => {
          reserved++;
          return os.constants.errno.EOPNOTSUPP;
        };
        fillThreeSegments();
        expect(reserved).to.equal(3);
        expect(filled).to.equal(3);
      });

      it('a disk that can not hold the file: PILE_OUT_OF_SPACE naming it, no file left, nothing lost', () => {
        const pile = openPile({ dir, segmentSize: MiB });
        const kept = pile.put('kept');
        segmentFiles.reserve = () => os.constants.errno.ENOSPC;
        const err = expectPileError(() => pile.put(Buffer.alloc(MAX_PAYLOAD)), 'PILE_OUT_OF_SPACE');
        expect(err.message).to.contain(path.join(dir, 'seg-000001.pile')).and.contain('ENOSPC');
        expect(fs.existsSync(path.join(dir, 'seg-000001.pile'))).to.equal(false);
        expect(pile.get(kept)).to.equal('kept');
        segmentFiles.reserve = reserve;
        const big = pile.put(Buffer.alloc(MAX_PAYLOAD, 3));
        expect(pile.stats.segmentCount).to.equal(2);
        pile.close();
        const again = openPile({ dir });
        expect(again.get(kept)).to.equal('kept');
        expect((again.get(big) as Buffer).equals(Buffer.alloc(MAX_PAYLOAD, 3))).to.equal(true);
        again.close();
      });
    });
  });

  for (const mapped of [false, true]) {
    const label = mapped ? 'mapped' : 'in memory';
    describe(`limits (${label})`, () => {
      const open = (extra: { maxMemory?: number } = {}) => openPile({ ...(mapped ? { dir } : {}), segmentSize: MiB, ...extra });

      it('a value exactly filling a segment fits; one byte more is PILE_TOO_LARGE', () => {
        const pile = open();
        const full = pile.put(Buffer.alloc(MAX_PAYLOAD, 0xab));
        expect(pile.sizeOf(full)).to.equal(MAX_PAYLOAD);
        expect(pile.get<Buffer>(full).equals(Buffer.alloc(MAX_PAYLOAD, 0xab))).to.equal(true);
        const before = pile.stats;
        const err = expectPileError(() => pile.put(Buffer.alloc(MAX_PAYLOAD + 1)), 'PILE_TOO_LARGE');
        expect(err.message).to.include('segmentSize');
        expectPileError(() => pile.put('s'.repeat(MAX_PAYLOAD + 1)), 'PILE_TOO_LARGE');
        expectPileError(() => pile.put('é'.repeat(MAX_PAYLOAD / 2 + 1)), 'PILE_TOO_LARGE'); // counted in UTF-8 bytes
        expectPileError(() => pile.put({ big: 'x'.repeat(MAX_PAYLOAD) }), 'PILE_TOO_LARGE');
        expectPileError(() => pile.put('x', { preallocate: MAX_PAYLOAD + 1 }), 'PILE_TOO_LARGE');
        const str = pile.put('s'.repeat(MAX_PAYLOAD));
        expect(pile.get<string>(str).length).to.equal(MAX_PAYLOAD);
        // A refused put writes nothing.
        expect(pile.stats.objectCount).to.equal(before.objectCount + 1);
        expectPileError(() => pile.set(str, Buffer.alloc(MAX_PAYLOAD + 1)), 'PILE_TOO_LARGE');
        expect(pile.get<string>(str).length).to.equal(MAX_PAYLOAD);
        expect(pile.verify().ok).to.equal(true);
        pile.close();
      });

      it('maxMemory caps the segments: beyond it PILE_OUT_OF_SPACE, and the pile stays usable', () => {
        const pile = open({ maxMemory: 2 * MiB });
        const chunk = Buffer.alloc(100_000, 1);
        const ptrs = [];
        let err: unknown;
        try {
          for (let i = 0; i < 100; i++) ptrs.push(pile.put(chunk));
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(PileError);
        expect((err as PileError).code).to.equal('PILE_OUT_OF_SPACE');
        expect((err as Error).message).to.include('maxMemory');
        expect(pile.stats.segmentCount).to.equal(2);
        expect(pile.stats.objectCount).to.equal(ptrs.length);
        expect(ptrs.length).to.be.at.least(18);
        // Deleting makes room again, without a new segment.
        pile.delete(ptrs.pop()!);
        pile.delete(ptrs.pop()!);
        ptrs.push(pile.put(chunk));
        expect(pile.stats.segmentCount).to.equal(2);
        for (const p of ptrs) expect(pile.get<Buffer>(p).equals(chunk)).to.equal(true);
        expect(pile.verify().ok).to.equal(true);
        pile.close();
      });
    });
  }
});
