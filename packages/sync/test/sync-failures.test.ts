import { expect } from 'chai';
import type { CacheTable } from '@pile/cache';
import { syncSuite, until, type SyncHost } from './helpers';

interface Host extends SyncHost {
  t: CacheTable<string>;
}

describe('sync: restarts, gaps and lost connections', function () {
  this.timeout(60_000);
  const env = syncSuite({ maxRetriesPerRequest: null });

  async function open(dir?: string, wait = true, maxLen?: number): Promise<Host> {
    const h = await env.host({ dir, maxLag: 1000, wait, sync: maxLen === undefined ? {} : { maxLen } });
    return { ...h, t: h.cache.table<string>('t', { collisionMode: 'durable' }) };
  }

  const shut = (h: Host): Promise<void> => env.shut(h);

  const fill = (h: Host, n: number, v: string): void => {
    for (let i = 0; i < n; i++) h.t.put(`k${i}`, v);
  };
  const settle = async (h: Host): Promise<void> => {
    expect(await until(() => h.synced.stats.outbox === 0)).to.equal(true);
  };

  it('a restarted host replays what it missed from its saved position before serving a local hit', async () => {
    const a = await open();
    let b = await open();
    fill(b, 1000, 'old');
    await settle(b);
    await until(() => a.synced.stats.applied === 1000);
    const dir = b.dir;
    await shut(b);
    for (let i = 0; i < 1000; i += 3) a.t.put(`k${i}`, 'new');
    await settle(a);
    b = await open(dir, false);
    // Not caught up yet: no local hit at all.
    expect(b.t.get('k1')).to.equal(undefined);
    await b.synced.ready;
    for (let i = 0; i < 1000; i++) expect(b.t.get(`k${i}`)).to.equal(i % 3 === 0 ? undefined : 'old');
    expect(b.synced.stats.gaps).to.equal(0);
    expect(b.t.stats.hits).to.equal(666);
  });

  it("a stream trimmed past a host's position is a gap: counted, and nothing stored before it is served", async () => {
    const a = await open();
    let b = await open();
    fill(b, 500, 'old');
    await settle(b);
    const dir = b.dir;
    await shut(b);
    for (let i = 0; i < 500; i += 5) a.t.put(`k${i}`, 'new');
    await settle(a);
    await env.admin.xtrim('pile:inv', 'MAXLEN', 0);
    b = await open(dir);
    expect(b.synced.stats.gaps).to.equal(1);
    for (let i = 0; i < 500; i++) expect(b.t.get(`k${i}`)).to.equal(undefined);
    b.t.put('k1', 'fresh');
    expect(b.t.get('k1')).to.equal('fresh');
    // The epoch is in the pile: a restart does not bring the old entries back.
    await shut(b);
    b = await open(dir);
    expect(b.t.get('k2')).to.equal(undefined);
    expect(b.t.get('k1')).to.equal('fresh');
    expect(b.synced.stats.gaps).to.equal(1);
  });

  it('a trim while a host is live but behind is a gap too', async () => {
    const a = await open(undefined, true, 50);
    const b = await open();
    fill(b, 100, 'old');
    await settle(b);
    await until(() => a.synced.stats.applied >= 100);
    // Pause b's follower by pausing its connection's reads: simplest is to stop its socket.
    const sub = (b.synced as unknown as { sub: { stream: { pause(): void; resume(): void } } }).sub.stream;
    sub.pause();
    a.t.put('k7', 'new');
    // One write per turn: one entry each, so that MAXLEN ~ 50 trims whole nodes of them.
    for (let i = 0; i < 400; i++) {
      a.t.put(`x${i}`, 'v');
      await settle(a);
    }
    await settle(a);
    sub.resume();
    expect(await until(() => b.synced.stats.gaps === 1)).to.equal(true);
    expect(b.t.get('k7')).to.equal(undefined);
    expect(b.t.get('k8')).to.equal(undefined);
  });

  it('survives CLIENT KILL of its follower and of its publisher without losing an invalidation', async () => {
    const a = await open();
    const b = await open();
    fill(b, 3000, 'old');
    await settle(b);
    await until(() => a.synced.stats.applied === 3000);
    const port = (s: SyncedCache, which: 'sub' | 'pub'): number =>
      (s as unknown as Record<string, { stream: { localPort: number } }>)[which]!.stream.localPort;
    const kills = (async () => {
      for (let n = 0; n < 6; n++) {
        await new Promise((r) => setTimeout(r, 15));
        await env.admin.client('KILL', 'ADDR', `127.0.0.1:${port(b.synced, 'sub')}`).catch(() => undefined);
        await env.admin.client('KILL', 'ADDR', `127.0.0.1:${port(a.synced, 'pub')}`).catch(() => undefined);
      }
    })();
    for (let i = 0; i < 3000; i++) {
      a.t.put(`k${i}`, 'new');
      if (i % 50 === 0) await new Promise((r) => setTimeout(r, 1));
    }
    await kills;
    await settle(a);
    expect(await until(() => b.t.count === 0, 10_000)).to.equal(true);
    expect(b.synced.stats.gaps).to.equal(0);
  });

  it('a Redis that lost its data (killed and restarted) is a gap for every host; writes made meanwhile go out after', async () => {
    const a = await open();
    const b = await open();
    fill(b, 200, 'old');
    await settle(b);
    await until(() => a.synced.stats.applied === 200);
    const port = env.redis.port;
    env.redis.signal('SIGKILL');
    await until(() => !a.synced.stats.connected && !b.synced.stats.connected);
    for (let i = 0; i < 200; i += 2) a.t.put(`k${i}`, 'new');
    expect(a.synced.stats.outbox).to.equal(100);
    // Past maxLag, nothing is served locally.
    expect(await until(() => !b.synced.stats.serving && !a.synced.stats.serving, 3000)).to.equal(true);
    expect(b.t.get('k1')).to.equal(undefined);
    // Listing is gated like get: b still holds its 200 entries but lists none of them.
    expect(b.t.count).to.equal(200);
    expect([...b.t.keys()]).to.deep.equal([]);
    expect([...b.t.entries()]).to.deep.equal([]);
    await env.restartRedis(port);
    expect(await until(() => a.synced.stats.outbox === 0 && b.synced.stats.serving && a.synced.stats.serving, 10_000)).to.equal(true);
    expect(b.synced.stats.gaps).to.equal(1);
    expect(a.synced.stats.gaps).to.equal(1);
    for (let i = 0; i < 200; i++) expect(b.t.get(`k${i}`)).to.equal(undefined);
    // Below the epoch for listing too.
    expect([...b.t.keys()]).to.deep.equal([]);
    // Stored before the gap was found, so below the epoch on a too, its own writes included.
    expect(a.t.get('k0')).to.equal(undefined);
    const keys = (await env.admin.xrange('pile:inv', '-', '+')).flatMap(([, f]) => f.filter((_, j) => j > 1 && j % 2 === 1));
    expect(keys).to.have.length(100);
  });

  it('getOrLoad never stores a value whose key changed while it loaded (10,000 races)', async () => {
    const a = await open();
    const b = await open();
    const db = new Map<string, number>();
    const ta = a.synced.table<string>('t');
    let remoteRaces = 0;
    const race = async (i: number): Promise<void> => {
      const key = `r${i % 500}`;
      const before = db.get(key) ?? 0;
      await ta.getOrLoad(key, async () => {
        const read = db.get(key) ?? 0;
        // The update lands between the read and the store: on this host, or on the other one.
        db.set(key, read + 1);
        if (i % 2 === 0) {
          a.t.put(key, `v${read + 1}`);
          a.t.delete(key);
        } else {
          remoteRaces++;
          const seen = a.synced.stats.applied + a.synced.stats.keptNewer;
          b.t.put(key, `v${read + 1}`);
          await until(() => a.synced.stats.applied + a.synced.stats.keptNewer > seen);
        }
        return `v${read}`;
      });
      const stored = a.t.get(key);
      expect(
        stored === undefined || stored === `v${db.get(key)}`,
        `key ${key}: stored ${stored}, current v${db.get(key)} (was v${before})`,
      ).to.equal(true);
    };
    for (let i = 0; i < 10_000; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => race(i + j)));
    expect(remoteRaces).to.equal(5000);
    expect(a.synced.stats.discardedFills).to.equal(10_000);
    expect(a.t.count).to.equal(0);
  });
});
