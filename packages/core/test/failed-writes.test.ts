import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile, type Pile } from '../src/Pile';
import type { PilePointer } from '../src/records/PilePointer';
import { expectPileError } from './fixtures/expect-error';

const MiB = 1 << 20;

/** A persistent pile of one 1 MiB segment, filled until a put of `chunk` bytes no longer fits. */
function fullPile(dir: string, chunk = 64 * 1024): { pile: Pile; filler: PilePointer[] } {
  const pile = openPile({ dir, segmentSize: MiB, maxMemory: MiB });
  const filler: PilePointer[] = [];
  for (;;) {
    try {
      filler.push(pile.put(Buffer.alloc(chunk, 1)));
    } catch {
      break;
    }
  }
  // Then small ones, so that no catalog record fits either.
  for (;;) {
    try {
      filler.push(pile.put(Buffer.alloc(200, 2)));
    } catch {
      break;
    }
  }
  return { pile, filler };
}

const User = z.object({ name: z.string(), admin: z.boolean() });
const Order = z.object({ item: z.string(), paid: z.boolean(), total: z.number() });

describe('failed writes leave nothing behind', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-failed-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a schema() that could not be persisted is not registered, and a retry fails too', () => {
    const { pile, filler } = fullPile(dir);
    expectPileError(() => pile.schema('user', User), 'PILE_OUT_OF_SPACE');
    expectPileError(() => pile.schema('user', User), 'PILE_OUT_OF_SPACE');
    expect(pile.schemas().map((s) => s.name)).to.deep.equal([]);
    for (const p of filler.slice(0, 4)) pile.delete(p);
    const orders = pile.schema('order', Order);
    const o = orders.put({ item: 'book', paid: true, total: 12.5 });
    pile.close();
    const again = openPile({ dir });
    again.schema('user', User);
    expect(again.schema('order', Order).get(o)).to.deep.equal({ item: 'book', paid: true, total: 12.5 });
    expect(again.get(o)).to.deep.equal({ item: 'book', paid: true, total: 12.5 });
    again.close();
  });

  it('a setRoot() that could not be persisted does not show in roots() or getRoot()', () => {
    const { pile, filler } = fullPile(dir);
    expectPileError(() => pile.setRoot('r', filler[0]!), 'PILE_OUT_OF_SPACE');
    expect(pile.roots()).to.deep.equal([]);
    expect(pile.getRoot('r')).to.equal(undefined);
    pile.close();
  });

  it('a catalog change too large for a segment is undone, so later catalog changes still work', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    const p = pile.put('x');
    pile.setRoot('kept', p);
    expectPileError(() => pile.setRoot('n'.repeat(2 * MiB), p), 'PILE_TOO_LARGE');
    expect(pile.roots()).to.deep.equal(['kept']);
    pile.setRoot('later', p);
    pile.schema('user', User).put({ name: 'a', admin: false });
    pile.put({ a: 'new shape', b: 1 });
    expect(pile.roots()).to.deep.equal(['kept', 'later']);
    pile.close();
    const again = openPile({ dir });
    expect(again.roots()).to.deep.equal(['kept', 'later']);
    again.close();
  });

  /** The msgpack record structures a pile holds in memory (what its catalog lists). */
  function structuresOf(pile: Pile): unknown[] {
    return (pile as unknown as { catalog: { structures: unknown[] } }).catalog.structures;
  }

  it('a generic put that adds a record shape and then is too large leaves the shape nowhere', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put({ kept: 1 });
    const before = pile.stats;
    expectPileError(() => pile.put({ huge: Buffer.alloc(2 * MiB) }), 'PILE_TOO_LARGE');
    expect(structuresOf(pile)).to.deep.equal([['kept']]);
    expect(pile.stats).to.deep.equal(before);
    // The next new shape takes the id the failed one had, and reads back after a reopen.
    const p = pile.put({ other: 'x' });
    expect(structuresOf(pile)).to.deep.equal([['kept'], ['other']]);
    pile.close();
    const again = openPile({ dir });
    expect(structuresOf(again)).to.deep.equal([['kept'], ['other']]);
    expect(again.get(p)).to.deep.equal({ other: 'x' });
    expect(again.verify().ok).to.equal(true);
    again.close();
  });

  it('the first generic put of a pile that fails leaves a catalog without its shape', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    expectPileError(() => pile.put({ huge: Buffer.alloc(2 * MiB) }), 'PILE_TOO_LARGE');
    expect(structuresOf(pile)).to.deep.equal([]);
    pile.close();
    const again = openPile({ dir });
    expect(structuresOf(again)).to.deep.equal([]);
    expect(again.get(again.put({ huge: 1 }))).to.deep.equal({ huge: 1 });
    again.close();
  });

  it('a generic put whose shape was saved but whose record finds no room (PILE_OUT_OF_SPACE) leaves the shape nowhere', () => {
    const { pile, filler } = fullPile(dir);
    // Room for two small catalog records, none for the value.
    for (let k = 0; k < 3; k++) pile.delete(filler.pop()!);
    pile.setRoot('r', filler[0]!);
    const before = pile.stats;
    expectPileError(() => pile.put({ big: Buffer.alloc(64 * 1024) }), 'PILE_OUT_OF_SPACE');
    expect(structuresOf(pile)).to.deep.equal([]);
    expect(pile.stats).to.deep.equal(before);
    expect(pile.verify().ok).to.equal(true);
    pile.close();
    const again = openPile({ dir, segmentSize: MiB, maxMemory: MiB });
    expect(structuresOf(again)).to.deep.equal([]);
    expect(again.verify().ok).to.equal(true);
    again.close();
  });

  it('a generic set to a stale pointer that adds a shape leaves the shape nowhere', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    pile.setRoot('r', pile.put('x'));
    const gone = pile.put({ a: 1 });
    pile.delete(gone);
    const before = pile.stats;
    expectPileError(() => pile.set(gone, { fresh: 1 }), 'PILE_STALE_POINTER');
    expect(structuresOf(pile)).to.deep.equal([['a']]);
    expect(pile.stats).to.deep.equal(before);
    pile.close();
    const again = openPile({ dir });
    expect(structuresOf(again)).to.deep.equal([['a']]);
    expect(again.roots()).to.deep.equal(['r']);
    again.close();
  });

  it('a pack that fails after minting a shape does not leave that shape for the next put to use unsaved', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put({ kept: 1 });
    // msgpackr mints the record shape {k, f} before it reaches the function value.
    expectPileError(() => pile.put({ k: 1, f: [() => 1] }), 'PILE_INVALID_VALUE', 'function');
    const p = pile.put({ k: 2, f: [3] });
    pile.close();
    const again = openPile({ dir });
    expect(again.get(p)).to.deep.equal({ k: 2, f: [3] });
    again.close();
  });

  it('a catalog that outgrows one segment is PILE_TOO_LARGE naming the limit; everything else goes on', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    const p = pile.put({ shape: 1 });
    const view = pile.schema('user', User);
    const u = view.put({ name: 'a', admin: true });
    let i = 0;
    let err: unknown;
    for (;;) {
      try {
        pile.setRoot(`root-${i}-${'n'.repeat(4000)}`, p);
        i++;
      } catch (e) {
        err = e;
        break;
      }
    }
    expect(i).to.be.greaterThan(100);
    expectPileError(
      () => {
        throw err;
      },
      'PILE_TOO_LARGE',
      'Catalog size limit',
    );
    // Fill what is left below the limit with short names.
    for (let k = 0; ; k++) {
      try {
        pile.setRoot(`s${k}`, p);
      } catch {
        break;
      }
    }
    const brandNew = { [`brandNew${'k'.repeat(64)}`]: 1 };
    expectPileError(() => pile.put(brandNew), 'PILE_TOO_LARGE', 'the catalog');
    expectPileError(() => pile.schema('order', Order), 'PILE_TOO_LARGE', 'the catalog');
    const rootCount = pile.roots().length;
    // What needs no new catalog entry still works: known shapes, strings, typed puts, reads,
    // deletes, a root set again to the pointer it has, and removing a root (the catalog shrinks).
    const q = pile.put({ shape: 2 });
    expect(pile.get(q)).to.deep.equal({ shape: 2 });
    expect(view.get(view.put({ name: 'b', admin: false }))).to.deep.equal({ name: 'b', admin: false });
    expect(pile.get(pile.put('plain'))).to.equal('plain');
    expect(pile.delete(q)).to.equal(true);
    pile.setRoot(`root-0-${'n'.repeat(4000)}`, p);
    pile.setRoot(`root-0-${'n'.repeat(4000)}`, null);
    pile.put(brandNew);
    pile.close();
    const again = openPile({ dir });
    expect(again.roots().length).to.equal(rootCount - 1);
    expect(again.schema('user', User).get(u)).to.deep.equal({ name: 'a', admin: true });
    expect(again.verify().ok).to.equal(true);
    again.close();
  });

  it('put of a Buffer of 2 GiB or more is PILE_TOO_LARGE and leaks no block', function () {
    this.timeout(20_000);
    const pile = openPile({ segmentSize: MiB });
    pile.put('before');
    const before = pile.stats;
    const huge = Buffer.allocUnsafeSlow(2 ** 31);
    expectPileError(() => pile.put(huge), 'PILE_TOO_LARGE');
    expectPileError(() => pile.put('small', { preallocate: 2 ** 31 }), 'PILE_TOO_LARGE');
    expectPileError(() => pile.put('small', { preallocate: 2 ** 32 + 8 }), 'PILE_TOO_LARGE');
    expect(pile.stats).to.deep.equal(before);
    expect(pile.verify().ok).to.equal(true);
    pile.close();
  });

  it('an allocRaw or putRaw of 2 GiB or more is PILE_TOO_LARGE', () => {
    const pile = openPile({ segmentSize: MiB });
    expectPileError(() => pile.allocRaw(2 ** 31, 1), 'PILE_TOO_LARGE');
    pile.close();
  });
});

describe('values that change while they are stored', () => {
  let pile: Pile;
  beforeEach(() => {
    pile = openPile({ segmentSize: MiB });
  });
  afterEach(() => pile.close());

  /** A record whose name getter gives a short string first, then a long one. */
  function growing(long: number): { name: string; admin: boolean } {
    let reads = 0;
    return {
      get name() {
        return reads++ === 0 ? 'a' : 'x'.repeat(long);
      },
      admin: true,
    };
  }

  function neighbours(view: ReturnType<Pile['schema']>, n: number): PilePointer[] {
    const out: PilePointer[] = [];
    for (let i = 0; i < n; i++) out.push(view.put({ name: `user ${i}`, admin: i % 2 === 0 }));
    return out;
  }

  function expectNeighbours(view: ReturnType<Pile['schema']>, ptrs: PilePointer[]): void {
    ptrs.forEach((p, i) => expect(view.get(p)).to.deep.equal({ name: `user ${i}`, admin: i % 2 === 0 }));
    const report = pile.verify();
    expect(report.ok, JSON.stringify(report)).to.equal(true);
  }

  it('a typed put whose getter grows between measure and encode is refused; no neighbour is touched', () => {
    const view = pile.schema('user', User);
    const ptrs = neighbours(view, 60);
    const count = pile.stats.objectCount;
    // In the tail, and in a freed block between live ones.
    expectPileError(() => view.put(growing(5000) as never), 'PILE_INVALID_VALUE', 'changed while it was being stored');
    for (let i = 10; i < 50; i += 2) pile.delete(ptrs[i]!);
    const kept = ptrs.filter((_, i) => i < 10 || i >= 50 || i % 2 === 1);
    for (let i = 0; i < 20; i++) expectPileError(() => view.put(growing(300) as never), 'PILE_INVALID_VALUE');
    expect(pile.stats.objectCount).to.equal(count - 20);
    for (const p of kept) expect(view.get(p)).to.have.property('name');
    expect(pile.verify().ok).to.equal(true);
    const rest = neighbours(view, 5);
    expectNeighbours(view, rest);
  });

  it('a typed set whose getter grows is refused and leaves the record and its neighbours as they were', () => {
    const view = pile.schema('user', User);
    const ptrs = neighbours(view, 40);
    expectPileError(() => view.set(ptrs[20]!, growing(4000) as never), 'PILE_INVALID_VALUE');
    expectNeighbours(view, ptrs);
  });

  it('a typed put whose getter changes type between reads is refused', () => {
    const view = pile.schema('user', User);
    let reads = 0;
    const v = {
      get name(): unknown {
        return reads++ === 0 ? 'a' : 42;
      },
      admin: true,
    };
    expectPileError(() => view.put(v as never), 'PILE_SCHEMA_VIOLATION', 'name: expected string, got number');
    expect(pile.stats.objectCount).to.equal(0);
  });

  it('set() writes the record it was given when the value reads another record', () => {
    const a = pile.put({ v: 'a' });
    const b = pile.put({ v: 'b' });
    pile.set(a, {
      get v() {
        return `${(pile.get(b) as { v: string }).v}!`;
      },
    });
    expect(pile.get(a)).to.deep.equal({ v: 'b!' });
    expect(pile.get(b)).to.deep.equal({ v: 'b' });
    const view = pile.schema('user', User);
    const u = view.put({ name: 'u', admin: false });
    const w = view.put({ name: 'w', admin: false });
    view.set(u, {
      get name() {
        return view.get(w).name + '2';
      },
      admin: true,
    } as never);
    expect(view.get(u)).to.deep.equal({ name: 'w2', admin: true });
    expect(view.get(w)).to.deep.equal({ name: 'w', admin: false });
    expect(pile.verify().ok).to.equal(true);
  });

  it('a write from inside a value being stored is refused with PILE_REENTRANT; nothing is left behind', () => {
    const view = pile.schema('user', User);
    const other = pile.put('other');
    const count = pile.stats.objectCount;
    const writes: (() => unknown)[] = [
      () => pile.put({ inner: 'x'.repeat(100) }),
      () => pile.put('s'),
      () => view.put({ name: 'inner', admin: false }),
      () => pile.delete(other),
      () => pile.setRoot('r', other),
    ];
    for (const write of writes) {
      expectPileError(
        () =>
          pile.put({
            a: 1,
            get b() {
              write();
              return 2;
            },
          }),
        'PILE_REENTRANT',
      );
      expectPileError(
        () =>
          view.put({
            get name() {
              write();
              return 'n';
            },
            admin: true,
          } as never),
        'PILE_REENTRANT',
      );
      expectPileError(
        () =>
          pile.set(other, {
            get b() {
              write();
              return 2;
            },
          }),
        'PILE_REENTRANT',
      );
    }
    expect(pile.stats.objectCount).to.equal(count);
    expect(pile.get(other)).to.equal('other');
    expect(pile.roots()).to.deep.equal([]);
    expect(pile.verify().ok).to.equal(true);
    // Reads are allowed, and the pile takes writes again afterwards.
    const p = pile.put({
      a: 1,
      get b() {
        return pile.get(other);
      },
    });
    expect(pile.get(p)).to.deep.equal({ a: 1, b: 'other' });
  });
});
