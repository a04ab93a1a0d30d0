import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { openPile, type Pile, type PilePointer, type PileStats } from '../src';
import { faultPoints } from '../src/recovery/FaultPoints';
import { COORD_FILE_NAME } from '../src/concurrency/CoordFile';
import { buildCore } from './fixtures/build-core';
import { buildPile, copyDir, flipByte, metaFile, segFile, where, type Built } from './fixtures/pile-files';

const CRASH_AT = path.join(__dirname, 'fixtures', 'crash-at.js');

/** Runs the fixture until it kills itself at `point`; returns the JSON lines it wrote. */
function crashAt(dir: string, point: string): Record<string, unknown>[] {
  const r = spawnSync(process.execPath, [CRASH_AT], { env: { ...process.env, PILE_DIR: dir, PILE_KILL_AT: point }, encoding: 'utf8' });
  expect(r.signal, `${point}: ${r.stderr}`).to.equal('SIGKILL');
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

function expectIntact(pile: Pile, built: Built, except: PilePointer[] = []): void {
  for (const [ptr, value] of built.records) {
    if (except.includes(ptr)) continue;
    expect(isDeepStrictEqual(pile.get(ptr), value), `record ${ptr}`).to.equal(true);
  }
}

describe('crash at each point of the write path', function () {
  this.timeout(60_000);
  let tmp: string;
  let pristine: string;
  let built: Built;
  let dir: string;
  let n = 0;

  before(() => {
    buildCore();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-points-'));
    pristine = path.join(tmp, 'pristine');
    built = buildPile(pristine);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  beforeEach(() => {
    dir = path.join(tmp, `copy-${n++}`);
    copyDir(pristine, dir);
  });

  const first = (): PilePointer => built.roots.first!;
  const firstValue = (): unknown => built.records[0]![1];

  /** Opens after the crash: recovery ran, nothing damaged, the pile verifies and takes new writes. */
  /**
   * Opens the pile as the kill left it (it recovers from pile.coord: the kill was on this boot), or
   * with `fromMeta` without pile.coord, as after a machine crash: then the recovery is pile.meta's,
   * from its checkpoint and dirty marks, which the tests of the marks check.
   */
  function reopen(check: (pile: Pile) => void, fromMeta = false): Pile['lastRecovery'] {
    if (fromMeta) fs.rmSync(path.join(dir, COORD_FILE_NAME));
    const progress: { done: number; total: number }[] = [];
    const pile = openPile({ dir, verifyOnRead: true, onProgress: (p) => progress.push(p) });
    try {
      expect(pile.lastRecovery.ran).to.equal(true);
      expect(pile.lastRecovery.corrupt).to.deep.equal([]);
      expect(progress.at(-1)!.done).to.equal(progress.at(-1)!.total);
      check(pile);
      expect(pile.verify().ok, JSON.stringify(pile.verify())).to.equal(true);
      const p = pile.put(Buffer.alloc(900_000, 9));
      expect((pile.get(p) as Buffer).equals(Buffer.alloc(900_000, 9))).to.equal(true);
      expect(pile.verify().ok).to.equal(true);
      return pile.lastRecovery;
    } finally {
      pile.close();
    }
  }

  it('after the meta file counts a new segment, before the allocator writes to it', () => {
    const before = fs.readdirSync(pristine).filter((f) => f.startsWith('seg-')).length;
    const acked = crashAt(dir, 'segment-counted').filter((m) => m.ptr !== undefined);
    expect(fs.existsSync(segFile(dir, before))).to.equal(true);
    reopen((pile) => {
      expect(pile.stats.segmentCount).to.equal(before + 1);
      expectIntact(pile, built);
      for (const m of acked)
        expect((pile.get(m.ptr as PilePointer) as Buffer).equals(Buffer.alloc(200_000, m.fill as number))).to.equal(true);
    });
  });

  it('after a new segment file got its disk blocks, before its header is written', () => {
    const before = fs.readdirSync(pristine).filter((f) => f.startsWith('seg-')).length;
    const acked = crashAt(dir, 'segment-reserved').filter((m) => m.ptr !== undefined);
    expect(fs.statSync(segFile(dir, before)).size).to.equal(1 << 20);
    reopen((pile) => {
      expect(pile.stats.segmentCount).to.equal(before);
      expectIntact(pile, built);
      for (const m of acked)
        expect((pile.get(m.ptr as PilePointer) as Buffer).equals(Buffer.alloc(200_000, m.fill as number))).to.equal(true);
    });
  });

  it('while a new segment file is being written full (a file system that can not reserve space)', () => {
    const before = fs.readdirSync(pristine).filter((f) => f.startsWith('seg-')).length;
    const acked = crashAt(dir, 'segment-half-written').filter((m) => m.ptr !== undefined);
    expect(fs.statSync(segFile(dir, before)).size).to.be.lessThan(1 << 20);
    reopen((pile) => {
      expect(pile.stats.segmentCount).to.equal(before);
      expectIntact(pile, built);
      for (const m of acked)
        expect((pile.get(m.ptr as PilePointer) as Buffer).equals(Buffer.alloc(200_000, m.fill as number))).to.equal(true);
    });
  });

  // A set killed after its journal was committed: the recovery of pile.meta (a machine crash, no
  // pile.coord) replays the journal; the one from pile.coord (this boot) puts the set's stores back
  // from the undo log (UndoLog.ts), the old value whole. Either is allowed: the set did not return.
  for (const [point, what] of [
    ['journal-half-copied', 'in the middle of the in-place copy of a set'],
    ['journal-committed', 'after a set committed its journal, before applying it'],
  ] as const) {
    it(`${what}: without pile.coord the journal completes it`, () => {
      crashAt(dir, point);
      const r = reopen((pile) => {
        expect(pile.get(first())).to.equal('new value!');
        expectIntact(pile, built, [first()]);
      }, true);
      expect(r.journalsReplayed).to.equal(1);
    });

    it(`${what}: from pile.coord its stores are put back, the old value whole`, () => {
      crashAt(dir, point);
      const r = reopen((pile) => {
        expect(pile.get(first())).to.equal(firstValue());
        expectIntact(pile, built);
      });
      expect(r.source).to.equal('coord');
      expect(r.storesUndone).to.be.greaterThan(0);
      expect(r.journalsReplayed).to.equal(0);
    });
  }

  it('after a growing set wrote its new body, before the journal: the old value stays, the body is freed', () => {
    crashAt(dir, 'body-before-journal');
    const r = reopen((pile) => {
      expect(pile.get(first())).to.equal(firstValue());
      expectIntact(pile, built);
      expect(pile.stats.objectCount).to.equal(built.records.length);
    });
    expect(r.orphansFreed).to.be.greaterThan(0);
  });

  it('a put killed before its commit leaves no record', () => {
    crashAt(dir, 'put-before-used');
    reopen((pile) => {
      expect(pile.stats.objectCount).to.equal(built.records.length);
      expect([...pile.entries()].every((e) => e.size !== 12345)).to.equal(true);
    });
  });

  // Killed inside the commit after the checksum replaced the generation check in word 3 (and after
  // the length replaced the size check in word 2), the state still RESERVED: recovery frees the block
  // at the generation it was cut with, so the next record cut there gets exactly one more. From
  // pile.coord the cut from the free block is put back (UndoLog.ts): the block is free at the
  // generation it had before, and the next record cut there gets the one the killed put had (its
  // pointer was never returned). Without pile.coord (as after a machine crash), recovery frees it.
  for (const point of ['put-checksum-stored', 'put-length-stored']) {
    it(`a put killed in its commit (${point}) leaves its block free at its own generation`, () => {
      const torn = crashAt(dir, point).find((m) => m.torn !== undefined)!.torn as { segment: number; offset: number; gen: number };
      const coordCopy = `${dir}-coord`;
      copyDir(dir, coordCopy);
      reopen((pile) => {
        expect(pile.stats.objectCount).to.equal(built.records.length);
        expectIntact(pile, built);
        const again = pile.put('q'.repeat(12345));
        expect(where(again)).to.deep.equal({ segment: torn.segment, offset: torn.offset });
        // 1 MiB segments: the pointer carries the whole generation.
        expect(Math.floor(again / 2 ** 31)).to.equal(torn.gen + 1);
        pile.delete(again);
      }, true);
      dir = coordCopy;
      const r = reopen((pile) => {
        expect(pile.stats.objectCount).to.equal(built.records.length);
        expectIntact(pile, built);
        const again = pile.put('q'.repeat(12345));
        expect(where(again)).to.deep.equal({ segment: torn.segment, offset: torn.offset });
        expect(Math.floor(again / 2 ** 31)).to.equal(torn.gen);
        pile.delete(again);
      });
      expect(r.storesUndone).to.be.greaterThan(0);
    });
  }

  // A typed put is encoded for a bound of its length: in a block from a free list, whose rest goes
  // back after encoding, or at the start of the tail, which is cut to the exact size after.
  const typedPoints: [string, string][] = [
    ['typed-before-trim', 'before its block is trimmed'],
    ['typed-trim-before-free', 'while its block is trimmed, before the rest is freed'],
    ['typed-after-trim', 'after its block was trimmed, in its commit before the checksum'],
    ['typed-tail-encoded', 'after encoding into the tail, before its block is cut'],
    ['typed-tail-claimed', 'after its block was cut from the tail, in its commit before the checksum'],
  ];
  for (const [point, when] of typedPoints) {
    it(`a typed put killed ${when} leaves no record`, () => {
      crashAt(dir, point);
      reopen((pile) => {
        expectIntact(pile, built);
        // The free-list cases first put a record that keeps the freed block from the tail.
        expect(pile.stats.objectCount).to.equal(built.records.length + (point.startsWith('typed-tail-') ? 0 : 1));
        expect([...pile.entries()].filter((e) => e.kind === 'typed')).to.deep.equal([]);
      });
    });
  }

  it('a setRoot killed before the catalog slot is written keeps the old root', () => {
    crashAt(dir, 'catalog-before-slot');
    const r = reopen((pile) => expect(pile.getRoot('first')).to.equal(first()));
    expect(r.orphansFreed).to.be.greaterThan(0);
  });

  /** Appended records the child acknowledged before it died; each must read back. */
  const expectAppended = (pile: Pile, lines: Record<string, unknown>[]): number => {
    const acked = lines.filter((m) => m.ptr !== undefined);
    for (const m of acked) expect(pile.get(m.ptr as PilePointer)).to.equal(`${'r'.repeat(600)}${m.i as number}`);
    return acked.length;
  };

  it('a writer killed inside the dirty mark of its first write, before the write, loses nothing', () => {
    const lines = crashAt(dir, 'mark-before-write');
    const r = reopen((pile) => {
      expect(expectAppended(pile, lines)).to.equal(0);
      expectIntact(pile, built);
    }, true);
    expect(r.full).to.equal(false);
    expect(r.regionsScanned).to.equal(0);
  });

  it('a writer killed after its dirty mark, before the write it announces, loses nothing', () => {
    const lines = crashAt(dir, 'mark-written');
    const r = reopen((pile) => {
      expect(expectAppended(pile, lines)).to.equal(0);
      expectIntact(pile, built);
    }, true);
    // The first put takes a free block of the built pile (a whole segment marked) or cuts the tail.
    expect(r.full || r.regionsScanned === 1).to.equal(true);
  });

  it('a writer killed between saving a checkpoint and clearing the marks keeps every acknowledged put', () => {
    const lines = crashAt(dir, 'checkpoint-saved');
    reopen((pile) => {
      expect(expectAppended(pile, lines)).to.be.greaterThan(100);
      expectIntact(pile, built);
    });
  });

  it('a writer killed right after a checkpoint scans only what followed it, and keeps every acknowledged put', () => {
    const lines = crashAt(dir, 'checkpoint-cleared');
    const r = reopen((pile) => {
      expect(expectAppended(pile, lines)).to.be.greaterThan(100);
      expectIntact(pile, built);
    });
    expect(r.full).to.equal(false);
    expect(r.bytesScanned).to.be.lessThan(2 << 20);
  });

  it('a set of a record written after the checkpoint, killed after its journal, is replayed by a recovery from the checkpoint', () => {
    // A new pile: no free list to take the record or its journal from, so both are cut from the tail.
    dir = path.join(tmp, `fresh-${n++}`);
    const m = crashAt(dir, 'tail-journal-committed').find((x) => x.ptr !== undefined);
    // Without pile.coord: from pile.coord the set's stores would be put back (UndoLog.ts), not replayed.
    const r = reopen((pile) => {
      expect(pile.get(m!.ptr as PilePointer)).to.equal('its new value, longer than the old one');
    }, true);
    expect(r.full).to.equal(false);
    expect(r.journalsReplayed).to.equal(1);
  });

  /** Runs `fn`, counting the walks of recovery: its start, then each general pass (the 'recovery-walk' fault point). */
  const countingWalks = (fn: () => void): number => {
    let walks = 0;
    faultPoints.hit = (point) => {
      if (point === 'recovery-walk') walks++;
    };
    try {
      fn();
    } finally {
      faultPoints.hit = undefined;
    }
    return walks;
  };

  it('a writer killed while appending past a checkpoint is recovered by one walk, to the counters a full recovery finds', () => {
    const lines = crashAt(dir, 'appended');
    // The same files without a checkpoint (its CRC zeroed): recovered by a scan of every segment.
    const full = path.join(tmp, `full-${n++}`);
    copyDir(dir, full);
    let fd = fs.openSync(metaFile(full), 'r+');
    fs.writeSync(fd, Buffer.alloc(4), 0, 4, 4096);
    fs.closeSync(fd);
    // And with every segment marked written anywhere: each is scanned whole, from the checkpoint.
    const marked = path.join(tmp, `marked-${n++}`);
    copyDir(dir, marked);
    const segments = fs.readdirSync(marked).filter((f) => f.startsWith('seg-')).length;
    fd = fs.openSync(metaFile(marked), 'r+');
    fs.writeSync(fd, Buffer.alloc(segments, 2), 0, segments, 8192);
    fs.closeSync(fd);
    let oneWalk: PileStats | undefined;
    let r: Pile['lastRecovery'] | undefined;
    const walks = countingWalks(() => {
      r = reopen((pile) => {
        expect(expectAppended(pile, lines)).to.equal(3000);
        expectIntact(pile, built);
        oneWalk = pile.stats;
      });
    });
    expect(r!.full).to.equal(false);
    expect(r!.blocksScanned).to.be.greaterThan(100);
    expect(walks, 'recovery walks').to.equal(1);
    dir = full;
    let scanned: PileStats | undefined;
    const rf = reopen((pile) => {
      expect(expectAppended(pile, lines)).to.equal(3000);
      scanned = pile.stats;
    });
    expect(rf.full).to.equal(true);
    expect(oneWalk).to.deep.equal(scanned);
    dir = marked;
    let whole: PileStats | undefined;
    const rm = reopen((pile) => {
      expect(expectAppended(pile, lines)).to.equal(3000);
      whole = pile.stats;
    }, true);
    expect(rm.full).to.equal(false);
    expect(rm.regionsScanned).to.equal(segments);
    expect(whole).to.deep.equal(scanned);
  });

  it('a writer killed after saving the rows of a checkpoint, before the checkpoint, recovers from the one before', () => {
    const lines = crashAt(dir, 'checkpoint-rows');
    const r = reopen((pile) => {
      expect(expectAppended(pile, lines)).to.be.greaterThan(100);
      expectIntact(pile, built);
    });
    // The rows saved ahead of it carry a later checkpoint's number, and their segments are marked.
    expect(r.full).to.equal(false);
  });

  it('a record torn in a region written since the checkpoint is dropped by the general passes', () => {
    const lines = crashAt(dir, 'appended');
    // A payload byte of the last acknowledged record: its checksum fails, so the one walk hands over.
    const last = lines.filter((m) => m.ptr !== undefined).at(-1)!;
    const { segment, offset } = where(last.ptr as PilePointer);
    flipByte(segFile(dir, segment), offset + 16 + 5);
    let r: Pile['lastRecovery'] | undefined;
    const walks = countingWalks(() => {
      r = reopen((pile) => {
        expect(expectAppended(pile, lines.slice(0, lines.indexOf(last)))).to.equal(2999);
        expect(() => pile.get(last.ptr as PilePointer)).to.throw(/PILE_STALE_POINTER|names no live record/);
        expectIntact(pile, built);
      });
    });
    expect(r!.full).to.equal(false);
    expect(r!.tornRecords).to.equal(1);
    expect(walks, 'recovery walks').to.equal(3);
  });

  it('a recovery from a checkpoint killed while rebuilding is itself recovered', () => {
    const lines = crashAt(dir, 'appended');
    crashAt(dir, 'recovery-regions');
    const r = reopen((pile) => {
      expect(expectAppended(pile, lines)).to.equal(3000);
      expectIntact(pile, built);
    });
    expect(r.full).to.equal(false);
  });

  it('a recovery killed while replaying, then while rebuilding, is itself recovered', () => {
    crashAt(dir, 'journal-committed');
    // Without pile.coord, so that the recovery replays the journal (from pile.coord the set is put back: UndoLog.ts).
    fs.rmSync(path.join(dir, COORD_FILE_NAME));
    crashAt(dir, 'recovery-replay');
    crashAt(dir, 'recovery-rebuild');
    reopen((pile) => {
      expect(pile.get(first())).to.equal('new value!');
      expectIntact(pile, built, [first()]);
    });
  });
});
