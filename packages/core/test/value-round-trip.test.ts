import { expect } from 'chai';
import { z } from 'zod';
import { openPile, type Pile } from '../src/Pile';
import { expectPileError } from './fixtures/expect-error';

describe('values that would not read back as they were put are refused', () => {
  let pile: Pile;
  beforeEach(() => {
    pile = openPile({ segmentSize: 1 << 20 });
  });
  afterEach(() => pile.close());

  it('a function, alone or inside a value, is refused (msgpack would store undefined)', () => {
    expectPileError(() => pile.put(() => 1), 'PILE_INVALID_VALUE', 'a function');
    expectPileError(
      () =>
        pile.put({
          a: 1,
          f: function named() {
            return 1;
          },
        }),
      'PILE_INVALID_VALUE',
      'a function (named)',
    );
    expectPileError(() => pile.put([1, () => 2]), 'PILE_INVALID_VALUE', 'a function');
    const p = pile.put({ a: 1 });
    expectPileError(() => pile.set(p, { a: () => 1 }), 'PILE_INVALID_VALUE', 'a function');
    expect(pile.get(p)).to.deep.equal({ a: 1 });
    expect(pile.stats.objectCount).to.equal(1);
  });

  it('a boxed String, Number or Boolean is refused', () => {
    expectPileError(() => pile.put(new String('abc')), 'PILE_INVALID_VALUE', 'boxed String');
    expectPileError(() => pile.put(new Number(3)), 'PILE_INVALID_VALUE', 'boxed Number');
    expectPileError(() => pile.put(new Boolean(false)), 'PILE_INVALID_VALUE', 'boxed Boolean');
    expect(pile.stats.objectCount).to.equal(0);
  });

  it('a string with a lone surrogate is refused; paired surrogates round-trip', () => {
    expectPileError(() => pile.put('a\ud800b'), 'PILE_INVALID_VALUE', 'lone surrogate (U+D800 at index 1)');
    expectPileError(() => pile.put('\udc00'), 'PILE_INVALID_VALUE', 'lone surrogate');
    expectPileError(() => pile.put('x\ud83d'), 'PILE_INVALID_VALUE', 'lone surrogate (U+D83D at index 1)');
    const ok = 'emoji \ud83d\ude00 and é';
    expect(pile.get(pile.put(ok))).to.equal(ok);
    const view = pile.schema('s', z.object({ s: z.string(), list: z.array(z.string()) }));
    expectPileError(() => view.put({ s: 'a\udfff', list: [] }), 'PILE_INVALID_VALUE', 's: a string with a lone surrogate');
    expectPileError(() => view.put({ s: 'a', list: ['ok', '\ud800'] }), 'PILE_INVALID_VALUE', 'list[1]: a string with a lone surrogate');
    expect(view.get(view.put({ s: ok, list: [ok] }))).to.deep.equal({ s: ok, list: [ok] });
    expect(pile.stats.objectCount).to.equal(2);
    expect(pile.verify().ok).to.equal(true);
  });

  it('nested values that would change are refused with their path; nothing is written', () => {
    class Point {
      constructor(public x: number) {}
    }
    const cases: [unknown, string][] = [
      [{ a: { s: 'x\ud800' } }, 'value.a.s: a string with a lone surrogate'],
      [['ok', ['\udc00']], 'value[1][0]: a string with a lone surrogate'],
      [{ n: -0 }, 'value.n: -0 would read back as 0'],
      [-0, 'value: -0'],
      [[1, , 3], 'value[1]: a sparse array'], // eslint-disable-line no-sparse-arrays
      [{ list: new Array(3) }, 'value.list[0]: a sparse array'],
      [new Point(1), 'value: an instance of Point'],
      [{ p: [new Point(2)] }, 'value.p[0]: an instance of Point'],
      [{ e: new Error('x') }, 'value.e: an instance of Error'],
      [{ s: new String('x') }, 'value.s: a boxed String'],
      [JSON.parse('{"__proto__": {"x": 1}}'), 'value.__proto__: an own property named __proto__'],
      [{ m: new Map([['k', 'a\ud800']]) }, 'value.m<entry 0>: a string with a lone surrogate'],
      [new Set([{ n: -0 }]), 'value<element 0>.n: -0'],
      [{ 'a b': Symbol('s') }, 'value["a b"]: a symbol'],
      [{ deep: { f: () => 1 } }, 'value.deep.f: a function'],
    ];
    for (const [v, msg] of cases) expectPileError(() => pile.put(v), 'PILE_INVALID_VALUE', msg);
    const p = pile.put({ ok: 1 });
    expectPileError(() => pile.set(p, { ok: -0 }), 'PILE_INVALID_VALUE', 'value.ok: -0');
    expect(pile.get(p)).to.deep.equal({ ok: 1 });
    expect(pile.stats.objectCount).to.equal(1);
    expect(pile.verify().ok).to.equal(true);
  });

  it('Maps, Sets, Dates, typed arrays, null-prototype objects and undefined round-trip exactly', () => {
    const v = {
      m: new Map<unknown, unknown>([
        ['a', 1],
        [2, { b: [1, 2] }],
      ]),
      s: new Set(['x', 3]),
      d: new Date(1234),
      f: new Float64Array([1.5, -2]),
      b: Buffer.from('hi'),
      u: new Uint8Array([1, 2]),
      big: 2n ** 70n,
      undef: undefined,
      arr: [undefined, null, 0, NaN],
    };
    const got = pile.get<typeof v>(pile.put(v));
    expect(got.m).to.be.instanceOf(Map);
    expect([...got.m]).to.deep.equal([...v.m]);
    expect(got.s).to.be.instanceOf(Set);
    expect(Buffer.isBuffer(got.b)).to.equal(true);
    expect(Buffer.isBuffer(got.u)).to.equal(false);
    expect(got).to.deep.equal(v);
    expect(Object.keys(got)).to.include('undef');
    const top = pile.get(pile.put(new Map([['k', 'v']])));
    expect(top).to.be.instanceOf(Map);
    const bare = Object.assign(Object.create(null) as object, { a: 1 });
    expect(pile.get(pile.put(bare))).to.deep.equal({ a: 1 });
  });

  it('a cyclic value is refused as PILE_INVALID_VALUE, not a RangeError', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    expectPileError(() => pile.put(a), 'PILE_INVALID_VALUE');
    expect(pile.stats.objectCount).to.equal(0);
  });
});

describe('value faults have their own code', () => {
  it('a generic put or set of a value that would change is PILE_INVALID_VALUE naming the path, not an option', () => {
    const pile = openPile();
    const err = expectPileError(() => pile.put({ a: -0 }), 'PILE_INVALID_VALUE', 'value.a: -0');
    expect(err.message).to.not.match(/^PILE_|option/);
    expect(String(err)).to.match(/^PileError \[PILE_INVALID_VALUE\]: value\.a: -0/);
    expect(err.stack?.split('\n')[0]).to.equal(String(err));
    const p = pile.put({ a: 1 });
    expectPileError(() => pile.set(p, { a: [1, -0] }), 'PILE_INVALID_VALUE', 'value.a[1]: -0');
    expect(pile.get(p)).to.deep.equal({ a: 1 });
    pile.close();
  });

  it('a typed put keeps PILE_SCHEMA_VIOLATION for a wrong shape and gives PILE_INVALID_VALUE for a value that would not read back', () => {
    const pile = openPile();
    const view = pile.schema('v', z.object({ s: z.string() }));
    expectPileError(() => view.put({ s: 1 } as never), 'PILE_SCHEMA_VIOLATION', 's: expected string, got number');
    expectPileError(() => view.put({ s: '\ud800' }), 'PILE_INVALID_VALUE', 's: a string with a lone surrogate');
    expect(pile.stats.objectCount).to.equal(0);
    pile.close();
  });
});
