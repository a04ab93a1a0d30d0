import { expect } from 'chai';
import { createCache } from 'cache-manager';
import { Cacheable } from 'cacheable';
import { Keyv } from 'keyv';
import { KeyvPile } from '../src';
import { tempDir } from './helpers';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('keyv: cache-manager 7 and cacheable over KeyvPile', () => {
  let dir: string;
  let cleanup: () => void;
  beforeEach(() => ({ dir, cleanup } = tempDir()));
  afterEach(() => cleanup());

  it('cache-manager: set, get, ttl expiry, wrap', async () => {
    const keyv = new Keyv({ store: new KeyvPile({ dir }) });
    const cache = createCache({ stores: [keyv] });
    await cache.set('user:1', { name: 'Ada' });
    expect(await cache.get('user:1')).to.deep.equal({ name: 'Ada' });
    await cache.set('short', 'soon gone', 100);
    expect(await cache.get('short')).to.equal('soon gone');
    await sleep(150);
    expect(await cache.get('short')).to.equal(undefined);
    let calls = 0;
    const make = async (): Promise<number> => ++calls;
    expect(await cache.wrap('w', make, 10_000)).to.equal(1);
    expect(await cache.wrap('w', make, 10_000)).to.equal(1);
    expect(calls).to.equal(1);
    await cache.del('user:1');
    expect(await cache.get('user:1')).to.equal(undefined);
    await cache.disconnect();
  });

  it('cache-manager: an entry set with a ttl is there after the store is reopened, and expires on time', async () => {
    let cache = createCache({ stores: [new Keyv({ store: new KeyvPile({ dir }) })] });
    await cache.set('k', { v: 42 }, 400);
    await cache.disconnect();
    cache = createCache({ stores: [new Keyv({ store: new KeyvPile({ dir }) })] });
    expect(await cache.get('k')).to.deep.equal({ v: 42 });
    await sleep(450);
    expect(await cache.get('k')).to.equal(undefined);
    await cache.disconnect();
  });

  it('cacheable: KeyvPile as primary and as secondary: set, get, ttl, wrap', async () => {
    for (const role of ['primary', 'secondary'] as const) {
      const store = new KeyvPile({ dir, table: role });
      const keyv = new Keyv({ store });
      const c = role === 'primary' ? new Cacheable({ primary: keyv }) : new Cacheable({ secondary: keyv });
      await c.set('a', { x: 1 });
      expect(await c.get('a')).to.deep.equal({ x: 1 });
      expect(await keyv.get('a')).to.deep.equal({ x: 1 }); // it reached the pile store
      await c.set('t', 'brief', 100);
      expect(await c.get('t')).to.equal('brief');
      await sleep(150);
      expect(await c.get('t')).to.equal(undefined);
      let calls = 0;
      const f = c.wrap(async (n: number) => n * 2 + ++calls * 0, { ttl: 10_000, keyPrefix: 'double' });
      expect(await f(21)).to.equal(42);
      expect(await f(21)).to.equal(42);
      expect(calls).to.equal(1);
      await c.disconnect();
    }
  });
});
