import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile, type PilePointer } from '../src';
import { KIND_CATALOG, SEGMENT_HEADER_SIZE, STATE_USED, kindOf, stateOf } from '../src/storage/BlockFormat';
import { MetaFile } from '../src/storage/MetaFile';
import { segmentFileName } from '../src/storage/Segment';
import { buildCore } from './fixtures/build-core';
import { killedChild, repairedByPut } from './fixtures/holder-kills';
import { dropCoord, where } from './fixtures/pile-files';

// The repair after a holder of the writer turn died (docs/concurrency.md, "A holder's death"): it
// rescans only the segments the dead holder touched since its last complete write, whatever was
// marked since the checkpoint, and leaves the dirty marks for an unclean open. The holders are
// child processes killed at the core's fault points; the test process, which keeps the pile open
// (so that pile.coord lives on), repairs at its next write.

const VICTIM = path.join(__dirname, 'fixtures', 'holder-victim.js');
/** Segments of the pile each test starts from; all are marked since its checkpoint. */
const SEGS = 10;
const PAD = 'r'.repeat(2000);
/**
 * The root the set-root victim sets: a name so long that the new catalog record fits none of the
 * holes the deletes left, and goes to the tail's segment, not the old record's (segment 0).
 */
const ROOT = `victim-root-${'n'.repeat(3000)}`;

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Runs the victim until it is killed; returns its lines. */
const victim = (dir: string, env: Record<string, string>): Record<string, unknown>[] => killedChild(VICTIM, dir, env);

/** The dirty marks pile.meta holds for segments 0..count-1. */
function marks(dir: string, count: number): number[] {
  const meta = MetaFile.open(dir, true)!;
  try {
    return [...meta.readMarks(count)];
  } finally {
    meta.close();
  }
}

/** Addresses of the catalog records (used blocks of the catalog kind) in the segment files of `dir`, read from the files. */
function catalogRecords(dir: string): number[] {
  const found: number[] = [];
  for (let i = 0; fs.existsSync(path.join(dir, segmentFileName(i))); i++) {
    const b = fs.readFileSync(path.join(dir, segmentFileName(i)));
    const u32 = new Uint32Array(b.buffer, b.byteOffset, b.length >>> 2);
    for (let off = SEGMENT_HEADER_SIZE; off < b.length;) {
      const size = u32[off >>> 2]!;
      const w = u32[(off >>> 2) + 1]!;
      if (stateOf(w) === STATE_USED && kindOf(w) === KIND_CATALOG) found.push(i * b.length + off);
      expect(size, `block size at ${off} of segment ${i}`).to.be.greaterThan(0);
      off += size;
    }
  }
  return found;
}

describe('repair after a holder of the writer turn died', function () {
  this.timeout(300_000);
  let tmp: string;
  let dir: string;
  let pile: Pile;
  /** Live records: pointer -> value. */
  let model: Map<PilePointer, unknown>;

  before(() => buildCore());
  beforeEach(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-holder-'));
    dir = path.join(tmp, 'pile');
    model = new Map();
    const first = openPile({ dir, segmentSize: 1 << 20 });
    const ptrs: PilePointer[] = [];
    for (let i = 0; first.stats.segmentCount <= SEGS; i++) {
      const value = { i, pad: PAD };
      const p = first.put(value);
      model.set(p, value);
      ptrs.push(p);
    }
    first.close(); // the checkpoint
    pile = openPile({ dir, checkpointInterval: 0, checkpointBytes: 1 << 30 });
    // One record deleted in every segment: each is marked since the checkpoint.
    const perSeg = Math.floor(ptrs.length / SEGS);
    for (let s = 0; s < SEGS; s++) {
      const p = ptrs[s * perSeg + 1]!;
      expect(pile.delete(p)).to.equal(true);
      model.delete(p);
    }
    expect(marks(dir, SEGS).filter((m) => m !== 0).length, 'every segment marked since the checkpoint').to.equal(SEGS);
    await tick(); // the turn is let go
  });
  afterEach(() => {
    pile.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** The test process's next write repairs; then every live record is there and verify holds. */
  function repairAndCheck(): Pile['lastRecovery'] {
    const { after, report } = repairedByPut(pile);
    expect(pile.get(after)).to.equal('after');
    for (const [p, v] of model) expect(pile.get(p), `record ${p}`).to.deep.equal(v);
    expect(pile.stats.objectCount).to.equal(model.size + 1);
    const v = pile.verify();
    expect(v.ok, JSON.stringify(v).slice(0, 2000)).to.equal(true);
    return report;
  }

  const target = (): PilePointer => [...model.keys()][Math.floor(model.size / 3)]!;

  it('a growing set killed before its journal: its body is freed, and only the segments it touched are rescanned', () => {
    const p = target();
    victim(dir, { PILE_OP: 'grow-set', PILE_PTR: String(p), PILE_KILL_AT: 'journal-written' });
    const r = repairAndCheck();
    // The value's new msgpack record shape made a new catalog, the old one kept until the value is
    // written: the repair frees both the body and that old catalog record.
    expect(r.orphansFreed, 'the body no journal links, and the catalog record before the new shape').to.equal(2);
    expect(catalogRecords(dir)).to.have.length(1);
    expect(r.journalsReplayed).to.equal(0);
    // The record's segment, the body's, the journal's and a free list's: not the SEGS marked since the checkpoint.
    expect(r.regionsScanned).to.be.within(1, 5);
    expect(marks(dir, SEGS).filter((m) => m !== 0).length, 'the marks stay').to.equal(SEGS);
  });

  it('a growing set killed after its journal is committed: the repair replays it, rescanning only what the set touched', () => {
    const p = target();
    victim(dir, { PILE_OP: 'grow-set', PILE_PTR: String(p), PILE_KILL_AT: 'journal-committed' });
    model.set(p, { grown: 'g'.repeat(5000) });
    const r = repairAndCheck();
    expect(r.journalsReplayed).to.equal(1);
    expect(r.orphansFreed, "the catalog record before the value's new record shape").to.equal(1);
    expect(catalogRecords(dir)).to.have.length(1);
    expect(r.regionsScanned).to.be.within(1, 5);
  });

  it('a setRoot killed after the slot names its new catalog record: the repair frees the old record', () => {
    const p = target();
    const [old] = catalogRecords(dir);
    expect(catalogRecords(dir)).to.deep.equal([old]);
    victim(dir, { PILE_OP: 'set-root', PILE_ROOT: ROOT, PILE_PTR: String(p), PILE_KILL_AT: 'catalog-named' });
    const both = catalogRecords(dir);
    expect(both, 'the old record and the new one').to.have.length(2);
    expect(
      both.map((a) => Math.floor(a / (1 << 20))),
      'the new record lies in another segment than the old one',
    ).to.deep.equal([0, pile.stats.segmentCount - 1]);
    const r = repairAndCheck();
    expect(pile.getRoot(ROOT), 'the slot names the new catalog').to.equal(p);
    expect(r.orphansFreed, 'the old catalog record').to.equal(1);
    const now = catalogRecords(dir);
    expect(now).to.have.length(1);
    expect(now[0]).to.not.equal(old);
    pile.close();
    pile = openPile({ dir });
    expect(pile.lastRecovery.ran).to.equal(false);
    expect(pile.getRoot(ROOT)).to.equal(p);
    expect(pile.stats.objectCount).to.equal(model.size + 1);
    expect(pile.verify().unreachable).to.deep.equal([]);
    expect(catalogRecords(dir)).to.have.length(1);
  });

  it('a setRoot killed before the slot names its new catalog record: the repair frees the new record', () => {
    const p = target();
    const [old] = catalogRecords(dir);
    victim(dir, { PILE_OP: 'set-root', PILE_ROOT: ROOT, PILE_PTR: String(p), PILE_KILL_AT: 'catalog-written' });
    expect(catalogRecords(dir)).to.have.length(2);
    const r = repairAndCheck();
    expect(pile.getRoot(ROOT)).to.equal(undefined);
    expect(r.orphansFreed, 'the new catalog record').to.equal(1);
    expect(catalogRecords(dir)).to.deep.equal([old]);
  });

  it('a setRoot killed after the slot names its new catalog record, with no process left: the recovery of the next open frees the old record', () => {
    const p = target();
    pile.close(); // a checkpoint: the old record's segment is not marked since
    victim(dir, { PILE_OP: 'set-root', PILE_ROOT: ROOT, PILE_PTR: String(p), PILE_KILL_AT: 'catalog-named' });
    expect(catalogRecords(dir)).to.have.length(2);
    pile = openPile({ dir });
    expect(pile.lastRecovery.ran).to.equal(true);
    expect(pile.lastRecovery.full).to.equal(false);
    expect(pile.lastRecovery.orphansFreed, 'the old catalog record').to.equal(1);
    expect(pile.getRoot(ROOT)).to.equal(p);
    expect(catalogRecords(dir)).to.have.length(1);
    expect(pile.stats.objectCount).to.equal(model.size);
    const v = pile.verify();
    expect(v.ok, JSON.stringify(v).slice(0, 2000)).to.equal(true);
  });

  it('verify() reports a catalog record the catalog slots do not name', () => {
    const store = pile as unknown as { storeCatalog(bytes: Uint8Array): number };
    const leaked = pile.batch(() => store.storeCatalog(Buffer.from('{"roots":{}}')));
    const v = pile.verify();
    expect(v.ok).to.equal(false);
    expect(v.corrupt).to.deep.equal([]);
    expect(v.unreachable.map((u) => ({ segment: u.segment, offset: u.offset }))).to.deep.equal([where(leaked as PilePointer)]);
  });

  it('a holder killed between complete writes of a batch: nothing is rescanned but the segments it added and the tail segment', () => {
    const before = pile.stats.segmentCount;
    const lines = victim(dir, { PILE_OP: 'puts', PILE_KILL_AT: 'holding' });
    for (const l of lines) if (l.p !== undefined) model.set(l.p as PilePointer, { victim: l.i, pad: 'v'.repeat(2000) });
    expect(lines.filter((l) => l.p !== undefined).length).to.equal(100);
    const r = repairAndCheck();
    // Added by the dead turn, not published, and the tail's (whose row lacks what appends added
    // until a release): rescanned whole. Every other segment is taken as it is.
    expect(r.regionsScanned).to.be.within(1, pile.stats.segmentCount - before + 1);
  });

  it('a put killed after the meta file counted its new segment: the repair rescans the new segment', () => {
    const before = pile.stats.segmentCount;
    const lines = victim(dir, { PILE_OP: 'puts', PILE_KILL_AT: 'segment-counted' });
    for (const l of lines) if (l.p !== undefined) model.set(l.p as PilePointer, { victim: l.i, pad: 'v'.repeat(2000) });
    const r = repairAndCheck();
    expect(pile.stats.segmentCount).to.be.greaterThan(before);
    expect(r.regionsScanned).to.be.within(1, pile.stats.segmentCount - before + 1);
  });

  for (const point of ['recovery-replay', 'region-walked'] as const) {
    it(`a repairer killed in its repair (${point}): the next repair rescans what both dead turns touched`, () => {
      const p = target();
      victim(dir, { PILE_OP: 'grow-set', PILE_PTR: String(p), PILE_KILL_AT: 'journal-committed' });
      // This one repairs as it opens, and dies there.
      victim(dir, { PILE_OP: 'none', PILE_KILL_AT: point });
      model.set(p, { grown: 'g'.repeat(5000) });
      const r = repairAndCheck();
      expect(r.regionsScanned).to.be.within(1, 5);
    });
  }

  it('after a repair, an unclean open of the same boot recovers from pile.coord; without it, it scans every segment marked since the checkpoint, and of another boot every segment', () => {
    const p = target();
    victim(dir, { PILE_OP: 'grow-set', PILE_PTR: String(p), PILE_KILL_AT: 'journal-written' });
    expect(repairAndCheck().regionsScanned).to.be.at.most(5);
    // What a kill of every process (same boot) or a crash of the machine (another boot) leaves: the
    // files as they are now, the pile open (not marked clean). The same boot keeps pile.coord's rows;
    // without them (removed: as a machine crash leaves them, not of this boot) pile.meta's marks serve.
    const n = pile.stats.segmentCount;
    const sameBoot = path.join(tmp, 'same-boot');
    const noCoord = path.join(tmp, 'no-coord');
    const otherBoot = path.join(tmp, 'other-boot');
    for (const copy of [sameBoot, noCoord, otherBoot]) fs.cpSync(dir, copy, { recursive: true });
    dropCoord(noCoord);
    dropCoord(otherBoot);
    const meta = MetaFile.open(otherBoot, false)!;
    let since: number;
    try {
      const ck = meta.readCheckpoint()!;
      since = n - ck.segmentCount;
      meta.writeCheckpoint({ ...ck, bootId: 'another-boot' });
    } finally {
      meta.close();
    }
    // Segments added since the checkpoint are scanned unmarked.
    const marked = marks(noCoord, n - since).filter((m) => m !== 0).length;
    expect(marked).to.be.at.least(SEGS);
    for (const [copy, source] of [
      [sameBoot, 'coord'],
      [noCoord, 'checkpoint'],
      [otherBoot, 'scan'],
    ] as const) {
      const other = openPile({ dir: copy });
      try {
        const r = other.lastRecovery;
        expect(r.ran, copy).to.equal(true);
        expect(r.source, copy).to.equal(source);
        expect(r.full, copy).to.equal(source === 'scan');
        if (source === 'coord') {
          // The rows as this process left them after its last write: the tail's segment from the last fold alone.
          expect(r.regionsScanned, copy).to.equal(1);
          expect(r.bytesScanned, copy).to.be.below((1 << 20) - SEGMENT_HEADER_SIZE);
        } else expect(r.regionsScanned, copy).to.equal(source === 'scan' ? n : marked + since);
        for (const [q, v] of model) expect(other.get(q), `record ${q}`).to.deep.equal(v);
        expect(other.stats.objectCount, "the model and repairAndCheck's record").to.equal(model.size + 1);
        expect(other.verify().ok).to.equal(true);
      } finally {
        other.close();
      }
    }
  });
});
