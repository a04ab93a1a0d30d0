import { expect } from 'chai';
import fc from 'fast-check';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile } from '../src/Pile';
import { PileError, type PileErrorCode } from '../src/PileError';
import { NULL_POINTER, isPilePointer, type PilePointer } from '../src/records/PilePointer';

const MiB = 1 << 20;

function codeOf(fn: () => unknown): PileErrorCode | 'none' {
  try {
    fn();
  } catch (err) {
    if (err instanceof PileError) return err.code;
    throw err;
  }
  return 'none';
}

function expectCode(fn: () => unknown, code: PileErrorCode, label = ''): void {
  expect(codeOf(fn), label).to.equal(code);
}

/** Every read and write that takes a pointer must refuse `ptr` with `code`. */
function expectRefused(pile: Pile, ptr: number, code: PileErrorCode): void {
  const p = ptr as PilePointer;
  const label = `pointer ${String(ptr)}`;
  expectCode(() => pile.get(p), code, `get ${label}`);
  expectCode(() => pile.sizeOf(p), code, `sizeOf ${label}`);
  expectCode(() => pile.set(p, 'x'), code, `set ${label}`);
  // setRoot(name, NULL_POINTER) removes the name, by contract.
  if (ptr !== NULL_POINTER) expectCode(() => pile.setRoot('r', p), code, `setRoot ${label}`);
  expect(pile.has(p), `has ${label}`).to.equal(false);
  if (code === 'PILE_STALE_POINTER') expect(pile.delete(p), `delete ${label}`).to.equal(false);
  else expectCode(() => pile.delete(p), code, `delete ${label}`);
}

describe('pointers', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-pointer-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('are positive safe integers, distinct per record, and isPilePointer accepts them', () => {
    const pile = openPile({ segmentSize: MiB });
    const ptrs = Array.from({ length: 200 }, (_, i) => pile.put(`v${i}`));
    for (const p of ptrs) {
      expect(Number.isSafeInteger(p)).to.equal(true);
      expect(p).to.be.greaterThan(0);
      expect(isPilePointer(p)).to.equal(true);
    }
    expect(new Set(ptrs).size).to.equal(ptrs.length);
    expect(isPilePointer(-1)).to.equal(false);
    expect(isPilePointer(1.5)).to.equal(false);
    expect(isPilePointer('1')).to.equal(false);
    expect(isPilePointer(2 ** 53)).to.equal(false);
    pile.close();
  });

  it('PILE_INVALID_POINTER for 0, -1, 1.5, NaN, Infinity, huge numbers and non-numbers', () => {
    const pile = openPile({ segmentSize: MiB });
    pile.put('something');
    for (const bad of [NULL_POINTER, 0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, Number.MAX_SAFE_INTEGER, 1e300]) {
      expectRefused(pile, bad, 'PILE_INVALID_POINTER');
    }
    for (const bad of ['1', null, undefined, {}, 10n])
      expectCode(() => pile.get(bad as unknown as PilePointer), 'PILE_INVALID_POINTER', String(bad));
    pile.close();
  });

  it('PILE_INVALID_POINTER for a pointer into a segment the pile does not have', () => {
    const big = openPile({ segmentSize: MiB });
    let far = big.put('x'.repeat(1000));
    while (big.stats.segmentCount < 3) far = big.put('x'.repeat(1000));
    big.close();
    // `far` names segment 2; these piles have fewer segments.
    const empty = openPile({ segmentSize: MiB });
    expectRefused(empty, far, 'PILE_INVALID_POINTER');
    empty.put('one');
    expectRefused(empty, far, 'PILE_INVALID_POINTER');
    empty.close();
    const mapped = openPile({ dir, segmentSize: MiB });
    mapped.put('one');
    expectRefused(mapped, far, 'PILE_INVALID_POINTER');
    mapped.close();
  });

  it('PILE_STALE_POINTER after delete, on every operation', () => {
    const pile = openPile({ segmentSize: MiB });
    const a = pile.put({ name: 'a' });
    const b = pile.put({ name: 'b' });
    expect(pile.delete(a)).to.equal(true);
    expectRefused(pile, a, 'PILE_STALE_POINTER');
    expect(pile.get(b)).to.deep.equal({ name: 'b' });
    pile.close();
  });

  it('a reused block: the old pointer is STALE, the new one reads the new record', () => {
    const pile = openPile({ segmentSize: MiB });
    const keep = [pile.put('before'), pile.put('y'.repeat(40)), pile.put('after')];
    const victim = keep[1]!;
    const before = pile.stats;
    pile.delete(victim);
    const reused = pile.put('z'.repeat(40)); // same block size: cut from the freed block
    expect(pile.stats.allocatedBytes).to.equal(before.allocatedBytes);
    expect(pile.stats.freeBytes).to.equal(before.freeBytes);
    expect(reused).not.to.equal(victim);
    expectRefused(pile, victim, 'PILE_STALE_POINTER');
    expect(pile.get(reused)).to.equal('z'.repeat(40));
    expect(pile.get(keep[0]!)).to.equal('before');
    expect(pile.get(keep[2]!)).to.equal('after');
    pile.close();
  });

  it('a block reused many times: every earlier pointer stays STALE', () => {
    const pile = openPile({ segmentSize: MiB });
    pile.put('neighbour');
    const dead: PilePointer[] = [];
    let live = pile.put('gen 0');
    pile.put('fence'); // keeps the slot from merging into the free tail
    for (let i = 1; i <= 300; i++) {
      pile.delete(live);
      dead.push(live);
      live = pile.put(`gen ${i}`.padEnd(5));
    }
    expect(pile.stats.segmentCount).to.equal(1);
    expect(new Set(dead).size).to.equal(dead.length);
    for (const d of dead) expectCode(() => pile.get(d), 'PILE_STALE_POINTER');
    expect(pile.get(live)).to.equal('gen 300');
    pile.close();
  });

  it('the freed tail reused: a pointer to the last record is STALE after delete and re-put', () => {
    const pile = openPile({ segmentSize: MiB });
    const first = pile.put('first');
    const last = pile.put('last!');
    pile.delete(last);
    const again = pile.put('again');
    expectCode(() => pile.get(last), 'PILE_STALE_POINTER');
    expect(pile.get(again)).to.equal('again');
    expect(pile.get(first)).to.equal('first');
    pile.close();
  });

  it('deleting a linked record makes its pointer STALE and does not leave the body reachable', () => {
    const pile = openPile({ segmentSize: MiB });
    const p = pile.put('small');
    pile.set(p, 'large'.repeat(100));
    expect(pile.stats.linkCount).to.equal(1);
    expect(pile.delete(p)).to.equal(true);
    expectRefused(pile, p, 'PILE_STALE_POINTER');
    expect([...pile.entries()]).to.deep.equal([]);
    pile.close();
  });

  it('pointers survive reopen; stale ones stay stale, also after the block is reused by a new session', () => {
    let pile = openPile({ dir, segmentSize: MiB });
    const kept = pile.put('kept');
    const gone = pile.put('gone');
    pile.put('fence');
    pile.delete(gone);
    pile.close();
    pile = openPile({ dir });
    expect(pile.get(kept)).to.equal('kept');
    expectRefused(pile, gone, 'PILE_STALE_POINTER');
    const reuse = pile.put('new!');
    expectCode(() => pile.get(gone), 'PILE_STALE_POINTER');
    pile.close();
    pile = openPile({ dir });
    expectCode(() => pile.get(gone), 'PILE_STALE_POINTER');
    expect(pile.get(reuse)).to.equal('new!');
    pile.close();
  });

  it('never a wrong record: an arbitrary number either throws or is the pointer of that very record', () => {
    const pile = openPile({ segmentSize: MiB });
    const live = new Map<number, string>();
    for (let i = 0; i < 400; i++) {
      const v = `record-${i}-`.repeat(1 + (i % 7));
      live.set(pile.put(v), v);
    }
    for (const p of [...live.keys()].filter((_, i) => i % 3 === 0)) {
      pile.delete(p as PilePointer);
      live.delete(p);
    }
    const ptrs = [...live.keys()];
    const check = (n: number): void => {
      let value: unknown;
      try {
        value = pile.get(n as PilePointer);
      } catch (err) {
        expect(err).to.be.instanceOf(PileError);
        expect(['PILE_INVALID_POINTER', 'PILE_STALE_POINTER']).to.include((err as PileError).code);
        expect(live.has(n), `live pointer ${n} refused`).to.equal(false);
        return;
      }
      expect(live.has(n), `pointer ${n} read a record that was never given out`).to.equal(true);
      expect(value).to.equal(live.get(n));
    };
    fc.assert(
      fc.property(
        fc.oneof(
          fc.maxSafeNat(),
          fc.integer({ min: 1, max: 2 ** 40 }),
          // Near a live pointer: other offsets and tags around real blocks.
          fc.tuple(fc.constantFrom(...ptrs), fc.integer({ min: -4096, max: 4096 })).map(([p, d]) => p + d),
        ),
        (n) => check(n),
      ),
      { numRuns: 3000 },
    );
    pile.close();
  });

  it('a made-up number in range (12345) is PILE_STALE_POINTER, as docs/errors.md says, with a message that does not claim a deletion', () => {
    const pile = openPile({ segmentSize: MiB });
    pile.put('x'.repeat(200_000));
    const docs = fs.readFileSync(path.join(__dirname, '../../../docs/errors.md'), 'utf8');
    expect(docs).to.match(/PILE_STALE_POINTER[^\n]*never a pointer \(`12345`\)/);
    expectRefused(pile, 12345, 'PILE_STALE_POINTER');
    expect(() => pile.get(12345 as PilePointer)).to.throw(/names no live record: the block at segment 0, offset 98760 .*never a pointer/);
    expectRefused(pile, 2 ** 40, 'PILE_INVALID_POINTER');
    pile.close();
  });
});
