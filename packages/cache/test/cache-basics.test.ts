import { expect } from 'chai';
import fc from 'fast-check';
import { z } from 'zod';
import { openPile } from '@pile/core';
import { openCache, type PileCache } from '../src';
import { SEG, expectPileError, tempDir } from './helpers';

describe('cache basics', () => {
  let cache: PileCache;
  beforeEach(() => {
    cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
  });
  afterEach(() => cache.close());

  it('puts, gets, replaces and removes', () => {
    const t = cache.table<string>('t');
    expect(t.put('a', 'one')).to.equal('inserted');
    expect(t.get('a')).to.equal('one');
    expect(t.put('a', 'uno')).to.equal('replaced');
    expect(t.get('a')).to.equal('uno');
    expect(t.has('a')).to.equal(true);
    expect(t.count).to.equal(1);
    expect(t.remove('a')).to.equal(true);
    expect(t.remove('a')).to.equal(false);
    expect(t.get('a')).to.equal(undefined);
    expect(t.has('a')).to.equal(false);
    expect(t.count).to.equal(0);
    const s = t.stats;
    expect([s.inserts, s.replaces, s.removes, s.hits, s.misses]).to.deep.equal([1, 1, 1, 2, 1]);
  });

  it('keeps equal keys of different types apart', () => {
    const t = cache.table<string>('t', { collisionMode: 'durable' });
    const keys = ['1', 1, 1n, new Uint8Array([0x31]), '', 0, 0n, new Uint8Array(0), -1n, 2 ** 70, 2n ** 70n];
    keys.forEach((k, i) => expect(t.put(k, `v${i}`)).to.equal('inserted'));
    keys.forEach((k, i) => expect(t.get(k)).to.equal(`v${i}`));
    expect(t.count).to.equal(keys.length);
    const back = [...t.keys()];
    for (const k of keys)
      expect(
        back.some((b) => typeof b === typeof k && (k instanceof Uint8Array ? Buffer.from(b as Uint8Array).equals(k) : b === k)),
      ).to.equal(true);
  });

  it('treats -0 as 0 and every NaN as one key, like a Map', () => {
    const t = cache.table<string>('t');
    t.put(0, 'zero');
    expect(t.get(-0)).to.equal('zero');
    t.put(NaN, 'nan');
    expect(t.get(Number('x'))).to.equal('nan');
  });

  it('keeps strings with lone surrogates distinct from U+FFFD and returns them exactly', () => {
    const t = cache.table<number>('t');
    const keys = ['\ud800', '\ufffd', '\udc00x', 'a\ud83d\ude00b', 'é', '€', 'x'.repeat(300)];
    keys.forEach((k, i) => t.put(k, i));
    keys.forEach((k, i) => expect(t.get(k)).to.equal(i));
    expect(new Set(t.keys())).to.deep.equal(new Set(keys));
  });

  it('stores any string key, surrogates lone or paired included, at its WTF-8 length (property)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ unit: 'binary', maxLength: 24 }), { maxLength: 40 }), (keys) => {
        const c = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
        try {
          const t = c.table<number>('t', { collisionMode: 'durable' });
          keys.forEach((k, i) => t.put(k, i));
          keys.forEach((k, i) => expect(t.get(k)).to.equal(i));
          expect(new Set(t.keys())).to.deep.equal(new Set(keys));
          expect(c.pile.verify().ok).to.equal(true);
        } finally {
          c.close();
        }
      }),
      { numRuns: 150 },
    );
  });

  it('stores strings, bytes, Buffers and objects, and typed values through a schema', () => {
    const t = cache.table('any', { collisionMode: 'durable' });
    const obj = { a: 1, b: [1, 'x', null], c: { d: true }, big: 5n };
    t.put('s', 'text');
    t.put('u8', new Uint8Array([1, 2, 3]));
    t.put('buf', Buffer.from('hi'));
    t.put('o', obj);
    expect(t.get('s')).to.equal('text');
    expect(t.get('u8')).to.be.instanceOf(Uint8Array).and.not.instanceOf(Buffer);
    expect([...(t.get('u8') as Uint8Array)]).to.deep.equal([1, 2, 3]);
    expect(Buffer.isBuffer(t.get('buf'))).to.equal(true);
    expect(t.get('o')).to.deep.equal(obj);
    const schema = z.object({ id: z.number(), name: z.string(), tags: z.array(z.string()) });
    const typed = cache.table('typed', { schema });
    typed.put(7, { id: 7, name: 'seven', tags: ['a'] });
    expect(typed.get(7)).to.deep.equal({ id: 7, name: 'seven', tags: ['a'] });
    expectPileError(() => typed.put(8, { id: 'x' } as never), 'PILE_SCHEMA_VIOLATION');
    expect(typed.count).to.equal(1);
  });

  it('getOrPut makes a value only on a miss', () => {
    const t = cache.table<number>('t');
    let calls = 0;
    const make = (k: unknown): number => {
      calls++;
      return String(k).length;
    };
    expect(t.getOrPut('abc', make)).to.equal(3);
    expect(t.getOrPut('abc', make)).to.equal(3);
    expect(calls).to.equal(1);
  });

  it('iterates entries, skipping removed ones', () => {
    const t = cache.table<number>('t', { collisionMode: 'durable' });
    for (let i = 0; i < 100; i++) t.put(`k${i}`, i);
    for (let i = 0; i < 100; i += 2) t.remove(`k${i}`);
    const got = new Map(t.entries());
    expect(got.size).to.equal(50);
    for (let i = 1; i < 100; i += 2) expect(got.get(`k${i}`)).to.equal(i);
  });

  it('lists, reopens and drops tables, freeing their pile space', () => {
    const pileBefore = cache.stats;
    expect(pileBefore.tables).to.equal(0);
    const a = cache.table<number>('a');
    cache.table<number>('b');
    expect(cache.tables()).to.deep.equal(['a', 'b']);
    expect(cache.table('a')).to.equal(a);
    for (let i = 0; i < 50; i++) a.put(i, i);
    expect(cache.dropTable('a')).to.equal(true);
    expect(cache.dropTable('a')).to.equal(false);
    expect(cache.tables()).to.deep.equal(['b']);
    expectPileError(() => a.get(1), 'PILE_CLOSED', "'a'");
    const fresh = cache.table<number>('a');
    expect(fresh.count).to.equal(0);
  });

  it('validates options, naming them', () => {
    expectPileError(() => cache.table('t', { collisionMode: 'lossy' as never }), 'PILE_INVALID_OPTION', 'collisionMode');
    expectPileError(() => cache.table('t', { initialCapacity: 3 }), 'PILE_INVALID_OPTION', 'initialCapacity');
    expectPileError(() => cache.table('t', { loadFactorLow: 0.5, loadFactorHigh: 0.6 }), 'PILE_INVALID_OPTION', 'loadFactorLow');
    expectPileError(() => cache.table('t', { growthFactor: 1 }), 'PILE_INVALID_OPTION', 'growthFactor');
    expectPileError(() => cache.table('t', { bogus: 1 } as never), 'PILE_INVALID_OPTION', 'bogus');
    expectPileError(() => cache.table(''), 'PILE_INVALID_OPTION', 'name');
    const t = cache.table('t');
    expectPileError(() => t.put({} as never, 1), 'PILE_INVALID_OPTION', 'key');
    expectPileError(() => t.put('k', 1, { priority: 1.5 }), 'PILE_INVALID_OPTION', 'priority');
    expectPileError(() => t.put('k', 1, { maxAgeSec: 1, expiresAt: 5 }), 'PILE_INVALID_OPTION', 'expiresAt');
    expectPileError(() => t.get('k', { maxAgeSec: -1 }), 'PILE_INVALID_OPTION', 'maxAgeSec');
    expectPileError(() => cache.table('t', { collisionMode: 'speculative' }), 'PILE_INVALID_OPTION', 'collisionMode');
    expectPileError(() => openCache({ sweepIntervalSec: -1 }), 'PILE_INVALID_OPTION', 'sweepIntervalSec');
    expectPileError(() => openCache({ clock: 5 as never }), 'PILE_INVALID_OPTION', 'clock');
  });

  it('refuses a typed table without its schema and an incompatible schema', () => {
    cache.table('typed', { schema: z.object({ a: z.number() }) });
    expectPileError(() => cache.table('typed'), 'PILE_SCHEMA_MISMATCH', 'typed');
    expectPileError(() => cache.table('typed', { schema: z.object({ a: z.string() }) }), 'PILE_SCHEMA_MISMATCH');
    cache.table('plain');
    expectPileError(() => cache.table('plain', { schema: z.object({ a: z.number() }) }), 'PILE_SCHEMA_MISMATCH', 'plain');
  });

  it('throws PILE_CLOSED from every method after close', () => {
    const t = cache.table<number>('t');
    t.put(1, 1);
    const it = t.keys();
    cache.close();
    cache.close();
    expectPileError(() => t.get(1), 'PILE_CLOSED');
    expectPileError(() => t.put(1, 2), 'PILE_CLOSED');
    expectPileError(() => t.count, 'PILE_CLOSED');
    expectPileError(() => it.next(), 'PILE_CLOSED');
    expectPileError(() => cache.table('t'), 'PILE_CLOSED');
    expectPileError(() => cache.sweep(), 'PILE_CLOSED');
    expectPileError(() => cache.stats, 'PILE_CLOSED');
  });

  it('over a given pile: does not close it, and refuses a second cache on it', () => {
    const pile = openPile({ segmentSize: SEG });
    const c = openCache({ pile, sweepIntervalSec: 0 });
    expectPileError(() => openCache({ pile }), 'PILE_LOCKED');
    expectPileError(() => openCache({ pile, segmentSize: SEG } as never), 'PILE_INVALID_OPTION', 'segmentSize');
    c.table('t').put('k', 'v');
    c.close();
    expect(pile.isClosed).to.equal(false);
    const again = openCache({ pile, sweepIntervalSec: 0 });
    expect(again.table('t').get('k')).to.equal('v');
    pile.close();
    expectPileError(() => again.table('t'), 'PILE_CLOSED', 'pile');
    again.close();
  });

  it('a cache that opens its pile closes it', () => {
    const { dir, cleanup } = tempDir();
    try {
      const c = openCache({ dir, segmentSize: SEG, sweepIntervalSec: 0 });
      c.close();
      const p = openPile({ dir });
      p.close();
    } finally {
      cleanup();
    }
  });
});

describe('cache tableInfo', () => {
  it('describes a typed table without its schema, and answers undefined for an unknown name', () => {
    const cache = openCache({ sweepIntervalSec: 0 });
    const t = cache.table('typed', { schema: z.object({ n: z.number() }), collisionMode: 'durable' });
    t.put('a', { n: 1 });
    t.put('b', { n: 2 });
    cache.table('plain').put('x', 'y');
    expect(cache.tableInfo('typed')).to.deep.equal({
      name: 'typed',
      typed: true,
      collisionMode: 'durable',
      count: 2,
      capacity: t.capacity,
      schemaName: 'pile-cache:1',
    });
    expect(cache.tableInfo('plain')).to.include({ typed: false, collisionMode: 'durable', count: 1 });
    expect(cache.tableInfo('nope')).to.equal(undefined);
    cache.close();
    expect(() => cache.tableInfo('typed'))
      .to.throw()
      .with.property('code', 'PILE_CLOSED');
  });
});
