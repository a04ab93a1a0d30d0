import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { openPile, isPileError, PileError, type Pile, type PilePointer, type PileErrorCode } from '../src';
import {
  SEG,
  buildPile,
  copyDir,
  flipByte,
  markUnclean,
  metaFile,
  prng,
  readU32,
  segFile,
  setMetaField,
  where,
  writeU32,
  type Built,
} from './fixtures/pile-files';
import { FORMAT_VERSION } from '../src/storage/BlockFormat';

function openError(opts: Parameters<typeof openPile>[0]): PileError {
  try {
    openPile(opts).close();
  } catch (err) {
    if (err instanceof PileError) return err;
    throw err;
  }
  throw new Error('open succeeded on a damaged pile');
}

function getCode(pile: Pile, ptr: PilePointer): PileErrorCode | undefined {
  try {
    pile.get(ptr);
    return undefined;
  } catch (err) {
    if (isPileError(err)) return err.code;
    throw err;
  }
}

/** Every record but `except` reads back exactly, with checksums checked. */
function expectOthersIntact(pile: Pile, built: Built, except: PilePointer[]): void {
  for (const [ptr, value] of built.records) {
    if (except.includes(ptr)) continue;
    expect(isDeepStrictEqual(pile.get(ptr), value), `record ${ptr}`).to.equal(true);
  }
}

describe('damaged pile files', () => {
  let tmp: string;
  let pristine: string;
  let built: Built;
  let dir: string;

  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-damage-'));
    pristine = path.join(tmp, 'pristine');
    built = buildPile(pristine);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  let n = 0;
  beforeEach(() => {
    dir = path.join(tmp, `copy-${n++}`);
    copyDir(pristine, dir);
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('the pristine pile verifies clean and two segments are in use', () => {
    const pile = openPile({ dir, verifyOnRead: true });
    try {
      expect(pile.stats.segmentCount).to.be.greaterThan(1);
      expect(pile.verify().ok).to.equal(true);
      expectOthersIntact(pile, built, []);
    } finally {
      pile.close();
    }
  });

  describe('a flipped payload byte', () => {
    const victim = (): PilePointer => built.records[30]![0];
    const damage = (): { segment: number; offset: number } => {
      const w = where(victim());
      flipByte(segFile(dir, w.segment), w.offset + 16 + 3, 0x20);
      return w;
    };

    it('after a clean close: open does not scan; verify() and verifyOnRead report PILE_CORRUPT at its segment and offset', () => {
      const w = damage();
      const pile = openPile({ dir, verifyOnRead: true });
      try {
        expect(pile.lastRecovery.ran).to.equal(false);
        const report = pile.verify();
        expect(report.ok).to.equal(false);
        expect(report.corrupt).to.have.length(1);
        expect(report.corrupt[0]).to.include({
          segment: w.segment,
          offset: w.offset,
          file: segFile(dir, w.segment),
          reason: 'checksum mismatch',
        });
        let err: unknown;
        try {
          pile.get(victim());
        } catch (e) {
          err = e;
        }
        expect(isPileError(err, 'PILE_CORRUPT')).to.equal(true);
        expect((err as Error).message)
          .to.include(segFile(dir, w.segment))
          .and.include(`offset ${w.offset}`);
        expectOthersIntact(pile, built, [victim()]);
        // With verifyOnRead, writes refuse to build on a damaged record too.
        expect(() => pile.set(victim(), 'new'))
          .to.throw(PileError)
          .with.property('code', 'PILE_CORRUPT');
        expect(() => pile.delete(victim()))
          .to.throw(PileError)
          .with.property('code', 'PILE_CORRUPT');
      } finally {
        pile.close();
      }
    });

    it('after an unclean shutdown: recovery drops it as torn, every other record reads and verify is clean', () => {
      damage();
      markUnclean(dir);
      const progress: { phase: string; done: number; total: number }[] = [];
      const pile = openPile({ dir, verifyOnRead: true, onProgress: (p) => progress.push(p) });
      try {
        expect(pile.lastRecovery.ran).to.equal(true);
        expect(pile.lastRecovery.tornRecords).to.equal(1);
        expect(progress.length).to.be.greaterThan(0);
        expect(progress[progress.length - 1]).to.include({ phase: 'recover', done: progress[progress.length - 1]!.total });
        expect(getCode(pile, victim())).to.equal('PILE_STALE_POINTER');
        expectOthersIntact(pile, built, [victim()]);
        expect(pile.verify().ok).to.equal(true);
        expect(pile.getRoot('first')).to.equal(built.roots.first);
      } finally {
        pile.close();
      }
    });
  });

  it('random flips in block headers: verify reports, get never returns a wrong value', () => {
    const r = prng(7);
    for (let trial = 0; trial < 40; trial++) {
      const copy = path.join(tmp, `hdr-${trial}`);
      copyDir(pristine, copy);
      const [ptr] = built.records[Math.floor(r() * built.records.length)]!;
      const w = where(ptr);
      const pos = w.offset + Math.floor(r() * 16);
      flipByte(segFile(copy, w.segment), pos, 1 << Math.floor(r() * 8));
      const pile = openPile({ dir: copy, verifyOnRead: true });
      try {
        const report = pile.verify();
        expect(report.ok, `trial ${trial}: flip at ${pos}`).to.equal(false);
        for (const [p, value] of built.records) {
          let got: unknown;
          try {
            got = pile.get(p);
          } catch (err) {
            expect(isPileError(err), `trial ${trial}: ${String(err)}`).to.equal(true);
            expect(p, `trial ${trial}: only the damaged record fails`).to.equal(ptr);
            continue;
          }
          expect(isDeepStrictEqual(got, value), `trial ${trial}: record ${p} after a flip at ${pos}`).to.equal(true);
        }
      } finally {
        pile.close();
        fs.rmSync(copy, { recursive: true, force: true });
      }
    }
  });

  it('random flips anywhere in segments, clean or unclean: never a crash, never a wrong value', () => {
    const r = prng(11);
    for (let trial = 0; trial < 30; trial++) {
      const copy = path.join(tmp, `any-${trial}`);
      copyDir(pristine, copy);
      const flips: string[] = [];
      for (let k = 0; k < 4; k++) {
        const seg = Math.floor(r() * 2);
        const pos = Math.floor(r() * SEG);
        flipByte(segFile(copy, seg), pos, 1 + Math.floor(r() * 255));
        flips.push(`${seg}:${pos}`);
      }
      const unclean = trial % 2 === 1;
      if (unclean) markUnclean(copy);
      let pile: Pile;
      try {
        pile = openPile({ dir: copy, verifyOnRead: true });
      } catch (err) {
        // Only a damaged segment header may refuse the open.
        expect(isPileError(err), String(err)).to.equal(true);
        expect(
          flips.some((f) => Number(f.split(':')[1]) < 64),
          `trial ${trial}: ${String(err)}`,
        ).to.equal(true);
        fs.rmSync(copy, { recursive: true, force: true });
        continue;
      }
      try {
        const report = pile.verify();
        // Recovery repairs what it can; a block whose size nothing confirms stays, quarantined.
        if (unclean) {
          const clean =
            report.freeListErrors === 0 &&
            report.statsErrors.length === 0 &&
            report.corrupt.every((c) => c.reason.startsWith('a block recovery found damaged'));
          expect(clean, `trial ${trial} ${flips.join(' ')}: ${JSON.stringify(report)}`).to.equal(true);
        }
        for (const [p, value] of built.records) {
          let got: unknown;
          try {
            got = pile.get(p);
          } catch (err) {
            expect(isPileError(err), `trial ${trial}: ${String(err)}`).to.equal(true);
            continue;
          }
          expect(isDeepStrictEqual(got, value), `trial ${trial} ${flips.join(' ')}: record ${p}`).to.equal(true);
        }
        // The pile stays writable and consistent.
        const p = pile.put({ after: trial });
        expect(pile.get(p)).to.deep.equal({ after: trial });
      } finally {
        pile.close();
        fs.rmSync(copy, { recursive: true, force: true });
      }
    }
  });

  describe('meta file', () => {
    it('any flipped header byte: PILE_CORRUPT or PILE_FORMAT_VERSION naming the file', () => {
      for (let pos = 0; pos < 32; pos++) {
        const copy = path.join(tmp, `meta-${pos}`);
        copyDir(pristine, copy);
        flipByte(metaFile(copy), pos, 0x10);
        for (const readonly of [false, true]) {
          const err = openError({ dir: copy, readonly });
          expect(['PILE_CORRUPT', 'PILE_FORMAT_VERSION'], `byte ${pos}`).to.include(err.code);
          expect(err.message).to.include(metaFile(copy));
        }
        fs.rmSync(copy, { recursive: true, force: true });
      }
    });

    it('a zero-length meta file: PILE_CORRUPT naming it', () => {
      fs.truncateSync(metaFile(dir), 0);
      const err = openError({ dir });
      expect(err.code).to.equal('PILE_CORRUPT');
      expect(err.message).to.include(metaFile(dir));
    });

    it('a missing meta file next to segments: PILE_CORRUPT, and no new pile is made over them', () => {
      fs.rmSync(metaFile(dir));
      const err = openError({ dir });
      expect(err.code).to.equal('PILE_CORRUPT');
      expect(err.message).to.include('pile.meta');
      expect(fs.existsSync(metaFile(dir))).to.equal(false);
    });

    it('a newer format version: PILE_FORMAT_VERSION naming the file', () => {
      setMetaField(dir, 4, FORMAT_VERSION + 1);
      const err = openError({ dir });
      expect(err.code).to.equal('PILE_FORMAT_VERSION');
      expect(err.message).to.include(metaFile(dir));
    });

    it('a damaged newest catalog slot: open gives the right roots or PILE_CORRUPT, never older roots', () => {
      for (const slotPos of [64, 96]) {
        for (const byte of [0, 8, 12, 16]) {
          const copy = path.join(tmp, `slot-${slotPos}-${byte}`);
          copyDir(pristine, copy);
          flipByte(metaFile(copy), slotPos + byte, 0x04);
          let pile: Pile | undefined;
          try {
            pile = openPile({ dir: copy });
          } catch (err) {
            expect(isPileError(err, 'PILE_CORRUPT'), String(err)).to.equal(true);
            expect((err as Error).message).to.include(metaFile(copy));
          }
          if (pile !== undefined) {
            try {
              expect(pile.getRoot('first'), `slot ${slotPos} byte ${byte}`).to.equal(built.roots.first);
              expect(pile.getRoot('grown')).to.equal(built.roots.grown);
            } finally {
              pile.close();
            }
          }
          fs.rmSync(copy, { recursive: true, force: true });
        }
      }
    });

    it('both catalog slots damaged: PILE_CORRUPT naming the meta file', () => {
      flipByte(metaFile(dir), 64 + 8, 0x04);
      flipByte(metaFile(dir), 96 + 8, 0x04);
      const err = openError({ dir });
      expect(err.code).to.equal('PILE_CORRUPT');
      expect(err.message).to.include(metaFile(dir));
    });

    it('a damaged checkpoint (the clean state): the open recovers by a scan of every segment instead', () => {
      flipByte(metaFile(dir), 4096 + 16, 0x01);
      const pile = openPile({ dir, verifyOnRead: true });
      try {
        expect(pile.lastRecovery.ran).to.equal(true);
        expect(pile.lastRecovery.full).to.equal(true);
        expectOthersIntact(pile, built, []);
        expect(pile.verify().ok).to.equal(true);
      } finally {
        pile.close();
      }
    });

    it('a damaged segment row of the checkpoint: the open scans that segment alone', () => {
      flipByte(metaFile(dir), 32768 + 16, 0x01);
      const pile = openPile({ dir, verifyOnRead: true });
      try {
        expect(pile.lastRecovery.ran).to.equal(true);
        expect(pile.lastRecovery.full).to.equal(false);
        expect(pile.lastRecovery.regionsScanned).to.equal(1);
        expectOthersIntact(pile, built, []);
        expect(pile.verify().ok).to.equal(true);
      } finally {
        pile.close();
      }
    });
  });

  describe('segment files', () => {
    for (const [name, size] of [
      ['truncated by a page', SEG - 4096],
      ['truncated to zero', 0],
      ['extended', SEG + 8],
    ] as const) {
      it(`${name}: open refuses with PILE_CORRUPT naming it (never SIGBUS)`, () => {
        fs.truncateSync(segFile(dir, 1), size);
        for (const readonly of [false, true]) {
          const err = openError({ dir, readonly });
          expect(err.code).to.equal('PILE_CORRUPT');
          expect(err.message).to.include(segFile(dir, 1));
        }
      });
    }

    it('missing: PILE_CORRUPT naming it', () => {
      fs.rmSync(segFile(dir, 1));
      const err = openError({ dir });
      expect(err.code).to.equal('PILE_CORRUPT');
      expect(err.message).to.include(segFile(dir, 1));
    });

    it('a newer format version in the header: PILE_FORMAT_VERSION naming it', () => {
      writeU32(segFile(dir, 0), 4, readU32(segFile(dir, 0), 4) + 1);
      const err = openError({ dir });
      expect(err.code).to.equal('PILE_FORMAT_VERSION');
      expect(err.message).to.include(segFile(dir, 0));
    });

    for (const [field, pos] of [
      ['magic', 0],
      ['index', 8],
      ['size', 12],
      ['pile id', 16],
    ] as const) {
      it(`a damaged header ${field}: PILE_CORRUPT naming it`, () => {
        flipByte(segFile(dir, 1), pos, 0x01);
        const err = openError({ dir });
        expect(err.code).to.equal('PILE_CORRUPT');
        expect(err.message).to.include(segFile(dir, 1));
      });
    }

    it('a segment of another pile: PILE_CORRUPT', () => {
      const other = path.join(tmp, 'other');
      buildPile(other);
      fs.copyFileSync(segFile(other, 1), segFile(dir, 1));
      fs.rmSync(other, { recursive: true, force: true });
      const err = openError({ dir });
      expect(err.code).to.equal('PILE_CORRUPT');
      expect(err.message).to.include(segFile(dir, 1));
    });
  });
});
