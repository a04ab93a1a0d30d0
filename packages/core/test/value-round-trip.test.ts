import { expect } from 'chai';
import { z } from 'zod';
import { openPile, type Pile } from '../src/Pile';
import { expectPileError } from './fixtures/expect-error';

describe('values that would not read back as they were put are refused', () => {
  let pile: Pile;
  beforeEach(() => { pile = openPile({ segmentSize: 1 << 20 }); });
  afterEach(() => pile.close());

  it('a function, alone or inside a value, is refused (msgpack would store undefined)', () => {
    expectPileError(() => pile.put(() => 1), 'PILE_INVALID_OPTION', 'a function');
    expectPileError(() => pile.put({ a: 1, f: function named() { return 1; } }), 'PILE_INVALID_OPTION', 'a function (named)');
    expectPileError(() => pile.put([1, () => 2]), 'PILE_INVALID_OPTION', 'a function');
    const p = pile.put({ a: 1 });
    expectPileError(() => pile.set(p, { a: () => 1 }), 'PILE_INVALID_OPTION', 'a function');
    expect(pile.get(p)).to.deep.equal({ a: 1 });
    expect(pile.stats.objectCount).to.equal(1);
  });

  it('a boxed String, Number or Boolean is refused', () => {
    expectPileError(() => pile.put(new String('abc')), 'PILE_INVALID_OPTION', 'boxed String');
    expectPileError(() => pile.put(new Number(3)), 'PILE_INVALID_OPTION', 'boxed Number');
    expectPileError(() => pile.put(new Boolean(false)), 'PILE_INVALID_OPTION', 'boxed Boolean');
    expect(pile.stats.objectCount).to.equal(0);
  });

  it('a string with a lone surrogate is refused; paired surrogates round-trip', () => {
    expectPileError(() => pile.put('a\ud800b'), 'PILE_INVALID_OPTION', 'lone surrogate (U+D800 at index 1)');
    expectPileError(() => pile.put('\udc00'), 'PILE_INVALID_OPTION', 'lone surrogate');
    expectPileError(() => pile.put('x\ud83d'), 'PILE_INVALID_OPTION', 'lone surrogate (U+D83D at index 1)');
    const ok = 'emoji \ud83d\ude00 and é';
    expect(pile.get(pile.put(ok))).to.equal(ok);
    const view = pile.schema('s', z.object({ s: z.string(), list: z.array(z.string()) }));
    expectPileError(() => view.put({ s: 'a\udfff', list: [] }), 'PILE_SCHEMA_VIOLATION', 's: a string with a lone surrogate');
    expectPileError(() => view.put({ s: 'a', list: ['ok', '\ud800'] }), 'PILE_SCHEMA_VIOLATION', 'list[1]: a string with a lone surrogate');
    expect(view.get(view.put({ s: ok, list: [ok] }))).to.deep.equal({ s: ok, list: [ok] });
    expect(pile.stats.objectCount).to.equal(2);
    expect(pile.verify().ok).to.equal(true);
  });
});
