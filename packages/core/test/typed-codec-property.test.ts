import { expect } from 'chai';
import fc from 'fast-check';
import { z } from 'zod';
import { compileSchema } from '../src/schema/SchemaCompiler';

const schema = z.object({
  id: z.number().int().min(-1_000_000).max(1_000_000),
  price: z.number(),
  name: z.string(),
  active: z.boolean(),
  big: z.bigint(),
  at: z.date(),
  kind: z.enum(['a', 'b', 'c']),
  note: z.string().nullish(),
  tags: z.array(z.string()),
  lines: z.array(z.object({ sku: z.string(), qty: z.number().int().min(0).max(1000), extra: z.array(z.number()).optional() })),
  blob: z.instanceof(Uint8Array),
  address: z.object({ city: z.string(), zip: z.number().nullable() }).optional(),
});
type Value = z.output<typeof schema>;

// Strings without lone surrogates: UTF-8 cannot hold those (they are refused, tested separately).
const text = fc.oneof(
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 200 }),
);
const value: fc.Arbitrary<Value> = fc.record(
  {
    id: fc.integer({ min: -1_000_000, max: 1_000_000 }).chain((n) => fc.constantFrom(n, n === 0 ? -0 : n)),
    price: fc.double(),
    name: text,
    active: fc.boolean(),
    big: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    at: fc.date(),
    kind: fc.constantFrom('a' as const, 'b' as const, 'c' as const),
    note: fc.option(text, { nil: null }),
    tags: fc.array(text, { maxLength: 8 }),
    lines: fc.array(
      fc.record(
        { sku: text, qty: fc.integer({ min: 0, max: 1000 }), extra: fc.array(fc.double(), { maxLength: 4 }) },
        { requiredKeys: ['sku', 'qty'] },
      ),
      { maxLength: 6 },
    ),
    blob: fc.uint8Array({ maxLength: 64 }),
    address: fc.record({ city: text, zip: fc.option(fc.double(), { nil: null }) }),
  },
  { requiredKeys: ['id', 'price', 'name', 'active', 'big', 'at', 'kind', 'tags', 'lines', 'blob'] },
);

describe('typed codec (property)', () => {
  const codec = compileSchema(schema);

  it('round-trips random values at random aligned offsets, writing exactly measure() bytes, at most measureBound()', () => {
    fc.assert(
      fc.property(value, fc.nat({ max: 512 }), (v, slot) => {
        const offset = slot * 8;
        const length = codec.measure(v);
        expect(codec.measureBound(v)).to.be.at.least(length);
        const buf = Buffer.alloc(offset + length + 8, 0xee);
        const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
        const end = codec.encode(v, buf, view, offset, offset + length);
        expect(end).to.equal(offset + length);
        expect(buf.subarray(0, offset).every((b) => b === 0xee)).to.equal(true);
        expect(buf.subarray(end).every((b) => b === 0xee)).to.equal(true);
        const back = codec.decode(buf, view, offset, length);
        expect(back).to.deep.equal(v);
        for (const key of Object.keys(schema.shape) as (keyof Value)[]) {
          expect(codec.field(buf, view, offset, length, key)).to.deep.equal(v[key]);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('encodes deterministically: equal values give equal bytes', () => {
    fc.assert(
      fc.property(value, (v) => {
        const length = codec.measure(v);
        const a = Buffer.alloc(length, 0x00);
        const b = Buffer.alloc(length, 0xff);
        codec.encode(v, a, new DataView(a.buffer, a.byteOffset, a.byteLength), 0, length);
        codec.encode(v, b, new DataView(b.buffer, b.byteOffset, b.byteLength), 0, length);
        expect(a.equals(b)).to.equal(true);
      }),
      { numRuns: 200 },
    );
  });
});
