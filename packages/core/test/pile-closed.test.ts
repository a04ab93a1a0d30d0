import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile, type Pile } from '../src/Pile';
import { PileError } from '../src/PileError';
import type { PilePointer } from '../src/records/PilePointer';

function expectClosed(name: string, fn: () => unknown): void {
  try {
    fn();
  } catch (err) {
    expect(err, `${name}: ${String(err)}`).to.be.instanceOf(PileError);
    expect((err as PileError).code, `${name}: ${(err as Error).message}`).to.equal('PILE_CLOSED');
    return;
  }
  throw new Error(`${name} after close() did not throw PILE_CLOSED`);
}

/** Every public operation of a pile, each called as a user would after close(). */
function everyMethod(pile: Pile, ptr: PilePointer, raw: PilePointer): [string, () => unknown][] {
  return [
    ['put', () => pile.put('x')],
    ['put with preallocate', () => pile.put('x', { preallocate: 64 })],
    ['get', () => pile.get(ptr)],
    ['set', () => pile.set(ptr, 'y')],
    ['delete', () => pile.delete(ptr)],
    ['has', () => pile.has(ptr)],
    ['sizeOf', () => pile.sizeOf(ptr)],
    ['schema', () => pile.schema('point', z.object({ x: z.number() }))],
    ['schemas', () => pile.schemas()],
    ['setRoot', () => pile.setRoot('r', ptr)],
    ['setRoot null', () => pile.setRoot('r', null)],
    ['getRoot', () => pile.getRoot('r')],
    ['roots', () => pile.roots()],
    ['entries', () => pile.entries()],
    ['iterator', () => pile[Symbol.iterator]()],
    ['spread', () => [...pile]],
    ['stats', () => pile.stats],
    ['verify', () => pile.verify()],
    ['flush', () => pile.flush()],
    ['compact', () => pile.compact()],
    ['allocRaw', () => pile.allocRaw(16, 1)],
    ['putRaw', () => pile.putRaw(new Uint8Array(4), 1)],
    ['rawBuffer', () => pile.rawBuffer(raw)],
    ['rawTag', () => pile.rawTag(raw)],
  ];
}

describe('pile after close()', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-closed-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const mapped of [false, true]) {
    it(`every method throws PILE_CLOSED (${mapped ? 'mapped' : 'in-memory'})`, () => {
      const pile = openPile(mapped ? { dir, segmentSize: 1 << 20 } : { segmentSize: 1 << 20 });
      const ptr = pile.put({ a: 1 });
      const raw = pile.allocRaw(16, 7);
      pile.setRoot('r', ptr);
      const view = pile.schema('point', z.object({ x: z.number() }));
      const typed = view.put({ x: 1 });
      expect(pile.isClosed).to.equal(false);
      pile.close();
      expect(pile.isClosed).to.equal(true);
      for (const [name, fn] of everyMethod(pile, ptr, raw)) expectClosed(name, fn);
      expectClosed('TypedView.put', () => view.put({ x: 2 }));
      expectClosed('TypedView.get', () => view.get(typed));
      expectClosed('TypedView.field', () => view.field(typed, 'x'));
      expectClosed('TypedView.set', () => view.set(typed, { x: 3 }));
      // close() itself is idempotent: a second close is not an error.
      expect(() => pile.close()).not.to.throw();
    });
  }

  it('an iteration in progress stops with PILE_CLOSED instead of reading unmapped memory', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    for (let i = 0; i < 10; i++) pile.put(`record ${i}`);
    const it = pile.entries();
    expect(it.next().done).to.equal(false);
    pile.close();
    expectClosed('next() after close', () => it.next());
  });

  it('a closed mapped pile released its lock: the directory opens again', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const p = pile.put('kept');
    pile.close();
    const again = openPile({ dir });
    expect(again.get(p)).to.equal('kept');
    again.close();
  });
});
