import { expect } from 'chai';
import fc from 'fast-check';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile, PileError, type Pile, type PilePointer } from '../src';
import { expectPileError } from './fixtures/expect-error';

// view.field() runs code compiled per pile, schema and field (PointerCheck.ts); these tests hold
// it to the same answers and errors as the general path.

const SEG = 1 << 20;
const OFFSET_DIV = SEG / 8;

const Item = z.object({
  id: z.number().int(),
  name: z.string(),
  price: z.number(),
  tags: z.array(z.string()),
  active: z.boolean(),
  note: z.string().nullable(),
});
type Item = z.infer<typeof Item>;
const KEYS = ['id', 'name', 'price', 'tags', 'active', 'note'] as const;

function item(i: number, grow = 0): Item {
  return {
    id: i,
    name: `item ${i}${'x'.repeat(grow)}`,
    price: i / 7,
    tags: i % 2 === 0 ? [] : ['a', `t${i}`],
    active: i % 3 === 0,
    note: i % 5 === 0 ? null : `n${i}`,
  };
}

/** The byte offset of the block `ptr` names, in its segment file. */
function fileOffset(dir: string, ptr: PilePointer): { file: string; offset: number } {
  const seg = Math.floor(ptr / OFFSET_DIV) % 2 ** 14;
  return { file: path.join(dir, `seg-${String(seg).padStart(6, '0')}.pile`), offset: (ptr % OFFSET_DIV) * 8 };
}

function patchFile(file: string, offset: number, edit: (b: Buffer) => void, length = 4): void {
  const fd = fs.openSync(file, 'r+');
  const b = Buffer.alloc(length);
  fs.readSync(fd, b, 0, length, offset);
  edit(b);
  fs.writeSync(fd, b, 0, length, offset);
  fs.closeSync(fd);
}

/** The code of the PileError `fn` throws; fails the test when it returns. */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(PileError);
    return (err as PileError).code;
  }
  throw new Error('expected a refusal, got a value');
}

describe('typed field access: view.field() compiled per pile', () => {
  let dir: string;
  const piles: Pile[] = [];
  const open = (sub: string, verifyOnRead = false): Pile => {
    const p = openPile({ dir: path.join(dir, sub), segmentSize: SEG, verifyOnRead });
    piles.push(p);
    return p;
  };
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-field-'));
  });
  afterEach(() => {
    for (const p of piles.splice(0)) if (!p.isClosed) p.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads every field as get() does, in memory and mapped, over several segments', () => {
    for (const pile of [openPile({ segmentSize: SEG }), open('a')]) {
      piles.push(pile);
      const view = pile.schema('item', Item);
      const ptrs: PilePointer[] = [];
      for (let i = 0; i < 30_000; i++) ptrs.push(view.put(item(i)));
      expect(pile.stats.segmentCount).to.be.greaterThan(2);
      // Keys alternate, so the per-key accessors and the last-key shortcut are both exercised.
      for (let i = 0; i < ptrs.length; i += 97) {
        const whole = view.get(ptrs[i]!);
        for (const k of KEYS) expect(view.field(ptrs[i]!, k), `${i}.${k}`).to.deep.equal(whole[k]);
      }
      for (let i = 0; i < ptrs.length; i++) expect(view.field(ptrs[i]!, 'price')).to.equal(i / 7);
    }
  });

  it('two piles open at once, with the same schema and geometry, each read their own records', () => {
    const a = open('a').schema('item', Item);
    const b = open('b').schema('item', Item);
    const pa: PilePointer[] = [];
    const pb: PilePointer[] = [];
    for (let i = 0; i < 2000; i++) {
      pa.push(a.put(item(i)));
      pb.push(b.put({ ...item(i), id: 100_000 + i }));
    }
    // Both piles hold records at the same offsets of same-numbered segments: only the pile tells them apart.
    expect(pa.map((p) => p % OFFSET_DIV)).to.deep.equal(pb.map((p) => p % OFFSET_DIV));
    for (let i = 0; i < 2000; i++) {
      expect(a.field(pa[i]!, 'id')).to.equal(i);
      expect(b.field(pb[i]!, 'id')).to.equal(100_000 + i);
    }
  });

  it('after reopen, the first read maps the segment and later reads take the compiled path', () => {
    let pile = open('a');
    let view = pile.schema('item', Item);
    const ptrs = Array.from({ length: 20_000 }, (_, i) => view.put(item(i)));
    pile.close();
    pile = open('a');
    view = pile.schema('item', Item);
    for (let i = ptrs.length - 1; i >= 0; i -= 13) expect(view.field(ptrs[i]!, 'name')).to.equal(`item ${i}`);
  });

  it('a record grown by set() is read through its link; one shrunk back reads in place', () => {
    const view = open('a').schema('item', Item);
    const ptr = view.put(item(1));
    view.set(ptr, item(1, 500));
    expect(view.field(ptr, 'name')).to.equal(`item 1${'x'.repeat(500)}`);
    expect(view.field(ptr, 'price')).to.equal(1 / 7);
    view.set(ptr, item(2));
    expect(view.field(ptr, 'id')).to.equal(2);
  });

  it('a deleted record, and its pointer after the block is reused, give PILE_STALE_POINTER', () => {
    const view = open('a').schema('item', Item);
    const ptr = view.put(item(1));
    expect(view.field(ptr, 'id')).to.equal(1);
    open('b').schema('item', Item).put(item(1)); // another pile running the same compiled code must not matter
    piles[0]!.delete(ptr);
    expectPileError(() => view.field(ptr, 'id'), 'PILE_STALE_POINTER');
    const again = view.put(item(1));
    expect(again).to.not.equal(ptr);
    expectPileError(() => view.field(ptr, 'id'), 'PILE_STALE_POINTER');
    expect(view.field(again, 'id')).to.equal(1);
  });

  it('records of another schema, and generic records, give PILE_SCHEMA_MISMATCH', () => {
    const pile = open('a');
    const view = pile.schema('item', Item);
    const other = pile.schema('other', z.object({ id: z.number().int() }));
    const foreign = other.put({ id: 5 });
    expectPileError(() => view.field(foreign, 'id'), 'PILE_SCHEMA_MISMATCH', "'item'");
    expect(other.field(foreign, 'id')).to.equal(5);
    const generic = pile.put({ id: 5 });
    expectPileError(() => view.field(generic, 'id'), 'PILE_SCHEMA_MISMATCH');
  });

  it('pointers that name nothing give PILE_INVALID_POINTER, whatever number they are', () => {
    const view = open('a').schema('item', Item);
    const ptr = view.put(item(1));
    const bad = [0, -1, -ptr, 1.5, ptr + 0.5, Number.NaN, Infinity, 2 ** 53, Number.MAX_SAFE_INTEGER, 8, ptr + 1, ptr + 2 ** 30 * 64];
    for (const p of bad)
      expect(
        refusal(() => view.field(p as PilePointer, 'id')),
        `pointer ${p}`,
      ).to.be.oneOf(['PILE_INVALID_POINTER', 'PILE_STALE_POINTER']);
  });

  it('an unknown field is PILE_INVALID_OPTION; a closed pile is PILE_CLOSED', () => {
    const pile = open('a');
    const view = pile.schema('item', Item);
    const ptr = view.put(item(1));
    const fresh = pile.schema('item', Item);
    // The first read of a view, with a key that is no key at all.
    expectPileError(() => fresh.field(ptr, undefined as unknown as 'id'), 'PILE_INVALID_OPTION', '"undefined"');
    expectPileError(() => view.field(ptr, 'nope' as 'id'), 'PILE_INVALID_OPTION', '"nope"');
    expect(view.field(ptr, 'id')).to.equal(1);
    pile.close();
    expectPileError(() => view.field(ptr, 'id'), 'PILE_CLOSED');
  });

  it('a damaged size word is refused, never read past; verifyOnRead catches damaged bytes', () => {
    const pile = open('a');
    const view = pile.schema('item', Item);
    const first = view.put(item(1));
    const second = view.put(item(2));
    const at = fileOffset(path.join(dir, 'a'), first);
    patchFile(at.file, at.offset, (b) => b.writeUInt32LE(SEG * 4, 0));
    // The same refusal as get(): the header no longer describes a block that fits its segment.
    const refusal = expectPileError(() => view.get(first), 'PILE_INVALID_POINTER', 'does not name a record');
    expect(expectPileError(() => view.field(first, 'price'), refusal.code).message).to.equal(refusal.message);
    expect(view.field(second, 'id')).to.equal(2);
    pile.close();

    const checked = open('b', true);
    const cview = checked.schema('item', Item);
    const ptr = cview.put(item(3));
    expect(cview.field(ptr, 'id')).to.equal(3);
    const b = fileOffset(path.join(dir, 'b'), ptr);
    // A byte of `price` (header 16, schema id 2, field count 2, id 8, name slot 8): a field the read does not look at.
    patchFile(b.file, b.offset + 16 + 2 + 2 + 8 + 8, (x) => (x[0] = x[0]! ^ 0xff), 1);
    expectPileError(() => cview.field(ptr, 'id'), 'PILE_CORRUPT');
  });

  it('older records of an evolved schema read the added field as undefined', () => {
    let pile = open('a');
    const old = pile.schema('item', Item).put(item(4));
    pile.close();
    pile = open('a');
    const v2 = pile.schema('item', Item.extend({ extra: z.number().optional() }));
    const neu = v2.put({ ...item(5), extra: 9 });
    expect(v2.field(old, 'extra')).to.equal(undefined);
    expect(v2.field(old, 'id')).to.equal(4);
    expect(v2.field(neu, 'extra')).to.equal(9);
  });

  it('agrees with a Map model through puts, sets, deletes and reuse (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant('put' as const), grow: fc.nat(300) }),
            fc.record({ op: fc.constant('set' as const), at: fc.nat(), grow: fc.nat(300) }),
            fc.record({ op: fc.constant('delete' as const), at: fc.nat() }),
            fc.record({ op: fc.constant('read' as const), at: fc.nat(), key: fc.constantFrom(...KEYS) }),
          ),
          { maxLength: 120 },
        ),
        (ops) => {
          const pile = openPile({ segmentSize: SEG });
          try {
            const view = pile.schema('item', Item);
            const live = new Map<PilePointer, Item>();
            const dead: PilePointer[] = [];
            let n = 0;
            for (const o of ops) {
              const keys = [...live.keys()];
              const pick = (at: number): PilePointer | undefined => (keys.length === 0 ? undefined : keys[at % keys.length]);
              if (o.op === 'put') {
                const v = item(n++, o.grow);
                live.set(view.put(v), v);
              } else if (o.op === 'set') {
                const p = pick(o.at);
                if (p === undefined) continue;
                const v = item(n++, o.grow);
                view.set(p, v);
                live.set(p, v);
              } else if (o.op === 'delete') {
                const p = pick(o.at);
                if (p === undefined) continue;
                pile.delete(p);
                live.delete(p);
                dead.push(p);
              } else {
                const p = pick(o.at);
                if (p !== undefined) expect(view.field(p, o.key)).to.deep.equal(live.get(p)![o.key]);
              }
              // A dead pointer is refused: stale when a newer block starts where it points, invalid
              // when its offset now lies inside a block that merged over it.
              for (const d of dead)
                if (!live.has(d)) expect(refusal(() => view.field(d, 'id'))).to.be.oneOf(['PILE_STALE_POINTER', 'PILE_INVALID_POINTER']);
            }
            for (const [p, v] of live) for (const k of KEYS) expect(view.field(p, k)).to.deep.equal(v[k]);
          } finally {
            pile.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
