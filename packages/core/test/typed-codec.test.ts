import { expect } from 'chai';
import { z } from 'zod';
import {
  type CompiledSchema,
  type SchemaDescriptor,
  compileSchema,
  isCompatibleEvolution,
  schemaFingerprint,
} from '../src/schema/SchemaCompiler';
import { expectPileError } from './fixtures/expect-error';

const SENTINEL = 0xee;

interface Written {
  buf: Buffer;
  view: DataView;
  offset: number;
  length: number;
}

/** Measures and encodes into a sentinel-filled buffer, checking exactly `measure()` bytes were written. */
function write<T>(codec: CompiledSchema<T>, value: T, offset = 16): Written {
  const length = codec.measure(value);
  const buf = Buffer.alloc(offset + length + 16, SENTINEL);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const end = codec.encode(value, buf, view, offset, offset + length);
  expect(end - offset).to.equal(length);
  for (let i = 0; i < offset; i++) expect(buf[i], `byte ${i} before the record`).to.equal(SENTINEL);
  for (let i = end; i < buf.length; i++) expect(buf[i], `byte ${i} after the record`).to.equal(SENTINEL);
  return { buf, view, offset, length };
}

function read<T>(codec: CompiledSchema<T>, w: Written): T {
  return codec.decode(w.buf, w.view, w.offset, w.length);
}

function roundTrip<T>(codec: CompiledSchema<T>, value: T): T {
  return read(codec, write(codec, value));
}

/** measure() must refuse before anything reaches the buffer. */
function expectViolation<T>(codec: CompiledSchema<T>, value: unknown, text: string): void {
  const buf = Buffer.alloc(4096, SENTINEL);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  expectPileError(
    () => {
      codec.measure(value as T);
      codec.encode(value as T, buf, view, 8, buf.length);
    },
    'PILE_SCHEMA_VIOLATION',
    text,
  );
  expect(buf.every((b) => b === SENTINEL)).to.equal(true);
  // The pile's put checks through measureBound: it must refuse the same values, with the same message.
  const viaBound = expectPileError(() => codec.measureBound(value as T), 'PILE_SCHEMA_VIOLATION', text);
  expect(viaBound.message).to.equal(expectPileError(() => codec.measure(value as T), 'PILE_SCHEMA_VIOLATION').message);
}

/** Checks every value round-trips alone in a one-field record, and field() agrees with decode(). */
function checkValues<S extends z.ZodType>(schema: S, values: readonly z.output<S>[]): void {
  const codec = compileSchema(z.object({ v: schema, after: z.number() })) as unknown as CompiledSchema<{ v: unknown; after: number }>;
  for (const value of values) {
    const w = write(codec, { v: value, after: 42 });
    expect(read(codec, w)).to.deep.equal(value === undefined ? { after: 42 } : { v: value, after: 42 });
    expect(codec.field(w.buf, w.view, w.offset, w.length, 'v')).to.deep.equal(value);
    expect(codec.field(w.buf, w.view, w.offset, w.length, 'after')).to.equal(42);
  }
}

function kindOf(schema: z.ZodType): string {
  const d = compileSchema(z.object({ v: schema })).descriptor;
  return d.fields[0]?.type.kind ?? '';
}

describe('typed codec', () => {
  describe('round trip per type', () => {
    it('numbers as float64, exact for edge values', () => {
      expect(kindOf(z.number())).to.equal('float64');
      expect(kindOf(z.number().int())).to.equal('float64');
      checkValues(z.number(), [
        0,
        -0,
        1.5,
        -1e-300,
        NaN,
        Infinity,
        -Infinity,
        2 ** 53 - 1,
        -(2 ** 53) + 1,
        Number.MIN_VALUE,
        Number.MAX_VALUE,
      ]);
      checkValues(z.number().int(), [0, -0, 2 ** 53 - 1, -(2 ** 53) + 1, 2 ** 31, -(2 ** 31)]);
    });

    it('bounded integers as int32, keeping -0', () => {
      const small = z.number().int().min(-1000).max(1000);
      expect(kindOf(small)).to.equal('int32');
      expect(kindOf(z.number().int().gt(-5).lt(5))).to.equal('int32');
      expect(
        kindOf(
          z
            .number()
            .int()
            .nonnegative()
            .max(2 ** 31 - 1),
        ),
      ).to.equal('int32');
      // int32's full range leaves no spare value for -0, and uint32 exceeds int32: both stay exact as float64.
      expect(kindOf(z.int32())).to.equal('float64');
      expect(kindOf(z.uint32())).to.equal('float64');
      expect(
        kindOf(
          z
            .number()
            .int()
            .max(2 ** 31),
        ),
      ).to.equal('float64');
      checkValues(small, [0, -0, -1000, 1000, 7, -7]);
      checkValues(
        z
          .number()
          .int()
          .min(-(2 ** 31) + 1)
          .max(2 ** 31 - 1),
        [2 ** 31 - 1, -(2 ** 31) + 1, -0],
      );
    });

    it('int32 fields refuse what they cannot hold, even without validate', () => {
      const codec = compileSchema(z.object({ n: z.number().int().min(0).max(100) }));
      expectViolation(codec, { n: 1.5 }, 'n: expected integer in [0, 100], got 1.5');
      expectViolation(codec, { n: 101 }, 'got 101');
      expectViolation(codec, { n: -1 }, 'got -1');
      expectViolation(codec, { n: NaN }, 'got NaN');
      expectViolation(codec, { n: '5' }, 'n: expected number, got string');
    });

    it('strings as UTF-8, including empty, long, non-BMP and NUL', () => {
      checkValues(z.string(), [
        '',
        'a',
        'héllo wörld',
        '🎉👍🏽 family 👨‍👩‍👧',
        '\u0000x\u0000',
        'x'.repeat(100_000),
        '中文字符',
        '\uFFFF\u{10FFFF}',
      ]);
    });

    it('refuses lone surrogates (UTF-8 cannot hold them; they would read back as U+FFFD)', () => {
      const codec = compileSchema(z.object({ s: z.string() }));
      const buf = Buffer.alloc(64);
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      expectPileError(
        () => codec.encode({ s: 'a\uD800b\uDC00' }, buf, view, 0, 64),
        'PILE_INVALID_VALUE',
        's: a string with a lone surrogate (U+D800 at index 1)',
      );
      expect(roundTrip(codec, { s: 'a\uD83D\uDE00b' })).to.deep.equal({ s: 'a\uD83D\uDE00b' });
    });

    it('refuses a lone surrogate after the bytes before it are written, and a string cut short by the end of the block', () => {
      // encode checks a string after writing it, and only when its byte count is not its length
      // (an ASCII string is well-formed) or the write came within 3 bytes of the end.
      const codec = compileSchema(z.object({ s: z.string() }));
      const buf = Buffer.alloc(128);
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      const lone = 's: a string with a lone surrogate (U+DC00 at index 3)';
      expectPileError(() => codec.encode({ s: 'abc\uDC00' }, buf, view, 0, 128), 'PILE_INVALID_VALUE', lone);
      // Cut short by `end` and ill-formed: the surrogate is named, as before the write.
      expectPileError(() => codec.encode({ s: 'abc\uDC00' + 'x'.repeat(60) }, buf, view, 0, 40), 'PILE_INVALID_VALUE', lone);
      expectPileError(() => codec.encode({ s: 'x'.repeat(60) }, buf, view, 0, 40), 'PILE_INVALID_VALUE', 'no longer fits the 40 bytes');
      expect(roundTrip(codec, { s: 'x'.repeat(60) })).to.deep.equal({ s: 'x'.repeat(60) });
    });

    it('booleans', () => {
      checkValues(z.boolean(), [true, false]);
    });

    it('bigints of any size; bounds within int64 keep the 8-byte int64 layout and refuse values out of range', () => {
      expect(kindOf(z.bigint())).to.equal('bigint');
      checkValues(z.bigint(), [0n, -1n, 1n, 2n ** 63n - 1n, -(2n ** 63n), 123456789012345678n, 2n ** 63n, -(2n ** 63n) - 1n, 2n ** 200n]);
      const bounded = z
        .bigint()
        .min(-(2n ** 63n))
        .max(2n ** 63n - 1n);
      expect(kindOf(bounded)).to.equal('int64');
      checkValues(bounded, [0n, -1n, 2n ** 63n - 1n, -(2n ** 63n)]);
      const codec = compileSchema(z.object({ b: bounded }));
      expectViolation(codec, { b: 2n ** 63n }, 'b: expected bigint in int64 range, got 9223372036854775808n');
      expectViolation(codec, { b: -(2n ** 63n) - 1n }, 'int64 range');
      expectViolation(compileSchema(z.object({ b: z.bigint() })), { b: 5 }, 'b: expected bigint, got number');
    });

    it('unsigned 64-bit bigints as uint64', () => {
      expect(kindOf(z.uint64())).to.equal('uint64');
      checkValues(z.uint64(), [0n, 2n ** 64n - 1n, 2n ** 63n]);
      expectViolation(compileSchema(z.object({ b: z.uint64() })), { b: -1n }, 'uint64 range');
    });

    it('dates as float64 milliseconds, Invalid Date included', () => {
      checkValues(z.date(), [new Date(0), new Date(-8.64e15), new Date(8.64e15), new Date(1700000000123), new Date(NaN)]);
      const codec = compileSchema(z.object({ d: z.date() }));
      const back = roundTrip(codec, { d: new Date(NaN) });
      expect(back.d).to.be.instanceOf(Date);
      expect(Number.isNaN(back.d.getTime())).to.equal(true);
      expectViolation(codec, { d: 12 }, 'd: expected Date, got number');
    });

    it('enums, literals and unions of literals as an index', () => {
      checkValues(z.enum(['red', 'green', 'blue']), ['red', 'green', 'blue']);
      checkValues(z.literal(5), [5]);
      checkValues(z.literal(['x', 1, true, null, 10n, -0.5]), ['x', 1, true, null, 10n, -0.5]);
      checkValues(z.union([z.literal('a'), z.literal(2), z.null()]), ['a', 2, null]);
      enum Color {
        Red = 1,
        Green = 2,
      }
      checkValues(z.enum(Color), [Color.Red, Color.Green]);
      const many = Array.from({ length: 300 }, (_, i) => `v${i}`) as [string, ...string[]];
      checkValues(z.enum(many), ['v0', 'v255', 'v256', 'v299']);
      const twenty = Array.from({ length: 20 }, (_, i) => `w${i}`) as [string, ...string[]];
      checkValues(z.enum(twenty), ['w0', 'w19']);
      const codec = compileSchema(z.object({ c: z.enum(['red', 'green']), m: z.enum(twenty).optional() }));
      expectViolation(codec, { c: 'blue' }, 'c: expected one of "red", "green", got "blue"');
      expectViolation(codec, { c: 'red', m: 'w20' }, 'm: expected one of');
    });

    it('nullable, optional and nullish', () => {
      checkValues(z.string().nullable(), ['x', '', null]);
      checkValues(z.number().nullish(), [1, null, undefined]);
      checkValues(z.union([z.string(), z.null()]), ['s', null]);
      const codec = compileSchema(z.object({ a: z.string().optional(), b: z.number().nullable(), c: z.date().nullish() }));
      expect(roundTrip(codec, { b: null })).to.deep.equal({ b: null });
      // An explicit undefined is stored as absent: the key is left out on decode.
      const back = roundTrip(codec, { a: undefined, b: 1, c: undefined });
      expect(back).to.deep.equal({ b: 1 });
      expect(Object.keys(back)).to.deep.equal(['b']);
      expect(roundTrip(codec, { a: 'x', b: 2, c: null })).to.deep.equal({ a: 'x', b: 2, c: null });
      expectViolation(codec, { b: undefined }, 'b: expected number | null, got undefined');
      expectViolation(codec, { a: null, b: 1 }, 'a: expected string | undefined, got null');
    });

    it('nested objects, including empty ones', () => {
      const codec = compileSchema(
        z.object({
          empty: z.object({}),
          a: z.object({ b: z.object({ c: z.string(), d: z.object({ e: z.boolean() }).optional() }), f: z.number() }),
          opt: z.object({ x: z.string(), y: z.array(z.number()) }).nullish(),
        }),
      );
      const values = [
        { empty: {}, a: { b: { c: 'deep', d: { e: true } }, f: 1 }, opt: { x: 'o', y: [1, 2] } },
        { empty: {}, a: { b: { c: '' }, f: -0 }, opt: null },
        { empty: {}, a: { b: { c: 'z' }, f: 2 } },
      ];
      for (const v of values) expect(roundTrip(codec, v)).to.deep.equal(v);
      expect(roundTrip(compileSchema(z.object({})), {})).to.deep.equal({});
    });

    it('arrays of every kind, including empty and nested', () => {
      checkValues(z.array(z.number()), [[], [1, -0, NaN], Array.from({ length: 1000 }, (_, i) => i / 3)]);
      checkValues(z.array(z.string()), [[], [''], ['a', 'bb', '🎉']]);
      checkValues(z.array(z.array(z.string())), [[], [[]], [['a'], [], ['b', 'c']]]);
      checkValues(z.array(z.object({ n: z.string(), q: z.number().optional() })), [[], [{ n: 'a' }, { n: '', q: 2 }]]);
      checkValues(z.array(z.object({})), [[], [{}, {}]]);
      checkValues(z.array(z.bigint().nullable()), [[1n, null, -(2n ** 63n)]]);
      checkValues(z.array(z.enum(['a', 'b'])), [['a', 'b', 'a']]);
      checkValues(z.array(z.boolean()), [[true, false, true]]);
      checkValues(z.array(z.date()), [[new Date(0), new Date(NaN)]]);
      checkValues(z.array(z.instanceof(Uint8Array)), [[new Uint8Array([1]), new Uint8Array(0)]]);
    });

    it('bytes: z.instanceof(Uint8Array) and z.instanceof(Buffer), decoded as copies', () => {
      checkValues(z.instanceof(Uint8Array), [new Uint8Array(0), new Uint8Array([0, 1, 255]), new Uint8Array(10_000).fill(7)]);
      const codec = compileSchema(z.object({ u: z.instanceof(Uint8Array), b: z.instanceof(Buffer) }));
      const w = write(codec, { u: Buffer.from([1, 2]), b: Buffer.from('hi') });
      const back = read(codec, w);
      expect(back.u.constructor).to.equal(Uint8Array);
      expect(Buffer.isBuffer(back.b)).to.equal(true);
      expect([...back.u]).to.deep.equal([1, 2]);
      expect(back.b.toString()).to.equal('hi');
      w.buf.fill(0);
      expect([...back.u]).to.deep.equal([1, 2]);
      expect(back.b.toString()).to.equal('hi');
      expectViolation(codec, { u: [1, 2], b: Buffer.alloc(0) }, 'u: expected Uint8Array, got array');
    });

    it('wrappers that do not change the output type', () => {
      const codec = compileSchema(
        z.object({
          d: z.string().default('x'),
          r: z.array(z.number()).readonly(),
          c: z.number().catch(0),
          l: z.lazy(() => z.object({ q: z.boolean() })),
          p: z.string().pipe(z.email()),
          t: z.templateLiteral(['id-', z.number()]),
          n: z.string().optional().nonoptional(),
        }),
      );
      const v = { d: 'y', r: [1], c: 2, l: { q: true }, p: 'a@b.co', t: 'id-5' as const, n: 'n' };
      expect(roundTrip(codec, v)).to.deep.equal(v);
      expect(codec.descriptor.fields.map((f) => f.type.kind)).to.deep.equal([
        'string',
        'array',
        'float64',
        'object',
        'string',
        'string',
        'string',
      ]);
    });

    it('writes at any aligned offset and decodes records packed back to back', () => {
      const codec = compileSchema(z.object({ id: z.number(), s: z.string() }));
      const buf = Buffer.alloc(1024);
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      const spots: [number, number][] = [];
      let off = 0;
      for (let i = 0; i < 10; i++) {
        const v = { id: i, s: 'x'.repeat(i) };
        const n = codec.measure(v);
        codec.encode(v, buf, view, off, off + n);
        spots.push([off, n]);
        off = (off + n + 7) & ~7;
      }
      spots.forEach(([o, n], i) => expect(codec.decode(buf, view, o, n)).to.deep.equal({ id: i, s: 'x'.repeat(i) }));
    });

    it('generated code is safe with hostile field names and literals', () => {
      const names = ['"); throw 1; ("', '\\', '__proto__x', 'a b', '\u2028', "it's"];
      const shape: Record<string, z.ZodType> = {};
      for (const n of names) shape[n] = z.literal(['"); throw 1; //', '\n']);
      const codec = compileSchema(z.object(shape));
      const v: Record<string, string> = {};
      names.forEach((n, i) => (v[n] = i % 2 === 0 ? '"); throw 1; //' : '\n'));
      expect(roundTrip(codec, v)).to.deep.equal(v);
    });
  });

  describe('violations', () => {
    const codec = compileSchema(
      z.object({
        id: z.number(),
        name: z.string(),
        items: z.array(z.object({ name: z.string(), qty: z.number() })),
        meta: z.object({ ok: z.boolean() }),
      }),
    );
    const good = { id: 1, name: 'n', items: [{ name: 'a', qty: 1 }], meta: { ok: true } };

    it('name the path of a wrong type', () => {
      const items = [0, 1, 2, 3].map((i) => ({ name: i === 3 ? 5 : 'x', qty: i }));
      expectViolation(codec, { ...good, items }, 'items[3].name: expected string, got number');
      expectViolation(codec, { ...good, meta: { ok: 'yes' } }, 'meta.ok: expected boolean, got string');
      expectViolation(codec, { ...good, meta: null }, 'meta: expected object, got null');
      expectViolation(codec, { ...good, items: {} }, 'items: expected array, got object');
      expectViolation(codec, { ...good, items: [[]] }, 'items[0]: expected object, got array');
    });

    it('report a missing required field', () => {
      const { name: _omit, ...rest } = good;
      expectViolation(codec, rest, 'name: expected string, got undefined');
    });

    it('refuse a non-object record', () => {
      expectViolation(codec, null, '(root): expected object, got null');
      expectViolation(codec, [good], '(root): expected object, got array');
      expectViolation(codec, 'str', '(root): expected object, got string');
    });

    it('refuse a non-object record in encode() called alone, and encodeMeasured() write what encode() writes', () => {
      // encode() keeps the root's check that encodeMeasured() (for writers that measured first) leaves out.
      const buf = Buffer.alloc(4096, SENTINEL);
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      for (const [bad, got] of [
        [null, 'null'],
        [[good], 'array'],
        ['str', 'string'],
      ] as const) {
        expectPileError(
          () => codec.encode(bad as unknown as typeof good, buf, view, 8, buf.length),
          'PILE_SCHEMA_VIOLATION',
          `(root): expected object, got ${got}`,
        );
      }
      expect(buf.every((b) => b === SENTINEL)).to.equal(true);
      const length = codec.measure(good);
      const other = Buffer.alloc(4096, SENTINEL);
      const otherView = new DataView(other.buffer, other.byteOffset, other.byteLength);
      expect(codec.encodeMeasured(good, other, otherView, 8, 8 + length)).to.equal(codec.encode(good, buf, view, 8, 8 + length));
      expect(other.equals(buf)).to.equal(true);
    });

    it('ignore extra fields, like zod strip', () => {
      expect(roundTrip(codec, { ...good, extra: 1, items: [{ name: 'b', qty: 2, more: true }] } as unknown as typeof good)).to.deep.equal({
        ...good,
        items: [{ name: 'b', qty: 2 }],
      });
    });

    it('run zod refinements only with validate: true', () => {
      const schema = z.object({ name: z.string().min(3), tags: z.array(z.string().refine((s) => s !== 'bad', 'no bad tags')) });
      const loose = compileSchema(schema);
      const strict = compileSchema(schema, { validate: true });
      expect(roundTrip(loose, { name: 'ab', tags: ['bad'] })).to.deep.equal({ name: 'ab', tags: ['bad'] });
      expectViolation(strict, { name: 'ab', tags: [] }, 'name: ');
      expectViolation(strict, { name: 'abc', tags: ['ok', 'bad'] }, 'tags[1]: no bad tags');
      expectViolation(strict, { name: 5, tags: [] }, 'name: ');
      expect(roundTrip(strict, { name: 'abc', tags: ['ok'] })).to.deep.equal({ name: 'abc', tags: ['ok'] });
      // zod's own checks: z.number() refuses NaN, which the codec alone stores fine.
      expectViolation(compileSchema(z.object({ n: z.number() }), { validate: true }), { n: NaN }, 'n: ');
    });
  });

  describe('unsupported schemas', () => {
    it('are refused at compile time, naming the path', () => {
      const cases: [z.ZodType, string][] = [
        [z.object({ tags: z.array(z.map(z.string(), z.number())) }), 'schema.tags[]: z.map is not supported'],
        [z.object({ a: z.any() }), 'schema.a: z.any is not supported'],
        [z.object({ a: z.unknown() }), 'schema.a: z.unknown is not supported'],
        [z.object({ a: z.set(z.string()) }), 'schema.a: z.set'],
        [z.object({ a: z.record(z.string(), z.string()) }), 'schema.a: z.record'],
        [z.object({ a: z.tuple([z.string()]) }), 'schema.a: z.tuple'],
        [z.object({ a: z.string().transform((s) => s.length) }), 'schema.a: transforms are not supported'],
        [z.object({ a: z.union([z.string(), z.number()]) }), 'schema.a: z.union'],
        [z.object({ a: z.custom<Uint8Array>() }), 'schema.a: z.custom is not supported'],
        [z.object({ a: z.intersection(z.object({}), z.object({})) }), 'schema.a: z.intersection'],
        [z.looseObject({ a: z.string() }), 'schema: objects with a catchall'],
        [z.object({ a: z.symbol() }), 'schema.a: z.symbol'],
        [z.string() as z.ZodType, 'schema: the top level must be a z.object'],
        [z.object({}).optional() as z.ZodType, 'top level must be a z.object'],
      ];
      for (const [schema, text] of cases) expectPileError(() => compileSchema(schema), 'PILE_INVALID_OPTION', text);
    });

    it('refuses recursive schemas', () => {
      interface Node {
        name: string;
        children: Node[];
      }
      const node: z.ZodType<Node> = z.lazy(() => z.object({ name: z.string(), children: z.array(node) }));
      expectPileError(() => compileSchema(z.object({ root: node })), 'PILE_INVALID_OPTION', 'recursive schemas are not supported');
    });

    it('accepts strict objects', () => {
      const codec = compileSchema(z.strictObject({ a: z.string() }));
      expect(roundTrip(codec, { a: 'x' })).to.deep.equal({ a: 'x' });
    });
  });

  describe('field()', () => {
    const schema = z.object({
      f: z.number(),
      i: z.number().int().min(0).max(10),
      s: z.string(),
      b: z.boolean(),
      big: z.bigint(),
      d: z.date(),
      e: z.enum(['a', 'b']),
      n: z.string().nullable(),
      o: z.number().optional(),
      obj: z.object({ x: z.string(), y: z.array(z.number()) }),
      arr: z.array(z.object({ k: z.string() })),
      u8: z.instanceof(Uint8Array),
    });
    const codec = compileSchema(schema);
    const value: z.output<typeof schema> = {
      f: -0,
      i: 7,
      s: 'str 🎉',
      b: true,
      big: -(2n ** 62n),
      d: new Date(123),
      e: 'b',
      n: null,
      obj: { x: 'x', y: [1, 2] },
      arr: [{ k: '' }, { k: 'k' }],
      u8: new Uint8Array([9]),
    };

    it('reads every kind of field alone', () => {
      const w = write(codec, value);
      for (const key of Object.keys(schema.shape) as (keyof typeof value)[]) {
        expect(codec.field(w.buf, w.view, w.offset, w.length, key), key).to.deep.equal(value[key]);
      }
      expect(codec.field(w.buf, w.view, w.offset, w.length, 'o')).to.equal(undefined);
      const withO = write(codec, { ...value, o: 3 });
      expect(codec.field(withO.buf, withO.view, withO.offset, withO.length, 'o')).to.equal(3);
    });

    it('refuses an unknown key', () => {
      const w = write(codec, value);
      expectPileError(() => codec.field(w.buf, w.view, w.offset, w.length, 'nope' as 'f'), 'PILE_INVALID_OPTION', '"nope"');
    });
  });

  describe('schema evolution', () => {
    const v1 = z.object({ id: z.number(), name: z.string() });
    const v2 = z.object({
      id: z.number(),
      name: z.string(),
      tags: z.array(z.string()).optional(),
      meta: z.object({ a: z.number() }).nullish(),
    });
    const c1 = compileSchema(v1);
    const c2 = compileSchema(v2);

    it('reads an older record with a newer schema that appended optional fields', () => {
      const w = write(c1, { id: 1, name: 'old' });
      const back = read(c2, w);
      expect(back).to.deep.equal({ id: 1, name: 'old' });
      expect(Object.keys(back)).to.deep.equal(['id', 'name']);
      expect(c2.field(w.buf, w.view, w.offset, w.length, 'tags')).to.equal(undefined);
      expect(c2.field(w.buf, w.view, w.offset, w.length, 'meta')).to.equal(undefined);
      expect(c2.field(w.buf, w.view, w.offset, w.length, 'name')).to.equal('old');
    });

    it('reads a newer record with the older schema (extra fields skipped)', () => {
      const w = write(c2, { id: 2, name: 'new', tags: ['t'], meta: { a: 1 } });
      expect(read(c1, w)).to.deep.equal({ id: 2, name: 'new' });
      expect(read(c2, w)).to.deep.equal({ id: 2, name: 'new', tags: ['t'], meta: { a: 1 } });
    });

    it('refuses to decode an older record lacking a required field', () => {
      const c3 = compileSchema(v1.extend({ required: z.string() }));
      const w = write(c1, { id: 1, name: 'old' });
      expectPileError(() => read(c3, w), 'PILE_SCHEMA_MISMATCH', '"required"');
      expectPileError(() => c3.field(w.buf, w.view, w.offset, w.length, 'required'), 'PILE_SCHEMA_MISMATCH');
    });

    it('isCompatibleEvolution', () => {
      const d = (s: z.ZodObject): SchemaDescriptor => compileSchema(s).descriptor;
      expect(isCompatibleEvolution(c1.descriptor, c1.descriptor)).to.equal(true);
      expect(isCompatibleEvolution(c1.descriptor, c2.descriptor)).to.equal(true);
      expect(isCompatibleEvolution(c2.descriptor, c1.descriptor)).to.equal(false); // removed fields
      expect(isCompatibleEvolution(c1.descriptor, JSON.parse(JSON.stringify(c2.descriptor)))).to.equal(true);
      expect(isCompatibleEvolution(c1.descriptor, d(v1.extend({ req: z.string() })))).to.equal(false);
      expect(isCompatibleEvolution(c1.descriptor, d(v1.extend({ n: z.string().nullable() })))).to.equal(false); // nullable is not optional
      expect(isCompatibleEvolution(c1.descriptor, d(z.object({ id: z.string(), name: z.string() })))).to.equal(false);
      expect(isCompatibleEvolution(c1.descriptor, d(z.object({ name: z.string(), id: z.number() })))).to.equal(false);
      expect(isCompatibleEvolution(c1.descriptor, d(z.object({ id: z.number(), title: z.string() })))).to.equal(false);
      expect(isCompatibleEvolution(c1.descriptor, d(z.object({ id: z.number(), name: z.string().optional() })))).to.equal(false);
      expect(isCompatibleEvolution(c1.descriptor, d(z.object({ id: z.number().int().min(0).max(9), name: z.string() })))).to.equal(false);
      // Only the top level may grow: a field added to a nested object moves every later slot.
      const n1 = z.object({ o: z.object({ a: z.number() }) });
      const n2 = z.object({ o: z.object({ a: z.number(), b: z.number().optional() }) });
      expect(isCompatibleEvolution(d(n1), d(n2))).to.equal(false);
      expect(isCompatibleEvolution({} as SchemaDescriptor, c1.descriptor)).to.equal(false);
    });
  });

  describe('fingerprint', () => {
    const schema = z.object({ id: z.number(), name: z.string(), tags: z.array(z.enum(['a', 'b'])).optional() });

    it('is stable across compilations, JSON round trips and processes', () => {
      const a = compileSchema(schema);
      const b = compileSchema(z.object({ id: z.number(), name: z.string(), tags: z.array(z.enum(['a', 'b'])).optional() }));
      expect(a.fingerprint).to.match(/^[0-9a-f]{64}$/);
      expect(b.fingerprint).to.equal(a.fingerprint);
      expect(schemaFingerprint(JSON.parse(JSON.stringify(a.descriptor)))).to.equal(a.fingerprint);
      // Pinned: a change here means persisted piles would no longer recognise their schema.
      expect(a.fingerprint).to.equal(PINNED_FINGERPRINT);
    });

    it('ignores validation-only differences and follows layout differences', () => {
      const base = compileSchema(schema).fingerprint;
      expect(
        compileSchema(z.object({ id: z.number().positive(), name: z.string().min(2), tags: z.array(z.enum(['a', 'b'])).optional() }))
          .fingerprint,
      ).to.equal(base);
      expect(
        compileSchema(z.object({ id: z.number(), name: z.string(), tags: z.array(z.enum(['b', 'a'])).optional() })).fingerprint,
      ).to.not.equal(base);
      expect(
        compileSchema(z.object({ id: z.bigint(), name: z.string(), tags: z.array(z.enum(['a', 'b'])).optional() })).fingerprint,
      ).to.not.equal(base);
    });
  });

  describe('corrupt records', () => {
    const codec = compileSchema(z.object({ s: z.string(), e: z.enum(['a', 'b']), o: z.number().optional() }));

    it('are reported as PILE_CORRUPT, not as garbage', () => {
      const w = write(codec, { s: 'hello', e: 'a', o: 1 });
      expectPileError(() => codec.decode(w.buf, w.view, w.offset, 4), 'PILE_CORRUPT');
      expectPileError(() => codec.decode(w.buf, w.view, w.offset, w.length - 1), 'PILE_CORRUPT');
      expectPileError(() => codec.field(w.buf, w.view, w.offset, w.length - 1, 's'), 'PILE_CORRUPT');
      const eSlot = w.offset + 2 + 8;
      w.buf[eSlot] = 9;
      expectPileError(() => codec.decode(w.buf, w.view, w.offset, w.length), 'PILE_CORRUPT');
      w.buf[eSlot] = 0;
      w.buf[eSlot + 1] = 7; // presence tag of `o`
      expectPileError(() => codec.decode(w.buf, w.view, w.offset, w.length), 'PILE_CORRUPT');
    });
  });
});

const PINNED_FINGERPRINT = '847f366cba16fa7e34aa3992092baa1a6754689a5c3565f2e43d736aea33e8cf';
