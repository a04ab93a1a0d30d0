import { expect } from 'chai';
import fc from 'fast-check';
import { Keyv } from 'keyv';
import { KeyvPile } from '../src';
import { tempDir } from './helpers';

type Op = { op: 'set'; k: string; v: number } | { op: 'get' | 'delete' | 'has'; k: string } | { op: 'clear' } | { op: 'reopen' };

describe('keyv: KeyvPile against a Map model (property)', function () {
  this.timeout(120_000);
  it('set / get / delete / has / clear / reopen sequences agree with a Map', async () => {
    const key = fc.constantFrom('a', 'b', 'c', 'd', 'e:f', 'ü');
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('set' as const), k: key, v: fc.integer() }),
      fc.record({ op: fc.constantFrom('get' as const, 'delete' as const, 'has' as const), k: key }),
      fc.constant({ op: 'clear' as const }),
      fc.constant({ op: 'reopen' as const }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
        const { dir, cleanup } = tempDir();
        const open = (): Keyv => new Keyv({ store: new KeyvPile({ dir }), namespace: 'ns' });
        let keyv = open();
        const other = new Keyv({ store: new KeyvPile({ dir }), namespace: 'other' });
        await other.set('a', 'untouched');
        const model = new Map<string, number>();
        try {
          for (const o of ops) {
            if (o.op === 'set') {
              await keyv.set(o.k, o.v);
              model.set(o.k, o.v);
            } else if (o.op === 'get') expect(await keyv.get(o.k)).to.equal(model.get(o.k));
            else if (o.op === 'has') expect(await keyv.has(o.k)).to.equal(model.has(o.k));
            else if (o.op === 'delete') expect(await keyv.delete(o.k)).to.equal(model.delete(o.k));
            else if (o.op === 'clear') {
              await keyv.clear();
              model.clear();
            } else {
              await keyv.disconnect();
              keyv = open();
            }
          }
          for (const k of ['a', 'b', 'c', 'd', 'e:f', 'ü']) expect(await keyv.get(k)).to.equal(model.get(k));
          expect(await other.get('a')).to.equal('untouched');
        } finally {
          await keyv.disconnect();
          await other.disconnect();
          cleanup();
        }
      }),
      { numRuns: 40 },
    );
  });
});
