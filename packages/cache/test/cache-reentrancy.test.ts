import { expect } from 'chai';
import fc from 'fast-check';
import { z } from 'zod';
import { compileSchema } from '@pile/core';
import { openCache, type PileCache } from '../src';
import { SEG, expectPileError } from './helpers';

const User = z.object({ name: z.string(), admin: z.boolean() });
/** The bytes of a User besides its name's: the fixed part of the room a put gives it. */
const FIXED = compileSchema(User).measureBound({ name: '', admin: true });

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
    expectPileError(() => u.put('grow', v), 'PILE_INVALID_VALUE', 'changed while it was being stored');
    expect(u.has('grow')).to.equal(false);
    for (let i = 0; i < 50; i++) expect(u.get(i)).to.deep.equal({ name: `user ${i}`, admin: i % 2 === 0 });
    expect(cache.pile.verify().ok).to.equal(true);
  });

  it('a string that reads back different is stored whole as read when it fits its room, refused when not, never cut', () => {
    // Up to 4 KiB a value's room is its bound (3 bytes per UTF-16 unit of the first read); past
    // it, its exact size, so the second string can end exactly at the room's end, where the
    // encoder's ASCII shortcut must see non-ASCII bytes and find the write cut.
    const u = cache.table('u', { schema: User });
    const twice = (first: string, second: string) => {
      // A value past 4 KiB is measured twice (a bound, then exactly): `first` until it is written.
      const measures = FIXED + 3 * first.length <= 4096 ? 1 : 2;
      let reads = 0;
      return {
        get name() {
          return reads++ < measures ? first : second;
        },
        admin: false,
      };
    };
    const a = (n: number): string => 'a'.repeat(n);
    const stored: [string, string][] = [
      ['aaaa', 'éaaa'],
      ['abcdefgh', 'abcdefg€'],
      ['xy', '\u{1f600}'],
      ['xy', '\u{1f600}a'],
      ['ab', '€€'], // 6 bytes: just fits the bound of 2 units
      [a(1300), '€'.repeat(1300)], // bound 3,900 bytes (+ the fixed part): still a bound, just fits
      [a(2000), a(1998) + 'é'], // exact room of 2,000 bytes, ends at its end
      [a(2000), a(1000)],
    ];
    for (const [i, [first, second]] of stored.entries()) {
      expect(u.put(`s${i}`, twice(first, second))).to.equal('inserted');
      expect(u.get(`s${i}`)).to.deep.equal({ name: second, admin: false });
    }
    const refused: [string, string, string][] = [
      ['x', '\u{1f600}', 'changed while it was being stored'], // 4 bytes past the bound of 3
      ['ab', '€€a', 'changed while it was being stored'],
      [a(1300), '€'.repeat(1300) + 'a', 'changed while it was being stored'],
      [a(2000), 'é' + a(1999), 'changed while it was being stored'], // one byte past the exact room
      [a(2000), a(1999) + 'é', 'changed while it was being stored'], // cut in its last character
      [a(2000), a(1999) + '\u{1f600}', 'changed while it was being stored'],
      ['ab', 'a\ud800', 'lone surrogate'],
      [a(2000), a(1998) + '\udc00', 'lone surrogate'],
    ];
    for (const [i, [first, second, message]] of refused.entries()) {
      expectPileError(() => u.put(`r${i}`, twice(first, second)), 'PILE_INVALID_VALUE', message);
      expect(u.has(`r${i}`)).to.equal(false);
    }
    // Strings read the same twice, ending at the room's end when exact, are stored as given.
    for (const name of [
      '',
      'a',
      'plain ascii name',
      'héllo wörld',
      '\u{1f600}',
      a(1000),
      a(2000),
      '€'.repeat(1400),
      '\u{1f600}'.repeat(700),
    ]) {
      expect(u.put(`k ${name}`, { name, admin: true })).to.equal('inserted');
      expect(u.get(`k ${name}`)).to.deep.equal({ name, admin: true });
    }
    expect(cache.pile.verify().ok).to.equal(true);
  });

  it('property: a typed value read twice is stored as its second read when that fits the room of its first, else refused', () => {
    const u = cache.table('u', { schema: User });
    const utf8 = (s: string): number => Buffer.byteLength(s);
    const str = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: 'binary', minLength: 1300, maxLength: 1500 }));
    let n = 0;
    fc.assert(
      fc.property(str, str, (first, second) => {
        // The room: a bound of 3 bytes per unit while the whole value's bound stays within 4 KiB,
        // else the exact size.
        const bound = FIXED + 3 * first.length <= 4096;
        const room = bound ? 3 * first.length : utf8(first);
        const key = `p${n++}`;
        let reads = 0;
        const v = {
          get name() {
            return reads++ < (bound ? 1 : 2) ? first : second;
          },
          admin: true,
        };
        if (second.isWellFormed() && utf8(second) <= room) {
          expect(u.put(key, v)).to.equal('inserted');
          expect(u.get(key)).to.deep.equal({ name: second, admin: true });
        } else {
          expectPileError(() => u.put(key, v), 'PILE_INVALID_VALUE');
          expect(u.has(key)).to.equal(false);
        }
      }),
      { numRuns: 300 },
    );
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
