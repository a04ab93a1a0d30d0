import { expect } from 'chai';
import fc from 'fast-check';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile, type PileOptions } from '../src/Pile';
import { PileError } from '../src/PileError';
import type { PilePointer } from '../src/records/PilePointer';

const MiB = 1 << 20;

// Values as a user stores them: text (also non-BMP), both byte kinds, objects of many shapes
// (msgpackr record structures), arrays, and values large enough to force links on set.
// Not generated: -0 (MessagePack has no negative integer zero) and a '__proto__' key
// (msgpackr renames it on decode, by design, against prototype pollution).
const key = fc.constantFrom('a', 'b', 'c', 'id', 'name', 'value', 'x', 'y', 'list', 'ключ', '😀', 'k𝄞');
const leaf = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.integer(),
  fc.double({ noNaN: true }).filter((d) => !Object.is(d, -0)),
  fc.boolean(),
  fc.constant(null),
);
const value: fc.Arbitrary<unknown> = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.tuple(fc.constantFrom('x', 'é', '😀'), fc.integer({ min: 100, max: 1500 })).map(([c, n]) => c.repeat(n)),
  fc.uint8Array({ maxLength: 300 }),
  fc.uint8Array({ maxLength: 3000 }).map((u) => Buffer.from(u)),
  { weight: 3, arbitrary: fc.dictionary(key, fc.oneof(leaf, fc.array(leaf, { maxLength: 6 })), { maxKeys: 6 }) },
  fc.array(leaf, { maxLength: 8 }),
  leaf,
);

type Op =
  | { t: 'put'; v: unknown; prealloc: number | undefined }
  | { t: 'set'; i: number; v: unknown }
  | { t: 'delete'; i: number }
  | { t: 'get'; i: number }
  | { t: 'stale'; i: number }
  | { t: 'reopen' }
  | { t: 'verify' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant('put' as const), v: value, prealloc: fc.option(fc.nat(2000), { nil: undefined }) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('set' as const), i: fc.nat(), v: value }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('delete' as const), i: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('get' as const), i: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('stale' as const), i: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ t: 'reopen' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'verify' as const }) },
);

function expectSame(got: unknown, want: unknown, label: string): void {
  if (want instanceof Uint8Array) {
    expect(got, label).to.be.instanceOf(Uint8Array);
    expect(Buffer.isBuffer(got), `${label}: Buffer kind`).to.equal(Buffer.isBuffer(want));
    expect(Buffer.from(got as Uint8Array).equals(Buffer.from(want)), label).to.equal(true);
  } else {
    expect(got, label).to.deep.equal(want);
  }
}

function storedSize(v: unknown): number | undefined {
  if (typeof v === 'string') return Buffer.byteLength(v, 'utf8');
  if (v instanceof Uint8Array) return v.length;
  return undefined; // msgpack: encoding-defined
}

/** The whole pile against the model: every record, entries(), exact stats, integrity, dead pointers. */
function checkAll(pile: Pile, model: Map<PilePointer, unknown>, dead: PilePointer[]): void {
  for (const [p, v] of model) {
    expectSame(pile.get(p), v, `record ${p}`);
    const size = storedSize(v);
    if (size !== undefined) expect(pile.sizeOf(p)).to.equal(size);
  }
  const entries = [...pile.entries()];
  expect(entries.length).to.equal(model.size);
  expect(new Set(entries.map((e) => e.pointer))).to.deep.equal(new Set(model.keys()));
  for (const e of entries) expect(e.size).to.equal(pile.sizeOf(e.pointer));
  const st = pile.stats;
  expect(st.objectCount).to.equal(model.size);
  expect(st.overheadBytes).to.equal(st.allocatedBytes - st.utilizedBytes);
  const report = pile.verify();
  expect(report.statsErrors).to.deep.equal([]);
  expect(report.ok, JSON.stringify(report)).to.equal(true);
  for (const d of dead) {
    expect(pile.has(d)).to.equal(false);
    expect(() => pile.get(d))
      .to.throw(PileError)
      .with.property('code', 'PILE_STALE_POINTER');
  }
}

function run(ops: Op[], options: PileOptions, reopenable: boolean): void {
  let pile = openPile(options);
  const model = new Map<PilePointer, unknown>();
  const dead: PilePointer[] = [];
  const pick = (i: number): PilePointer | undefined => {
    if (model.size === 0) return undefined;
    return [...model.keys()][i % model.size];
  };
  try {
    for (const o of ops) {
      switch (o.t) {
        case 'put': {
          const p = o.prealloc === undefined ? pile.put(o.v) : pile.put(o.v, { preallocate: o.prealloc });
          expect(model.has(p), 'a put returned a live pointer').to.equal(false);
          model.set(p, o.v);
          break;
        }
        case 'set': {
          const p = pick(o.i);
          if (p === undefined) break;
          pile.set(p, o.v);
          model.set(p, o.v);
          break;
        }
        case 'delete': {
          const p = pick(o.i);
          if (p === undefined) break;
          expect(pile.delete(p)).to.equal(true);
          expect(pile.delete(p)).to.equal(false);
          model.delete(p);
          dead.push(p);
          break;
        }
        case 'get': {
          const p = pick(o.i);
          if (p !== undefined) expectSame(pile.get(p), model.get(p), `get ${p}`);
          break;
        }
        case 'stale': {
          if (dead.length === 0) break;
          const d = dead[o.i % dead.length]!;
          expect(() => pile.get(d))
            .to.throw(PileError)
            .with.property('code', 'PILE_STALE_POINTER');
          break;
        }
        case 'reopen':
          // Only reopen: what comes next (a put of a new shape, a set, a delete) meets the
          // reopened state before anything is read. In memory there is nothing to reopen.
          if (reopenable) {
            pile.close();
            pile = openPile({ dir: options.dir! });
            expect(pile.lastRecovery.ran).to.equal(false);
          } else {
            checkAll(pile, model, dead);
          }
          break;
        case 'verify':
          checkAll(pile, model, dead);
          break;
      }
      expect(pile.stats.objectCount).to.equal(model.size);
    }
    checkAll(pile, model, dead);
    if (reopenable) {
      pile.close();
      pile = openPile({ dir: options.dir! });
      checkAll(pile, model, dead);
    }
  } finally {
    pile.close();
  }
}

describe('model: random put/get/set/delete/reopen sequences against a Map', () => {
  it('in-memory pile', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 10, maxLength: 80, size: 'max' }), (ops) => run(ops, { segmentSize: MiB }, false)),
      { numRuns: 120 },
    );
  });

  it('mapped pile, reopened in between', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 10, maxLength: 60, size: 'max' }), (ops) => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-model-'));
        try {
          run(ops, { dir, segmentSize: MiB }, true);
        } finally {
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }),
      { numRuns: 40 },
    );
  });

  it('a small pile under pressure: many segments, maxMemory, records past half a segment', () => {
    const big = fc.tuple(fc.constantFrom('a', 'b'), fc.integer({ min: 100_000, max: 600_000 })).map(([c, n]) => c.repeat(n));
    const bigOp: fc.Arbitrary<Op> = fc.oneof(
      op,
      fc.record({ t: fc.constant('put' as const), v: big, prealloc: fc.constant(undefined) }),
      fc.record({ t: fc.constant('set' as const), i: fc.nat(), v: big }),
    );
    fc.assert(
      fc.property(fc.array(bigOp, { minLength: 5, maxLength: 40, size: 'max' }), (ops) => {
        // Beyond maxMemory a put throws PILE_OUT_OF_SPACE and must leave pile and model as they were.
        const guarded = ops.map((o): Op => o);
        const pile = openPile({ segmentSize: MiB, maxMemory: 4 * MiB });
        const model = new Map<PilePointer, unknown>();
        const dead: PilePointer[] = [];
        try {
          for (const o of guarded) {
            const keys = [...model.keys()];
            try {
              if (o.t === 'put') model.set(pile.put(o.v), o.v);
              else if (o.t === 'set' && keys.length > 0) {
                const p = keys[o.i % keys.length]!;
                pile.set(p, o.v);
                model.set(p, o.v);
              } else if (o.t === 'delete' && keys.length > 0) {
                const p = keys[o.i % keys.length]!;
                pile.delete(p);
                model.delete(p);
                dead.push(p);
              }
            } catch (err) {
              if (!(err instanceof PileError) || err.code !== 'PILE_OUT_OF_SPACE') throw err;
            }
            expect(pile.stats.segmentCount).to.be.at.most(4);
          }
          checkAll(pile, model, dead);
        } finally {
          pile.close();
        }
      }),
      { numRuns: 30 },
    );
  });
});
