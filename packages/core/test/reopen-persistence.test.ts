import { expect } from 'chai';
import { z } from 'zod';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FORMAT_VERSION } from '../src/storage/BlockFormat';
import { faultPoints } from '../src/recovery/FaultPoints';
import { Pile, openPile } from '../src/Pile';
import { PileError } from '../src/PileError';
import type { PilePointer } from '../src/records/PilePointer';
import { finalValue, grownValue, isGrown, reopenValue } from './fixtures/reopen-values';

const MiB = 1 << 20;
const ROOT = path.resolve(__dirname, '../../..');
const CHILD = path.join(__dirname, 'fixtures', 'reopen-child.ts');

function runChild(args: string[]): unknown {
  const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', CHILD, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.status !== 0) throw new Error(`child ${args[0]} exited ${String(r.status)}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

function putRange(pile: Pile, from: number, to: number): Record<number, PilePointer> {
  const out: Record<number, PilePointer> = {};
  for (let i = from; i < to; i++) {
    const p = pile.put(reopenValue(i));
    if (isGrown(i)) pile.set(p, grownValue(i));
    out[i] = p;
  }
  return out;
}

function expectRecords(pile: Pile, pointers: Record<number, number>): void {
  for (const [i, p] of Object.entries(pointers)) {
    const got = pile.get(p as PilePointer);
    const want = finalValue(Number(i));
    expect(got, `record ${i}`).to.deep.equal(want);
    // deep.equal does not tell a Buffer from a Uint8Array: the kind must survive too.
    if (want instanceof Uint8Array) expect(Buffer.isBuffer(got), `record ${i} is a Buffer`).to.equal(Buffer.isBuffer(want));
  }
}

/**
 * Counts the walks over segments that an open may do: the allocator's free-list rebuilds and
 * read-only count, and recovery and each of its walks (named fault points).
 */
function countWalks(fn: () => void): number {
  let walks = 0;
  faultPoints.hit = (point) => {
    if (point === 'recovery-walk' || point === 'allocator-walk') walks++;
  };
  try {
    fn();
  } finally {
    faultPoints.hit = undefined;
  }
  return walks;
}

describe('persistence and reopen', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-reopen-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('records of every kind, links and roots survive close and reopen', () => {
    let pile = openPile({ dir, segmentSize: MiB });
    const pointers = putRange(pile, 0, 300);
    pile.setRoot('first', pointers[0]!);
    pile.setRoot('grown', pointers[9]!);
    pile.setRoot('temp', pointers[1]!);
    pile.setRoot('temp', null);
    const before = pile.stats;
    expect(before.linkCount).to.equal(30);
    pile.close();

    pile = openPile({ dir });
    expect(pile.lastRecovery.ran).to.equal(false);
    expectRecords(pile, pointers);
    expect(pile.roots().sort()).to.deep.equal(['first', 'grown']);
    expect(pile.getRoot('first')).to.equal(pointers[0]);
    expect(pile.get(pile.getRoot('grown')!)).to.deep.equal(grownValue(9));
    expect(pile.getRoot('temp')).to.equal(undefined);
    expect(pile.stats).to.deep.equal(before);
    const entries = [...pile.entries()];
    expect(entries.length).to.equal(300);
    expect(new Set(entries.map((e) => e.pointer))).to.deep.equal(new Set(Object.values(pointers)));
    expect(pile.verify().ok).to.equal(true);
    pile.close();
  });

  it('a reopened pile extends the stored record structures (new shapes before any read, >64 shapes)', () => {
    let pile = openPile({ dir, segmentSize: MiB });
    const a = pile.put({ x: 1, y: 2 });
    const first = putRange(pile, 0, 200);
    pile.close();
    pile = openPile({ dir });
    // A new shape put before anything is read: it must not take the id of a stored shape.
    const b = pile.put({ q: 'hello', r: [1] });
    const second = putRange(pile, 200, 400);
    expect(pile.get(a)).to.deep.equal({ x: 1, y: 2 });
    expect(pile.get(b)).to.deep.equal({ q: 'hello', r: [1] });
    expectRecords(pile, first);
    expectRecords(pile, second);
    pile.close();
    pile = openPile({ dir });
    expect(pile.get(a)).to.deep.equal({ x: 1, y: 2 });
    expect(pile.get(b)).to.deep.equal({ q: 'hello', r: [1] });
    expectRecords(pile, first);
    expectRecords(pile, second);
    pile.close();
    // And a read-only open decodes them all too.
    const ro = openPile({ dir, readonly: true });
    expectRecords(ro, first);
    expectRecords(ro, second);
    expect(() => ro.put('x'))
      .to.throw(PileError)
      .with.property('code', 'PILE_READONLY');
    ro.close();
  });

  it('a new shape whose structures could not be saved (pile full) is not used by later records', () => {
    let pile = openPile({ dir, segmentSize: MiB, maxMemory: MiB });
    const old = pile.put({ old: 1 });
    const filler: PilePointer[] = [];
    for (const size of [1000, 0]) {
      try {
        for (;;) filler.push(pile.put(Buffer.alloc(size)));
      } catch (err) {
        expect((err as PileError).code).to.equal('PILE_OUT_OF_SPACE');
      }
    }
    // Saving the new shape needs a new catalog block: no room.
    expect(() => pile.put({ brandNew: 1, shape: 2 }))
      .to.throw(PileError)
      .with.property('code', 'PILE_OUT_OF_SPACE');
    for (const p of filler.slice(0, 3)) pile.delete(p);
    const fresh = pile.put({ brandNew: 3, shape: 4 });
    const again = pile.put({ old: 5 });
    pile.close();
    pile = openPile({ dir });
    expect(pile.get(old)).to.deep.equal({ old: 1 });
    expect(pile.get(fresh)).to.deep.equal({ brandNew: 3, shape: 4 });
    expect(pile.get(again)).to.deep.equal({ old: 5 });
    expect(pile.verify().ok).to.equal(true);
    pile.close();
  });

  it('a separate process reopens the pile, reads every record, adds new shapes; this process reads them back', function () {
    this.timeout(60_000);
    let pile = openPile({ dir, segmentSize: MiB });
    const mine = putRange(pile, 0, 200);
    pile.setRoot('parent', mine[0]!);
    pile.close();
    const listFile = path.join(dir, '..', `${path.basename(dir)}-pointers.json`);
    fs.writeFileSync(listFile, JSON.stringify(mine));
    try {
      const child = runChild(['extend', dir, '200', '400', listFile]) as {
        pointers: Record<number, number>;
        mismatches: string[];
        ranRecovery: boolean;
        objectCount: number;
      };
      expect(child.mismatches).to.deep.equal([]);
      expect(child.ranRecovery).to.equal(false);
      expect(child.objectCount).to.equal(400);
      pile = openPile({ dir });
      expect(pile.lastRecovery.ran).to.equal(false);
      expectRecords(pile, mine);
      expectRecords(pile, child.pointers);
      expect(pile.roots().sort()).to.deep.equal(['child-200', 'parent']);
      expect(pile.getRoot('child-200')).to.equal(child.pointers[200]);
      expect(pile.stats.objectCount).to.equal(400);
      expect(pile.verify().ok).to.equal(true);
      pile.close();
    } finally {
      fs.rmSync(listFile, { force: true });
    }
  });

  it('open after a clean close does not walk the records, whatever their number', () => {
    for (const count of [10, 20_000]) {
      const d = path.join(dir, `n${count}`);
      let pile = openPile({ dir: d, segmentSize: MiB });
      for (let i = 0; i < count; i++) pile.put(i % 2 === 0 ? `r${i}` : { i });
      const stats = pile.stats;
      pile.close();
      const phases: string[] = [];
      const walks = countWalks(() => {
        pile = openPile({ dir: d, onProgress: (p) => phases.push(p.phase) });
      });
      expect(walks, `segment walks on open of ${count} records`).to.equal(0);
      expect(phases).not.to.include('recover');
      expect(pile.lastRecovery.ran).to.equal(false);
      expect(pile.stats).to.deep.equal(stats);
      pile.close();
    }
  });

  it('open after an unclean shutdown does walk (the check above can see walks)', () => {
    const pile = openPile({ dir: path.join(dir, 'live'), segmentSize: MiB });
    for (let i = 0; i < 100; i++) pile.put(`r${i}`);
    pile.flush();
    // A copy of a pile that is still open: its meta file says "not closed cleanly".
    const copy = path.join(dir, 'copy');
    fs.mkdirSync(copy);
    for (const f of fs.readdirSync(path.join(dir, 'live')))
      if (f !== 'pile.lock') fs.copyFileSync(path.join(dir, 'live', f), path.join(copy, f));
    pile.close();
    const phases: string[] = [];
    let reopened: Pile | undefined;
    const walks = countWalks(() => {
      reopened = openPile({ dir: copy, onProgress: (p) => phases.push(p.phase) });
    });
    expect(walks).to.be.greaterThan(0);
    expect(phases).to.include('recover');
    expect(reopened!.lastRecovery.ran).to.equal(true);
    expect(reopened!.stats.objectCount).to.equal(100);
    reopened!.close();
  });

  describe('format version', () => {
    function patchU32(file: string, offset: number, value: number): number {
      const fd = fs.openSync(file, 'r+');
      try {
        const b = Buffer.alloc(4);
        fs.readSync(fd, b, 0, 4, offset);
        const old = b.readUInt32LE(0);
        b.writeUInt32LE(value, 0);
        fs.writeSync(fd, b, 0, 4, offset);
        return old;
      } finally {
        fs.closeSync(fd);
      }
    }

    for (const [label, file] of [
      ['meta file', 'pile.meta'],
      ['segment file', 'seg-000000.pile'],
    ] as const) {
      it(`a ${label} of a newer format version is refused with PILE_FORMAT_VERSION, naming the file; the pile is left intact`, () => {
        let pile = openPile({ dir, segmentSize: MiB });
        const p = pile.put('survives');
        pile.close();
        const target = path.join(dir, file);
        const old = patchU32(target, 4, FORMAT_VERSION + 1);
        expect(old).to.equal(FORMAT_VERSION);
        for (const readonly of [false, true]) {
          try {
            openPile({ dir, readonly });
            expect.fail('opened a pile of a newer format');
          } catch (err) {
            expect(err).to.be.instanceOf(PileError);
            expect((err as PileError).code).to.equal('PILE_FORMAT_VERSION');
            expect((err as Error).message).to.include(target);
          }
        }
        patchU32(target, 4, old);
        pile = openPile({ dir });
        expect(pile.get(p)).to.equal('survives');
        pile.close();
      });
    }
  });
});

describe('root and schema names that are also Object.prototype keys', () => {
  it('constructor, __proto__ and toString are ordinary names, before and after reopen', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-root-names-'));
    try {
      let pile = openPile({ dir, segmentSize: 1 << 20 });
      expect(pile.getRoot('constructor')).to.equal(undefined);
      expect(pile.getRoot('toString')).to.equal(undefined);
      const a = pile.put('a');
      const b = pile.put('b');
      pile.setRoot('__proto__', a);
      pile.setRoot('constructor', b);
      const v = pile.schema('hasOwnProperty', z.object({ x: z.number() }));
      const t = v.put({ x: 1 });
      expect(pile.getRoot('__proto__')).to.equal(a);
      pile.close();
      pile = openPile({ dir });
      expect(pile.roots().sort()).to.deep.equal(['__proto__', 'constructor']);
      expect(pile.get(pile.getRoot('__proto__')!)).to.equal('a');
      expect(pile.get(pile.getRoot('constructor')!)).to.equal('b');
      expect(pile.getRoot('toString')).to.equal(undefined);
      expect(pile.schemas().map((s) => s.name)).to.deep.equal(['hasOwnProperty']);
      expect(pile.schema('hasOwnProperty', z.object({ x: z.number() })).get(t)).to.deep.equal({ x: 1 });
      pile.setRoot('__proto__', null);
      expect(pile.getRoot('__proto__')).to.equal(undefined);
      pile.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
