import { expect } from 'chai';
import { startHost, startRedis, tempDir, type HostProcess, type RedisServer } from './helpers';

// Three hosts, each a child process with its own pile directory, and one redis-server.
describe('sync: three host processes', function () {
  this.timeout(180_000);
  let redis: RedisServer;
  let url: string;
  const cleanups: (() => void)[] = [];
  const hosts: HostProcess[] = [];

  before(async () => {
    redis = await startRedis();
    url = `redis://127.0.0.1:${redis.port}`;
  });
  after(async () => {
    await Promise.all(hosts.map((h) => h.close()));
    await redis?.stop();
    for (const c of cleanups) c();
  });

  async function start(dir?: string, maxLag = 1000): Promise<{ host: HostProcess; dir: string }> {
    let d = dir;
    if (d === undefined) {
      const t = tempDir();
      cleanups.push(t.cleanup);
      d = t.dir;
    }
    const host = await startHost(d, url, maxLag);
    hosts.push(host);
    await host.request('ready');
    return { host, dir: d };
  }

  const stale = (values: (string | null)[], from: number, current: (i: number) => string | null): number[] => {
    const bad: number[] = [];
    values.forEach((v, j) => {
      if (v !== null && v !== current(from + j)) bad.push(from + j);
    });
    return bad;
  };

  /**
   * A read of keys from..to-1 made while `host` serves local hits. Under load a host can lag past
   * maxLag (1 s here) behind the stream, and serves no local hit until it caught up again: such a
   * read is made again, for up to 2 minutes, rather than taken for values the host lost.
   */
  async function readServed(host: HostProcess, from: number, to: number): Promise<(string | null)[]> {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const r = await host.request<{ serving: boolean; values: (string | null)[] }>('readServed', { from, to });
      if (r.serving) return r.values;
      if (Date.now() > deadline) throw new Error('the host served no local hit for 2 minutes (it lags behind the stream past maxLag)');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  it('a host SIGKILLed while another publishes 10,000 invalidations serves no stale value after its restart', async () => {
    const N = 20_000;
    const [a, b, c] = [await start(), await start(), await start()];
    // The fills store every key; each is read back below while the host serves.
    for (const h of [b, c]) await h.host.request('fill', { from: 0, to: N, gen: 0 });
    for (const h of [b, c]) {
      const filled = await readServed(h.host, 0, N);
      expect(filled.filter((v, i) => v !== `${i}:0`)).to.have.length(0);
    }
    const publishing = a.host.request('put', { from: 0, to: 10_000, gen: 1 });
    await new Promise((r) => setTimeout(r, 30));
    await c.host.kill();
    await publishing;
    await a.host.request('drain');
    const t0 = Date.now();
    const c2 = await startHost(c.dir, url, 1000);
    hosts.push(c2);
    // No local hit before the replay: a read at once is all misses or current values.
    const early = await c2.request<(string | null)[]>('read', { from: 0, to: N });
    await c2.request('ready');
    const catchUp = Date.now() - t0;
    const after = await readServed(c2, 0, N);
    const current = (i: number): string => (i < 10_000 ? `${i}:1` : `${i}:0`);
    expect(stale(early, 0, current)).to.deep.equal([]);
    expect(stale(after, 0, current)).to.deep.equal([]);
    const onB = await b.host.request<(string | null)[]>('read', { from: 0, to: N });
    expect(stale(onB, 0, current)).to.deep.equal([]);
    // Keys nobody changed are still served from the mapped files.
    const kept = after.slice(10_000).filter((v) => v !== null).length;
    expect(kept).to.equal(10_000);
    const stats = await c2.request<{ sync: { gaps: number }; caughtUp: { ms: number; replayed: number } }>('stats');
    expect(stats.sync.gaps).to.equal(0);
    console.log(
      `      catch-up after the restart: ${stats.caughtUp.ms} ms from syncCache to caught up (${catchUp} ms with the process start), ${stats.caughtUp.replayed} invalidations replayed; unchanged keys still served: ${kept} of 10000`,
    );
  });

  it('a 30 s Redis outage (SIGSTOP) while hosts write loses no invalidation and serves nothing past maxLag', async () => {
    const N = 3000;
    const [a, b, c] = [await start(), await start(), await start()];
    for (const h of [a, b, c]) await h.host.request('fill', { from: 0, to: N, gen: 0 });
    redis.signal('SIGSTOP');
    const stoppedAt = Date.now();
    try {
      const writes = (async () => {
        for (let k = 0; k < 10; k++) {
          await a.host.request('put', { from: k * 100, to: k * 100 + 100, gen: 1 });
          await b.host.request('put', { from: 1000 + k * 100, to: 1000 + k * 100 + 100, gen: 1 });
          await new Promise((r) => setTimeout(r, 2500));
        }
      })();
      // Past maxLag (1 s) and its check period, no host serves a local hit.
      await new Promise((r) => setTimeout(r, 1300));
      for (const h of [a, b, c]) {
        const v = await h.host.request<(string | null)[]>('read', { from: 0, to: N });
        expect(v.filter((x) => x !== null)).to.have.length(0);
      }
      await writes;
      const wait = 30_000 - (Date.now() - stoppedAt);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      for (const h of [a, b, c]) {
        const v = await h.host.request<(string | null)[]>('read', { from: 0, to: N });
        expect(v.filter((x) => x !== null)).to.have.length(0);
      }
    } finally {
      redis.signal('SIGCONT');
    }
    await a.host.request('drain');
    await b.host.request('drain');
    // Caught up again: every host dropped what the others wrote, kept its own writes and the untouched keys.
    await new Promise((r) => setTimeout(r, 200));
    for (const h of [a, b, c]) await h.host.request('ready');
    const deadline = Date.now() + 10_000;
    let ok = false;
    let last: unknown[] = [];
    while (!ok && Date.now() < deadline) {
      const [va, vb, vc] = await Promise.all([a, b, c].map((h) => h.host.request<(string | null)[]>('read', { from: 0, to: N })));
      last = [va, vb, vc];
      ok =
        va!.every((v, i) => (i < 1000 ? v === `${i}:1` : i < 2000 ? v === null : v === `${i}:0`)) &&
        vb!.every((v, i) => (i < 1000 ? v === null : i < 2000 ? v === `${i}:1` : v === `${i}:0`)) &&
        vc!.every((v, i) => (i < 2000 ? v === null : v === `${i}:0`));
      if (!ok) await new Promise((r) => setTimeout(r, 100));
    }
    expect(
      ok,
      JSON.stringify((last as (string | null)[][]).map((v) => v.slice(0, 5).concat(v.slice(995, 1005), v.slice(1995, 2005)))),
    ).to.equal(true);
    for (const h of [a, b, c]) expect((await h.host.request<{ sync: { gaps: number } }>('stats')).sync.gaps).to.equal(0);
  });
});
