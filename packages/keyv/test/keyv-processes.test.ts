import { expect } from 'chai';
import { Keyv } from 'keyv';
import { KeyvPile } from '../src';
import { startFixture, tempDir } from './helpers';

describe('keyv: two processes on one directory', function () {
  this.timeout(120_000);

  it('with shared: true both write disjoint keys at once and every key is readable from both, and from a third open after', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const n = 1500;
      const [a, b] = await Promise.all([
        startFixture('shared-writer', [dir, 'a', 'b', String(n)]),
        startFixture('shared-writer', [dir, 'b', 'a', String(n)]),
      ]);
      for (const r of [a, b]) {
        expect(r.code, r.out).to.equal(0);
        expect(JSON.parse(r.out.trim().split('\n').pop()!)).to.deep.equal({ missingOwn: 0, missingOther: 0 });
      }
      const keyv = new Keyv({ store: new KeyvPile({ dir }) });
      for (const p of ['a', 'b']) {
        const got = await keyv.get<string>(Array.from({ length: n }, (_, i) => `${p}${i}`));
        expect(got.every((v, i) => v === `${p}-value-${i}`)).to.equal(true);
      }
      await keyv.disconnect();
    } finally {
      cleanup();
    }
  });

  it('without shared a second process is refused with PILE_LOCKED naming the option; a shared one times out with PILE_LOCKED', async () => {
    const { dir, cleanup } = tempDir();
    const store = new KeyvPile({ dir });
    try {
      await store.set('keyv:x', '"y"');
      for (const mode of ['held', 'shared']) {
        const r = await startFixture('locked-open', [dir, mode]);
        const out = JSON.parse(r.out.trim().split('\n').pop()!) as { code?: string; message?: string };
        expect(out.code, r.out).to.equal('PILE_LOCKED');
        expect(out.message).to.include('shared: true');
      }
    } finally {
      await store.disconnect();
      cleanup();
    }
  });
});
