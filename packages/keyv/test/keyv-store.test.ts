import { expect } from 'chai';
import { Keyv } from 'keyv';
import { isPileError } from '@pile/core';
import { KeyvPile, attachIterator } from '../src';
import { tempDir } from './helpers';

function throwsCode(fn: () => unknown, code: string, text: string): void {
  try {
    fn();
  } catch (err) {
    expect(isPileError(err), String(err)).to.equal(true);
    expect((err as { code: string }).code).to.equal(code);
    expect((err as Error).message).to.include(text);
    return;
  }
  expect.fail('expected a PileError');
}

describe('keyv: the KeyvPile store', () => {
  let dir: string;
  let cleanup: () => void;
  beforeEach(() => ({ dir, cleanup } = tempDir()));
  afterEach(() => cleanup());

  it('checks its options once, naming the bad one', () => {
    throwsCode(() => new KeyvPile({} as never), 'PILE_INVALID_OPTION', 'option dir');
    throwsCode(() => new KeyvPile({ dir, ttl: 5 } as never), 'PILE_INVALID_OPTION', 'option ttl');
    throwsCode(() => new KeyvPile({ dir, raw: 'yes' } as never), 'PILE_INVALID_OPTION', 'option raw');
    throwsCode(() => new KeyvPile({ dir, table: '' }), 'PILE_INVALID_OPTION', 'option table');
    throwsCode(() => new KeyvPile({ dir, turnMs: 5 }), 'PILE_INVALID_OPTION', 'option turnMs');
    throwsCode(() => new KeyvPile({ dir, segmentSize: 1000 }), 'PILE_INVALID_OPTION', 'segmentSize');
  });

  it('stores get, set, delete, has, the Many calls; ttl in ms; bad ttl and non-string values rejected', async () => {
    const s = new KeyvPile({ dir });
    expect(await s.set('a', '1')).to.equal(true);
    expect(
      await s.setMany([
        { key: 'b', value: '2' },
        { key: 'c', value: '3', ttl: 50 },
      ]),
    ).to.deep.equal([true, true]);
    expect(await s.getMany(['a', 'b', 'c', 'd'])).to.deep.equal(['1', '2', '3', undefined]);
    expect(await s.hasMany(['a', 'd'])).to.deep.equal([true, false]);
    await new Promise((r) => setTimeout(r, 80));
    expect(await s.has('c')).to.equal(false);
    expect(await s.delete('a')).to.equal(true);
    expect(await s.delete('a')).to.equal(false);
    expect(await s.deleteMany(['x', 'b'])).to.equal(true);
    expect(await s.deleteMany(['x', 'b'])).to.equal(false);
    for (const [call, code, text] of [
      [() => s.set('k', 'v', -1), 'PILE_INVALID_OPTION', 'option ttl'],
      [() => s.set('k', { o: 1 }), 'PILE_INVALID_VALUE', 'value: KeyvPile stores the strings'],
      [() => s.get(5 as never), 'PILE_INVALID_OPTION', 'option key'],
    ] as const) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isPileError(err, code), String(err)).to.equal(true);
      expect((err as Error).message).to.include(text);
    }
    await s.disconnect();
    const closed = await s.get('a').catch((e: unknown) => e);
    expect(isPileError(closed, 'PILE_CLOSED')).to.equal(true);
  });

  it('raw: values stored without Keyv’s JSON step, given back as they were', async () => {
    const keyv = new Keyv({ store: new KeyvPile({ dir, raw: true }), serialize: undefined, deserialize: undefined });
    const value = { n: 1n, buf: Buffer.from('hi'), date: 'x', list: [1, 'two', null] };
    await keyv.set('v', value);
    const back = await keyv.get<typeof value>('v');
    expect(back).to.deep.equal(value);
    expect(Buffer.isBuffer(back!.buf)).to.equal(true);
    await keyv.disconnect();
  });

  it('raw: a value that would not read back as it was is PILE_INVALID_VALUE naming its path, and nothing is stored', async () => {
    const store = new KeyvPile({ dir, raw: true });
    for (const [value, text] of [
      [new Map([['a', 1]]), 'value: a Map'],
      [{ list: ['ok', 'a\ud800'] }, 'value.list[1]: a string with a lone surrogate'],
      [{ n: -0 }, 'value.n: -0'],
    ] as const) {
      const err = await store.set('bad', value).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isPileError(err, 'PILE_INVALID_VALUE'), String(err)).to.equal(true);
      expect((err as Error).message).to.include(text);
    }
    expect(await store.has('bad')).to.equal(false);
    await store.disconnect();
  });

  it('clear keeps to the namespace; iterator yields the namespace’s entries; KeyvPiles of one dir share its cache', async () => {
    const a = attachIterator(new Keyv({ store: new KeyvPile({ dir }), namespace: 'a' }));
    const b = attachIterator(new Keyv({ store: new KeyvPile({ dir }), namespace: 'b' }));
    await a.set('x', 1);
    await a.set('y', 2);
    await b.set('x', 3);
    const seen: [string, unknown][] = [];
    for await (const e of a.iterator!({})) seen.push(e as [string, unknown]);
    expect(seen.sort()).to.deep.equal([
      ['x', 1],
      ['y', 2],
    ]);
    await a.clear();
    expect(await a.get('x')).to.equal(undefined);
    expect(await b.get('x')).to.equal(3);
    throwsCode(() => new KeyvPile({ dir, shared: true }), 'PILE_INVALID_OPTION', 'option shared');
    await a.disconnect();
    expect(await b.get('x')).to.equal(3); // the other store still holds the cache open
    await b.disconnect();
  });
});
