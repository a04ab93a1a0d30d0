import { expect } from 'chai';
import { z } from 'zod';
import { openCache, type PileCache } from '../src';
import { SEG, expectPileError } from './helpers';

const User = z.object({ name: z.string(), admin: z.boolean() });

describe('cache values whose code calls back into the cache', () => {
  let cache: PileCache;
  beforeEach(() => {
    cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
  });
  afterEach(() => cache.close());

  it('a getter that reads another key stores the value under its own key (generic values)', () => {
    const t = cache.table<unknown>('t');
    t.put('other', { v: 1 });
    const v = {
      get x() {
        return (t.get('other') as { v: number }).v + 1;
      },
    };
    expect(t.put('a', v)).to.equal('inserted');
    expect(t.get('a')).to.deep.equal({ x: 2 });
    expect(t.get('other')).to.deep.equal({ v: 1 });
    expect([...t.keys()].sort()).to.deep.equal(['a', 'other']);
  });

  it('a getter that reads another key stores the value under its own key (typed values, read twice)', () => {
    const t = cache.table('u', { schema: User });
    t.put('other', { name: 'o', admin: false });
    const v = {
      get name() {
        return t.get('other')!.name + '!';
      },
      admin: true,
    };
    expect(t.put('a', v)).to.equal('inserted');
    expect(t.get('a')).to.deep.equal({ name: 'o!', admin: true });
    expect(t.get('other')).to.deep.equal({ name: 'o', admin: false });
    expect([...t.keys()].sort()).to.deep.equal(['a', 'other']);
  });

  it('a write from a getter is refused with PILE_REENTRANT and stores nothing', () => {
    const t = cache.table<unknown>('t');
    const u = cache.table('u', { schema: User });
    t.put('other', 'o');
    expectPileError(
      () =>
        t.put('a', {
          get x() {
            t.put('b', 1);
            return 1;
          },
        }),
      'PILE_REENTRANT',
    );
    expectPileError(
      () =>
        u.put('a', {
          get name() {
            t.remove('other');
            return 'n';
          },
          admin: true,
        }),
      'PILE_REENTRANT',
    );
    expectPileError(
      () =>
        t.put('a', {
          get x() {
            cache.pile.put({ y: 1 });
            return 1;
          },
        }),
      'PILE_REENTRANT',
    );
    expect([...t.keys()]).to.deep.equal(['other']);
    expect([...u.keys()]).to.deep.equal([]);
    expect(cache.pile.verify().ok).to.equal(true);
  });

  it('a typed value that grows between its two reads is refused; no other entry changes', () => {
    const u = cache.table('u', { schema: User });
    for (let i = 0; i < 50; i++) u.put(i, { name: `user ${i}`, admin: i % 2 === 0 });
    let reads = 0;
    const v = {
      get name() {
        return reads++ === 0 ? 'a' : 'x'.repeat(5000);
      },
      admin: true,
    };
    expectPileError(() => u.put('grow', v), 'PILE_SCHEMA_VIOLATION', 'changed while it was being stored');
    expect(u.has('grow')).to.equal(false);
    for (let i = 0; i < 50; i++) expect(u.get(i)).to.deep.equal({ name: `user ${i}`, admin: i % 2 === 0 });
    expect(cache.pile.verify().ok).to.equal(true);
  });

  it('a string that keeps its length but needs more bytes on its second read is refused, never stored cut', () => {
    // The entry's room is the measured size, so the second string ends exactly at its end: the
    // encoder's ASCII shortcut must see the non-ASCII bytes and find the write cut ('éaaa' is 5
    // bytes; 4 fit, as many as the string has units).
    const u = cache.table('u', { schema: User });
    for (const [first, second] of [
      ['aaaa', 'éaaa'],
      ['abcdefgh', 'abcdefg€'],
      ['xy', '\u{1f600}'],
    ] as const) {
      let reads = 0;
      const v = {
        get name() {
          return reads++ === 0 ? first : second;
        },
        admin: false,
      };
      expectPileError(() => u.put(first, v), 'PILE_SCHEMA_VIOLATION', 'changed while it was being stored');
      expect(u.has(first)).to.equal(false);
    }
    // Strings that end exactly at the room's end and are whole, ASCII or not, are stored as given.
    for (const name of ['', 'a', 'plain ascii name', 'héllo wörld', '\u{1f600}', 'a'.repeat(1000)]) {
      expect(u.put(`k ${name}`, { name, admin: true })).to.equal('inserted');
      expect(u.get(`k ${name}`)).to.deep.equal({ name, admin: true });
    }
    expect(cache.pile.verify().ok).to.equal(true);
  });
});

describe('damaged cache entries', () => {
  it("a damaged key or value length word gives PILE_CORRUPT, never a neighbour's bytes", () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    try {
      const t = cache.table<string>('t');
      for (let i = 0; i < 20; i++) t.put(`k${i}`, `value ${i}`);
      const entryOf = (key: string): Buffer => {
        for (const e of cache.pile.entries()) {
          if (e.kind !== 'raw') continue;
          const b = cache.pile.rawBuffer(e.pointer);
          if (b.length > 48 && b.includes(Buffer.from(key)) && b.includes(Buffer.from(`value ${key.slice(1)}`))) return b;
        }
        throw new Error(`no entry for ${key}`);
      };
      const v = entryOf('k5');
      v.writeUInt32LE(v.readUInt32LE(40) + 64, 40);
      expectPileError(() => t.get('k5'), 'PILE_CORRUPT', 'value length');
      expectPileError(() => [...t.entries()], 'PILE_CORRUPT', 'value length');
      const k = entryOf('k7');
      k.writeUInt32LE(0xfffffff8, 36);
      expectPileError(() => [...t.keys()], 'PILE_CORRUPT', 'key length');
      expect(t.get('k3')).to.equal('value 3');
    } finally {
      cache.close();
    }
  });

  it('a damaged key type word gives PILE_CORRUPT, not a SyntaxError or RangeError from decoding the key', () => {
    const cache = openCache({ segmentSize: SEG, sweepIntervalSec: 0 });
    try {
      const t = cache.table<string>('t');
      t.put('key1', 'value 1');
      t.put(12n, 'value 2');
      const entry = (): Buffer => {
        for (const e of cache.pile.entries()) {
          if (e.kind !== 'raw') continue;
          const b = cache.pile.rawBuffer(e.pointer);
          if (b.length > 48 && b.includes(Buffer.from('value 1'))) return b;
        }
        throw new Error('no entry');
      };
      const type = entry().readUInt8(32); // E_KEY_TYPE
      entry().writeUInt8(3, 32); // a string key read as a bigint: 'key1' is not hex
      expectPileError(() => [...t.keys()], 'PILE_CORRUPT', 'bigint key');
      entry().writeUInt8(2, 32); // as a number: 4 bytes, not 8
      expectPileError(() => [...t.entries()], 'PILE_CORRUPT', 'number key');
      entry().writeUInt8(type, 32);
      expect([...t.keys()].sort()).to.deep.equal([12n, 'key1']);
    } finally {
      cache.close();
    }
  });
});
