import { expect } from 'chai';
import { openPile, type Pile } from '../src/Pile';
import { PileError } from '../src/PileError';
import type { PilePointer } from '../src/records/PilePointer';

const MiB = 1 << 20;

/** Bytes a block takes for a payload of `length`: a 16-byte header, 8-byte aligned, at least 32. */
function blockBytes(length: number): number {
  return Math.max(32, (16 + length + 7) & ~7);
}

function expectExactStats(pile: Pile): void {
  const report = pile.verify();
  expect(report.statsErrors).to.deep.equal([]);
  expect(report.ok, JSON.stringify(report)).to.equal(true);
  const entries = [...pile.entries()];
  expect(entries.length).to.equal(pile.stats.objectCount);
  expect(new Set(entries.map((e) => e.pointer)).size).to.equal(entries.length);
}

describe('values', () => {
  let pile: Pile;
  beforeEach(() => {
    pile = openPile({ segmentSize: MiB });
  });
  afterEach(() => pile.close());

  describe('strings and bytes bypass serialization', () => {
    const strings = [
      '',
      'a',
      'hello, pile',
      'é',
      '日本語のテキスト',
      '😀',
      '𝄞 music 🎼 and 🇫🇷 flags',
      'a\u0000b',
      'x'.repeat(5000),
      '\u{10FFFF}',
    ];
    for (const s of strings) {
      it(`string ${JSON.stringify(s.length > 20 ? `${s.slice(0, 20)}...` : s)} round-trips as UTF-8`, () => {
        const p = pile.put(s);
        const back = pile.get(p);
        expect(back).to.be.a('string');
        expect(back).to.equal(s);
        expect(pile.sizeOf(p)).to.equal(Buffer.byteLength(s, 'utf8'));
        expect([...pile.entries()]).to.deep.equal([{ pointer: p, kind: 'string', size: Buffer.byteLength(s, 'utf8') }]);
      });
    }

    it('a string of non-BMP characters keeps its surrogate pairs', () => {
      const s = Array.from({ length: 300 }, (_, i) => String.fromCodePoint(0x1f300 + i)).join('');
      const p = pile.put(s);
      expect(pile.get(p)).to.equal(s);
      expect(pile.sizeOf(p)).to.equal(4 * 300);
    });

    it('a Buffer comes back a Buffer, a Uint8Array a Uint8Array (not a Buffer)', () => {
      const buf = Buffer.from([1, 2, 3, 250]);
      const u8 = new Uint8Array([9, 8, 7]);
      const pb = pile.put(buf);
      const pu = pile.put(u8);
      const b = pile.get<Buffer>(pb);
      const u = pile.get<Uint8Array>(pu);
      expect(Buffer.isBuffer(b)).to.equal(true);
      expect([...b]).to.deep.equal([1, 2, 3, 250]);
      expect(u).to.be.instanceOf(Uint8Array);
      expect(Buffer.isBuffer(u)).to.equal(false);
      expect([...u]).to.deep.equal([9, 8, 7]);
      expect(pile.sizeOf(pb)).to.equal(4);
      expect(pile.sizeOf(pu)).to.equal(3);
      const kinds = new Map([...pile.entries()].map((e) => [e.pointer, e.kind]));
      expect(kinds.get(pb)).to.equal('buffer');
      expect(kinds.get(pu)).to.equal('bytes');
    });

    it('empty bytes of both kinds, and views with an offset into a larger buffer', () => {
      const e1 = pile.put(Buffer.alloc(0));
      const e2 = pile.put(new Uint8Array(0));
      const backing = new Uint8Array(64).map((_, i) => i);
      const view = pile.put(backing.subarray(10, 20));
      const bufView = pile.put(Buffer.from(backing.buffer, 30, 5));
      expect(Buffer.isBuffer(pile.get(e1))).to.equal(true);
      expect(pile.get<Buffer>(e1).length).to.equal(0);
      expect(Buffer.isBuffer(pile.get(e2))).to.equal(false);
      expect(pile.get<Uint8Array>(e2).length).to.equal(0);
      expect([...pile.get<Uint8Array>(view)]).to.deep.equal([10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
      expect([...pile.get<Buffer>(bufView)]).to.deep.equal([30, 31, 32, 33, 34]);
    });

    it('get returns a copy: mutating it or the original does not change the record', () => {
      const src = Buffer.from('abcdef');
      const p = pile.put(src);
      src.fill(0);
      const a = pile.get<Buffer>(p);
      expect(a.toString()).to.equal('abcdef');
      a.fill(1);
      expect(pile.get<Buffer>(p).toString()).to.equal('abcdef');
    });

    it('stores exactly the payload bytes: stats count a 16-byte header, 8-byte alignment, nothing else', () => {
      const sizes = [0, 1, 7, 8, 15, 16, 17, 100, 1000, 4093];
      let allocated = 0;
      let utilized = 0;
      for (const n of sizes) {
        pile.put(Buffer.alloc(n, 1));
        pile.put('s'.repeat(n));
        allocated += 2 * blockBytes(n);
        utilized += 2 * n;
      }
      const st = pile.stats;
      expect(st.objectCount).to.equal(2 * sizes.length);
      expect(st.linkCount).to.equal(0);
      expect(st.allocatedBytes).to.equal(allocated);
      expect(st.utilizedBytes).to.equal(utilized);
      expect(st.overheadBytes).to.equal(allocated - utilized);
      expect(st.freeBytes).to.equal(st.segmentCount * (MiB - 64) - allocated);
      expectExactStats(pile);
    });
  });

  describe('other values go through msgpackr', () => {
    const values: [string, unknown][] = [
      ['numbers', [0, -1, 1, 255, 65536, -2147483649, 2 ** 53 - 1, 3.25, -0.5, Number.MAX_VALUE]],
      ['specials', [null, true, false, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]],
      ['a nested object', { name: 'n', tags: ['a', 'b'], nested: { deep: { deeper: [1, { x: 'y' }] } }, empty: {}, none: null }],
      ['a Date', new Date(1700000000123)],
      [
        'a Map',
        new Map<unknown, unknown>([
          [1, 'one'],
          ['two', { n: 2 }],
        ]),
      ],
      ['a Set', new Set([1, 'two', 3])],
      ['a bigint', 2n ** 63n - 1n],
      ['a bigint beyond 64 bits', 2n ** 70n + 5n],
      ['a Float64Array', new Float64Array([1.5, -2.25, Math.PI])],
      ['an Int32Array', new Int32Array([-1, 0, 2147483647])],
      ['bytes inside an object', { blob: Buffer.from([1, 2, 3]), list: [Buffer.from('x')] }],
      ['unicode keys and values', { ключ: 'значение', '😀': '🎉', '𝄞': '\u{10FFFF}' }],
      ['a number', 42],
      ['a float', 0.1],
      ['null', null],
      ['undefined', undefined],
    ];
    for (const [label, v] of values) {
      it(`${label} round-trips`, () => {
        const p = pile.put(v);
        expect(pile.get(p)).to.deep.equal(v);
        expect([...pile.entries()].map((e) => e.kind)).to.deep.equal(['msgpack']);
      });
    }

    it('a value msgpackr can not encode is PILE_INVALID_VALUE naming the value, and nothing is written', () => {
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      const before = pile.stats;
      try {
        pile.put(circular);
        expect.fail('a circular value was stored');
      } catch (err) {
        expect(err).to.be.instanceOf(PileError);
        expect((err as PileError).code).to.equal('PILE_INVALID_VALUE');
        expect((err as Error).message).to.include('value');
      }
      expect(pile.stats).to.deep.equal(before);
      // set() refuses it the same way and keeps the old value.
      const p = pile.put({ kept: true });
      expect(() => pile.set(p, circular))
        .to.throw(PileError)
        .with.property('code', 'PILE_INVALID_VALUE');
      expect(pile.get(p)).to.deep.equal({ kept: true });
      expect(pile.verify().ok).to.equal(true);
    });

    it('record structures are shared: a shape is stored once, not its keys in every record', () => {
      const make = (i: number) => ({
        aVeryLongFieldNameForTheFirstName: `f${i}`,
        anotherQuiteLongFieldName: i,
        yetAnotherLongishKey: i % 2 === 0,
      });
      const keyBytes = Object.keys(make(0)).join('').length;
      const ptrs = Array.from({ length: 100 }, (_, i) => pile.put(make(i)));
      for (let i = 0; i < ptrs.length; i++) {
        expect(pile.get(ptrs[i]!)).to.deep.equal(make(i));
        expect(pile.sizeOf(ptrs[i]!)).to.be.lessThan(keyBytes);
      }
    });
  });

  describe('set', () => {
    it('in place when the value fits: no link, no new space, pointer unchanged', () => {
      const p = pile.put('a'.repeat(100));
      const before = pile.stats;
      pile.set(p, 'b'.repeat(100));
      pile.set(p, 'c'.repeat(90));
      expect(pile.get(p)).to.equal('c'.repeat(90));
      expect(pile.sizeOf(p)).to.equal(90);
      const after = pile.stats;
      expect(after.linkCount).to.equal(0);
      expect(after.allocatedBytes).to.equal(before.allocatedBytes);
      expect(after.utilizedBytes).to.equal(before.utilizedBytes - 10);
      expectExactStats(pile);
    });

    it('grow links to a new block, grow further moves the body, shrink collapses back in place', () => {
      const other = pile.put('neighbour');
      const p = pile.put('small');
      const base = pile.stats;
      expect(base.allocatedBytes).to.equal(blockBytes(9) + blockBytes(5));

      pile.set(p, 'm'.repeat(500));
      let st = pile.stats;
      expect(pile.get(p)).to.equal('m'.repeat(500));
      expect(pile.sizeOf(p)).to.equal(500);
      expect(st.linkCount).to.equal(1);
      expect(st.objectCount).to.equal(2);
      // The head keeps its block (now holding the link), the value has a block of its own.
      expect(st.allocatedBytes).to.equal(base.allocatedBytes + blockBytes(500));
      expect([...pile.entries()]).to.deep.equal([
        { pointer: other, kind: 'string', size: 9 },
        { pointer: p, kind: 'string', size: 500 },
      ]);
      expectExactStats(pile);

      pile.set(p, 'n'.repeat(480)); // fits the body: stays there
      st = pile.stats;
      expect(pile.get(p)).to.equal('n'.repeat(480));
      expect(st.linkCount).to.equal(1);
      expect(st.allocatedBytes).to.equal(base.allocatedBytes + blockBytes(500));

      pile.set(p, 'L'.repeat(3000)); // outgrows the body: a new body, the old one freed
      st = pile.stats;
      expect(pile.get(p)).to.equal('L'.repeat(3000));
      expect(st.linkCount).to.equal(1);
      expect(st.allocatedBytes).to.equal(base.allocatedBytes + blockBytes(3000));
      expectExactStats(pile);

      pile.set(p, 'tiny'); // fits the head again: the link collapses, the body is freed
      st = pile.stats;
      expect(pile.get(p)).to.equal('tiny');
      expect(pile.sizeOf(p)).to.equal(4);
      expect(st.linkCount).to.equal(0);
      expect(st.objectCount).to.equal(2);
      expect(st.allocatedBytes).to.equal(base.allocatedBytes);
      expect(st.utilizedBytes).to.equal(base.utilizedBytes - 1);
      expect([...pile.entries()].map((e) => e.pointer)).to.deep.equal([other, p]);
      expectExactStats(pile);
      expect(pile.get(other)).to.equal('neighbour');
    });

    it('grow/shrink cycles keep linkCount and space exact', () => {
      const ptrs = Array.from({ length: 20 }, (_, i) => pile.put(`r${i}`));
      const base = pile.stats;
      for (let cycle = 0; cycle < 5; cycle++) {
        ptrs.forEach((p, i) => {
          if (i % 2 === 0) pile.set(p, { big: 'g'.repeat(200 + cycle * 50), i });
        });
        expect(pile.stats.linkCount).to.equal(10);
        expect(pile.stats.objectCount).to.equal(20);
        expectExactStats(pile);
        ptrs.forEach((p, i) => {
          if (i % 2 === 0) pile.set(p, `r${i}`);
        });
        expect(pile.stats.linkCount).to.equal(0);
        expect(pile.stats.allocatedBytes).to.equal(base.allocatedBytes);
        expectExactStats(pile);
      }
      ptrs.forEach((p, i) => expect(pile.get(p)).to.equal(`r${i}`));
      expect(pile.stats.segmentCount).to.equal(1);
    });

    it('may change the kind of a record', () => {
      const p = pile.put('text');
      const steps: unknown[] = [{ obj: 1 }, Buffer.from([1, 2]), new Uint8Array([3]), 'x'.repeat(300), 12345, 'back'];
      for (const v of steps) {
        pile.set(p, v);
        expect(pile.get(p)).to.deep.equal(v);
        const kind = typeof v === 'string' ? 'string' : Buffer.isBuffer(v) ? 'buffer' : v instanceof Uint8Array ? 'bytes' : 'msgpack';
        expect([...pile.entries()].map((e) => e.kind)).to.deep.equal([kind]);
      }
      expectExactStats(pile);
    });

    it('preallocate reserves room: a later larger set stays in place', () => {
      const p = pile.put('seed', { preallocate: 1000 });
      const st0 = pile.stats;
      expect(st0.allocatedBytes).to.equal(blockBytes(1000));
      expect(st0.utilizedBytes).to.equal(4);
      expect(st0.overheadBytes).to.equal(blockBytes(1000) - 4);
      expect(pile.sizeOf(p)).to.equal(4);
      pile.set(p, 'q'.repeat(1000));
      expect(pile.stats.linkCount).to.equal(0);
      expect(pile.stats.allocatedBytes).to.equal(st0.allocatedBytes);
      expect(pile.get(p)).to.equal('q'.repeat(1000));
      pile.set(p, 'q'.repeat(1001));
      expect(pile.stats.linkCount).to.equal(1);
      // A preallocation smaller than the value is no limit.
      const q = pile.put('z'.repeat(100), { preallocate: 10 });
      expect(pile.get(q)).to.equal('z'.repeat(100));
      expectExactStats(pile);
    });
  });

  describe('delete', () => {
    it('frees the block: stats return to what they were before the put', () => {
      pile.put('keep');
      const base = pile.stats;
      const p = pile.put({ some: 'object', n: 1 });
      expect(pile.delete(p)).to.equal(true);
      expect(pile.delete(p)).to.equal(false);
      expect(pile.stats).to.deep.equal(base);
      expectExactStats(pile);
    });

    it('of a linked record frees both the head and the body', () => {
      pile.put('keep');
      const base = pile.stats;
      const p = pile.put('small');
      pile.set(p, 'b'.repeat(2000));
      expect(pile.stats.allocatedBytes).to.equal(base.allocatedBytes + blockBytes(5) + blockBytes(2000));
      expect(pile.delete(p)).to.equal(true);
      const st = pile.stats;
      expect(st.allocatedBytes).to.equal(base.allocatedBytes);
      expect(st.freeBytes).to.equal(base.freeBytes);
      expect(st.linkCount).to.equal(0);
      expect(st.objectCount).to.equal(base.objectCount);
      expectExactStats(pile);
    });
  });

  describe('entries()', () => {
    it('yields every live record once, links counted once, with the size get would return', () => {
      const live = new Map<PilePointer, unknown>();
      for (let i = 0; i < 300; i++) live.set(pile.put(i % 3 === 0 ? `s${i}` : i % 3 === 1 ? { i } : Buffer.alloc(i % 50, i)), null);
      const ptrs = [...live.keys()];
      ptrs.forEach((p, i) => {
        if (i % 5 === 0) {
          pile.delete(p);
          live.delete(p);
        } else if (i % 5 === 1) pile.set(p, 'grown '.repeat(60));
      });
      const seen = [...pile.entries()];
      expect(seen.length).to.equal(live.size);
      expect(seen.length).to.equal(pile.stats.objectCount);
      expect(new Set(seen.map((e) => e.pointer))).to.deep.equal(new Set(live.keys()));
      for (const e of seen) expect(e.size).to.equal(pile.sizeOf(e.pointer));
      expect(pile.stats.linkCount).to.be.greaterThan(0);
      expect([...pile]).to.deep.equal(seen);
    });
  });
});
