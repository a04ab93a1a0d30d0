import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile, PileError } from '../src';

const Order = z.object({
  id: z.number().int().min(0).max(1_000_000),
  customer: z.string(),
  total: z.number(),
  placed: z.date(),
  status: z.enum(['new', 'paid', 'shipped']),
  note: z.string().nullable(),
  lines: z.array(z.object({ sku: z.string(), qty: z.number().int(), big: z.bigint() })),
  blob: z.instanceof(Uint8Array),
  gift: z.boolean().optional(),
});

describe('inspect: typed records read back without their schema', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-inspect-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const order = {
    id: 42,
    customer: 'Ada 🚀',
    total: -0,
    placed: new Date(1_700_000_000_000),
    status: 'paid' as const,
    note: null,
    lines: [
      { sku: 'A-1', qty: 3, big: 2n ** 60n },
      { sku: '', qty: -1, big: -5n },
    ],
    blob: new Uint8Array([1, 2, 255]),
  };

  it('a process that never registered the schema decodes typed records by the stored layout', () => {
    let pile = openPile({ dir, segmentSize: 1 << 20 });
    const ptr = pile.schema('order', Order).put(order);
    const plain = pile.put({ not: 'typed' });
    pile.close();

    pile = openPile({ dir });
    try {
      expect(() => pile.get(ptr))
        .to.throw(PileError)
        .with.property('code', 'PILE_SCHEMA_MISMATCH');
      const seen = pile.inspect(ptr) as typeof order;
      expect(seen).to.deep.equal(order);
      expect(Object.is(seen.total, -0)).to.equal(true);
      expect(pile.inspect(plain)).to.deep.equal({ not: 'typed' });
      // Once registered, inspect uses the registered codec like get.
      pile.schema('order', Order);
      expect(pile.inspect(ptr)).to.deep.equal(pile.get(ptr));
    } finally {
      pile.close();
    }
  });

  it('records of an older version of an evolved schema read with the added field absent', () => {
    let pile = openPile({ dir, segmentSize: 1 << 20 });
    const V1 = z.object({ a: z.number(), b: z.string() });
    const old = pile.schema('thing', V1).put({ a: 1, b: 'x' });
    const V2 = z.object({ a: z.number(), b: z.string(), c: z.number().optional() });
    const neu = pile.schema('thing', V2).put({ a: 2, b: 'y', c: 3 });
    pile.close();
    pile = openPile({ dir, readonly: true });
    try {
      expect(pile.inspect(old)).to.deep.equal({ a: 1, b: 'x' });
      expect(pile.inspect(neu)).to.deep.equal({ a: 2, b: 'y', c: 3 });
      expect(() => pile.inspect(0 as never))
        .to.throw(PileError)
        .with.property('code', 'PILE_INVALID_POINTER');
    } finally {
      pile.close();
    }
  });
});
