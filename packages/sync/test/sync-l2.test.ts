import { expect } from 'chai';
import { unpack } from 'msgpackr';
import { openCache, type CacheTable } from '@pile/cache';
import { PileError } from '@pile/core';
import { syncCache, type SyncedTable } from '../src';
import { keyId } from '../src/WireFormat';
import { syncSuite, tempDir, until, type SyncHost } from './helpers';

interface Host extends SyncHost {
  t: CacheTable<unknown>;
  st: SyncedTable<unknown>;
}

describe('sync: the L2 tier (values kept in Redis)', function () {
  this.timeout(120_000);
  const env = syncSuite();

  async function open(l2 = true, maxAgeSec = 0): Promise<Host> {
    const h = await env.host({ wait: false, sync: l2 ? { l2 } : {} });
    const st = h.synced.table<unknown>('t', { collisionMode: 'durable', defaultMaxAgeSec: maxAgeSec });
    await h.synced.ready;
    return { ...h, t: st.table, st };
  }

  const l2Key = (key: string): string => `pile:inv:l2:1:t${keyId(key)}`;
  /** The value L2 holds for key (decoded), or undefined. */
  const inL2 = async (key: string): Promise<unknown> => {
    const d = await env.admin.hgetBuffer(l2Key(key), 'd');
    return d === null ? undefined : unpack(d);
  };
  const published = async (h: Host): Promise<void> => {
    expect(await until(() => h.synced.stats.outbox === 0), 'outbox published').to.equal(true);
  };
  const refuse = (): never => {
    throw new Error('the loader must not be called');
  };

  it("serves host B's miss from host A's load without calling B's loader, values intact", async () => {
    const [a, b] = [await open(), await open()];
    const values: Record<string, unknown> = {
      s: 'text',
      o: { name: 'Ada', n: 42, tags: ['x', 'y'], nested: { at: 1.5, none: null } },
      y: new Uint8Array([1, 2, 3, 250]),
    };
    for (const [k, v] of Object.entries(values)) {
      let calls = 0;
      expect(
        await a.st.getOrLoad(k, () => {
          calls++;
          return v;
        }),
      ).to.deep.equal(v);
      expect(calls).to.equal(1);
      expect(await b.st.getOrLoad(k, refuse)).to.deep.equal(v);
      // Stored locally on B too: the next read is a local hit.
      expect(b.t.get(k)).to.deep.equal(v);
    }
    expect(a.synced.stats.l2Stores).to.equal(3);
    expect(b.synced.stats.l2Hits).to.equal(3);
    expect(b.synced.stats.l2Stores).to.equal(0);
    // Fills are not changes: nothing was published, and the stream never carries values.
    expect(await env.admin.xlen('pile:inv')).to.equal(0);
    a.t.put('s', 'text2');
    await published(a);
    const fields = (await env.admin.xrange('pile:inv', '-', '+')).flatMap(([, f]) => f);
    expect(fields.join(' ')).to.not.include('text2');
  });

  it("after a put or delete elsewhere, L2's old value is not served (and the first load after it is)", async () => {
    const [a, b, c] = [await open(), await open(), await open()];
    await a.st.getOrLoad('k', () => 'v1');
    await a.st.getOrLoad('d', () => 'd1');
    expect(await inL2('k')).to.equal('v1');
    c.t.put('k', 'v2');
    c.t.delete('d');
    await published(c);
    expect(await inL2('k')).to.equal(undefined);
    let calls = 0;
    expect(
      await b.st.getOrLoad('k', () => {
        calls++;
        return 'v2';
      }),
    ).to.equal('v2');
    expect(
      await b.st.getOrLoad('d', () => {
        calls++;
        return undefined;
      }),
    ).to.equal(undefined);
    expect(calls).to.equal(2);
    // b's load came after the invalidation: it is in L2 now and serves a fresh host.
    const d = await open();
    expect(await d.st.getOrLoad('k', refuse)).to.equal('v2');
    // A host's own delete not yet in the stream: L2 (still holding v2) is not used by it.
    b.t.delete('k');
    d.t.delete('k');
    expect(await d.st.getOrLoad('k', () => 'v3')).to.equal('v3');
    await published(d);
    await published(b);
    expect(await inL2('k')).to.equal(undefined);
  });

  it("keeps the table's maxAge in Redis, and an expired L2 value is not served", async () => {
    const [a, b] = [await open(true, 1), await open(true, 1)];
    await a.st.getOrLoad('k', () => 'v');
    const fields = await env.admin.hgetall(l2Key('k'));
    const pttl = await env.admin.pttl(l2Key('k'));
    // The value expires with maxAge (field e); the record itself outlives it (it may carry a tombstone).
    expect(Number(fields.e) - Date.now()).to.be.within(0, 1000);
    expect(pttl).to.be.greaterThan(1000);
    expect(await b.st.getOrLoad('k', refuse)).to.equal('v');
    await new Promise((r) => setTimeout(r, 1100));
    expect(await b.st.getOrLoad('k', () => 'v-new')).to.equal('v-new');
  });

  it('a slow loader racing an update never leaves a stale value in L2 or locally (1,000 races)', async () => {
    const [a, b, c] = [await open(), await open(), await open()];
    const db = new Map<string, number>();
    const race = async (i: number): Promise<void> => {
      const key = `r${i}`;
      const loaded = await a.st.getOrLoad(key, async () => {
        const read = db.get(key) ?? 0;
        // The update lands between the load's read of the database and its store: on another host
        // (published before the store, or still on its way), or on this one.
        db.set(key, read + 1);
        if (i % 3 === 0) {
          b.t.put(key, `v${read + 1}`);
          await published(b);
        } else if (i % 3 === 1) {
          b.t.put(key, `v${read + 1}`);
        } else {
          a.t.put(key, `v${read + 1}`);
        }
        return `v${read}`;
      });
      if (loaded === undefined) return;
      await published(a);
      await published(b);
      // a has applied every change b published (b's put of this key included).
      expect(await until(() => a.synced.stats.applied + a.synced.stats.keptNewer >= b.synced.stats.published)).to.equal(true);
      const current = `v${db.get(key)}`;
      const local = a.t.get(key);
      const l2 = await inL2(key);
      expect(local === undefined || local === current, `key ${key}: local ${String(local)}, current ${current}`).to.equal(true);
      // Nobody loaded after the update yet: L2 holds no value (the slow load was refused or tombstoned).
      expect(l2, `key ${key}: L2 ${String(l2)}, current ${current}`).to.equal(undefined);
      // Once c has applied every change, its load is not marked as racing one: it goes to L2.
      expect(
        await until(() => c.synced.stats.applied + c.synced.stats.keptNewer >= a.synced.stats.published + b.synced.stats.published),
      ).to.equal(true);
      expect(await c.st.getOrLoad(key, () => current)).to.equal(current);
      expect(await inL2(key)).to.equal(current);
    };
    for (let i = 0; i < 1000; i += 10) await Promise.all(Array.from({ length: 10 }, (_, j) => race(i + j)));
    expect(c.synced.stats.l2Stores).to.equal(1000);
  });

  it('a load that started before an invalidation is not stored in L2, even when it ends long after', async () => {
    const [a, b] = [await open(), await open()];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const slow = a.st.getOrLoad('k', async () => {
      await gate;
      return 'old';
    });
    await new Promise((r) => setTimeout(r, 20));
    // a does not hear of the update before its load ends: only Redis can refuse the old value.
    const sub = (a.synced as unknown as { sub: { stream: { pause(): void; resume(): void } } }).sub.stream;
    sub.pause();
    b.t.put('k', 'new');
    await published(b);
    release();
    expect(await slow).to.equal('old');
    expect(await inL2('k')).to.equal(undefined);
    expect(a.synced.stats.l2Stores).to.equal(0);
    expect(a.synced.stats.discardedFills).to.equal(0);
    sub.resume();
    // The local copy a stored goes with the update when a reads it.
    expect(await until(() => a.t.get('k') === undefined)).to.equal(true);
  });

  it('l2 off (the default) writes no value to Redis and reads none', async () => {
    const [a, b] = [await open(false), await open(false)];
    await a.st.getOrLoad('k', () => 'v');
    let calls = 0;
    expect(
      await b.st.getOrLoad('k', () => {
        calls++;
        return 'v';
      }),
    ).to.equal('v');
    expect(calls).to.equal(1);
    a.t.put('k', 'v2');
    await published(a);
    expect((await env.admin.keys('*')).sort()).to.deep.equal(['pile:inv', 'pile:inv:identity']);
    expect(a.synced.stats.l2Stores + b.synced.stats.l2Hits).to.equal(0);
  });

  it('validates the option', () => {
    const { dir, cleanup } = tempDir();
    const cache = openCache({ dir, segmentSize: 1 << 22 });
    try {
      expect(() => syncCache(cache, { redis: env.url, l2: 'yes' as never })).to.throw(PileError, /option l2/);
    } finally {
      cache.close();
      cleanup();
    }
  });
});
