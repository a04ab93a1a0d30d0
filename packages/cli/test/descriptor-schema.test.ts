import { expect } from 'chai';
import { compileSchema, type SchemaDescriptor } from '@pile/core';
import { z } from 'zod';
import { zodOfDescriptor } from '../src/DescriptorSchema';

describe('zodOfDescriptor: a zod schema of a stored layout', () => {
  it('has the same layout (descriptor and fingerprint) as the schema the layout was made from, for every kind', () => {
    const schemas = [
      z.object({ n: z.number(), i: z.int32(), s: z.string(), b: z.boolean(), d: z.date() }),
      z.object({ big: z.bigint(), i64: z.int64(), u64: z.uint64(), bytes: z.instanceof(Uint8Array) }),
      z.object({ e: z.enum(['a', 'b']), lit: z.literal([1, 2n, true, null]) }),
      z.object({ o: z.string().optional(), n: z.number().nullable(), nn: z.boolean().nullish() }),
      z.object({
        tags: z.array(z.string()),
        grid: z.array(z.array(z.int32())),
        parts: z.array(z.object({ sku: z.string(), q: z.int32().optional() })),
      }),
      z.object({ dims: z.object({ w: z.number(), h: z.number().optional(), at: z.object({ x: z.int() }) }) }),
    ];
    for (const schema of schemas) {
      const stored = compileSchema(schema);
      const rebuilt = compileSchema(zodOfDescriptor(stored.descriptor));
      expect(rebuilt.descriptor).to.deep.equal(stored.descriptor);
      expect(rebuilt.fingerprint).to.equal(stored.fingerprint);
    }
  });

  it('names the field path of a kind this build does not know: PILE_FORMAT_VERSION', () => {
    const descriptor = {
      codec: 'pile-typed',
      version: 1,
      fields: [{ name: 'dims', type: { kind: 'object', fields: [{ name: 'w', type: { kind: 'float128' } }] } }],
    } as unknown as SchemaDescriptor;
    expect(() => zodOfDescriptor(descriptor, "table 't': value"))
      .to.throw('table \'t\': value.dims.w: the stored layout has a field of kind "float128", which this build does not know')
      .with.property('code', 'PILE_FORMAT_VERSION');
  });
});
