import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile } from '../src/Pile';
import { expectPileError } from './fixtures/expect-error';

describe('schema mismatch messages', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-mismatch-'));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** Registers `stored` under 'user', reopens the pile and registers `given`; the mismatch's message. */
  function mismatch(stored: z.ZodObject, given: z.ZodObject): string {
    const dir = path.join(tmp, `p${fs.readdirSync(tmp).length}`);
    const first = openPile({ dir, segmentSize: 1 << 20 });
    first.schema('user', stored);
    first.close();
    const again = openPile({ dir });
    try {
      return expectPileError(() => again.schema('user', given), 'PILE_SCHEMA_MISMATCH', "schema 'user'").message;
    } finally {
      again.close();
    }
  }

  it('names the first differing field with the stored and the given type', () => {
    const msg = mismatch(z.object({ id: z.number().int(), name: z.string() }), z.object({ id: z.number().int(), name: z.number() }));
    expect(msg).to.contain('field "name": stored string, given float64');
    expect(msg).to.not.match(/^PILE_/);
  });

  it('names a nested path, inside arrays and optional fields too', () => {
    const stored = z.object({ id: z.string(), address: z.object({ city: z.string(), zip: z.number().int() }) });
    const given = z.object({ id: z.string(), address: z.object({ city: z.string(), zip: z.string() }) });
    expect(mismatch(stored, given)).to.contain('field "address.zip": stored float64, given string');
    const tags = mismatch(z.object({ tags: z.array(z.string()).optional() }), z.object({ tags: z.array(z.boolean()).optional() }));
    expect(tags).to.contain('field "tags[]": stored string, given boolean');
  });

  it('names a renamed, removed or appended required field, and the first of several differences', () => {
    expect(mismatch(z.object({ a: z.string(), b: z.string() }), z.object({ a: z.string(), c: z.string() }))).to.contain(
      'field 2: stored "b" (string), given "c" (string)',
    );
    expect(mismatch(z.object({ a: z.string(), b: z.string() }), z.object({ a: z.string() }))).to.contain(
      'field "b": stored string, given no such field',
    );
    expect(mismatch(z.object({ a: z.string() }), z.object({ a: z.string(), b: z.boolean() }))).to.contain(
      'field "b": stored no such field, given boolean (only optional fields may be appended)',
    );
    const first = mismatch(z.object({ a: z.string(), b: z.string() }), z.object({ a: z.boolean(), b: z.boolean() }));
    expect(first).to.contain('field "a": stored string, given boolean').and.not.contain('field "b"');
    expect(mismatch(z.object({ a: z.string().nullable() }), z.object({ a: z.string() }))).to.contain(
      'field "a": stored string | null, given string',
    );
  });

  it('an evolution that appends optional fields is still accepted', () => {
    const dir = path.join(tmp, 'evolve');
    const first = openPile({ dir, segmentSize: 1 << 20 });
    first.schema('user', z.object({ a: z.string() }));
    first.close();
    const again = openPile({ dir });
    const view = again.schema('user', z.object({ a: z.string(), b: z.number().optional() }));
    expect(view.get(view.put({ a: 'x', b: 2 }))).to.deep.equal({ a: 'x', b: 2 });
    again.close();
  });
});
