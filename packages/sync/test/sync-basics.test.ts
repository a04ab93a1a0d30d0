import { expect } from 'chai';
import { openCache } from '@pile/cache';
import { PileError } from '@pile/core';
import { syncCache } from '../src';
import { keyId, packKey, unpackKey } from '../src/WireFormat';
import { syncSuite, tempDir, until, type SyncHost } from './helpers';

describe('sync: propagation between hosts', function () {
  this.timeout(30_000);
  const env = syncSuite();

  function host(dir?: string, stream?: string): Promise<SyncHost> {
    return env.host({ dir, sync: stream === undefined ? {} : { stream } });
  }

  it('invalidates other hosts on put, remove and rejuvenate, and skips its own entries', async () => {
    const [a, b] = [await host(), await host()];
    const ta = a.cache.table<string>('t');
    const tb = b.cache.table<string>('t');
    for (const k of ['p', 'r', 'e']) tb.put(k, 'b');
    // Once a has seen b's versions, its own writes are newer: a keeps them and b's copies go.
    await until(() => a.synced.stats.applied === 3);
    for (const k of ['p', 'r', 'e']) ta.put(k, 'a');
    expect(await until(() => tb.get('p') === undefined && tb.get('r') === undefined && tb.get('e') === undefined)).to.equal(true);
    expect([ta.get('p'), ta.get('r'), ta.get('e')]).to.deep.equal(['a', 'a', 'a']);
    tb.put('r', 'b2');
    tb.put('e', 'b2');
    expect(await until(() => ta.get('r') === undefined && ta.get('e') === undefined)).to.equal(true);
    ta.put('r', 'a2');
    ta.put('e', 'a2');
    await until(() => a.synced.stats.outbox === 0);
    tb.put('r', 'b3');
    ta.delete('r');
    ta.rejuvenate('e');
    expect(await until(() => tb.get('r') === undefined)).to.equal(true);
    expect(await until(() => a.synced.stats.published === b.synced.stats.applied + b.synced.stats.keptNewer)).to.equal(true);
    expect(a.synced.stats.applied + a.synced.stats.keptNewer).to.equal(b.synced.stats.published);
  });

  it('applies an entry twice without harm, and ignores entries it can not read', async () => {
    const [a] = [await host()];
    const ta = a.cache.table<string>('t');
    ta.put('x', '1');
    ta.put('y', '1');
    const epoch = await env.admin.get('pile:inv:identity');
    await env.admin.xadd(
      'pile:inv',
      `${epoch}-*`,
      'g',
      'other',
      'k',
      packKey('d', 1, 't', keyId('x')),
      'k',
      packKey('d', 1, 't', keyId('x')),
      'k',
      'garbage',
    );
    await env.admin.xadd('pile:inv', `${epoch}-*`, 'g', 'other', 'k', packKey('d', 1, 't', keyId('x')));
    await env.admin.xadd('pile:inv', `${epoch}-*`, 'something', 'else');
    // a put x with a version far above 1: it keeps its value, counted.
    expect(await until(() => a.synced.stats.keptNewer === 3)).to.equal(true);
    expect(ta.get('x')).to.equal('1');
    const newer = packKey('d', Number.MAX_SAFE_INTEGER, 't', keyId('x'));
    await env.admin.xadd('pile:inv', `${epoch}-*`, 'g', 'other', 'k', newer, 'k', newer);
    await env.admin.xadd('pile:inv', `${epoch}-*`, 'g', 'other', 'k', newer);
    expect(await until(() => ta.get('x') === undefined && a.synced.stats.applied === 3)).to.equal(true);
    expect(ta.get('y')).to.equal('1');
    expect(a.synced.stats.gaps).to.equal(0);
  });

  it('packs every key type so that the other host drops the same key', async () => {
    const keys = [
      '',
      'é',
      '\ud800 lone',
      0,
      -0,
      NaN,
      1.5e300,
      -Infinity,
      12n,
      -(2n ** 80n),
      new Uint8Array([0, 255, 7]),
      new Uint8Array(0),
    ];
    for (const k of keys) {
      const w = unpackKey(packKey('p', 12345, 'tab:le', keyId(k)))!;
      expect(w.table).to.equal('tab:le');
      expect(w.version).to.equal(12345);
      if (k instanceof Uint8Array) expect(Buffer.from(w.key as Uint8Array).equals(Buffer.from(k))).to.equal(true);
      else expect(Object.is(w.key, Object.is(k, -0) ? 0 : k)).to.equal(true);
    }
    const [a, b] = [await host(), await host()];
    const ta = a.cache.table('t');
    const tb = b.cache.table('t');
    keys.forEach((k) => tb.put(k, 'old'));
    await until(() => b.synced.stats.outbox === 0);
    keys.forEach((k) => ta.put(k, 'new'));
    expect(await until(() => tb.count === 0)).to.equal(true);
  });

  it('sends at most 100 bytes per invalidated key (measured)', async () => {
    const [a, b] = [await host(), await host()];
    const ta = a.cache.table<string>('users');
    await until(() => a.synced.stats.outbox === 0);
    const pubSocket = (a.synced as unknown as { pub: { stream: { bytesWritten: number; bytesRead: number } } }).pub.stream;
    const subSocket = (b.synced as unknown as { sub: { stream: { bytesWritten: number; bytesRead: number } } }).sub.stream;
    const measure = async (n: number, perTurn: number): Promise<{ publish: number; follow: number }> => {
      const p0 = pubSocket.bytesWritten + pubSocket.bytesRead;
      const before = b.synced.stats.applied;
      const f0 = subSocket.bytesRead + subSocket.bytesWritten;
      for (let i = 0; i < n; i += perTurn) {
        for (let j = i; j < i + perTurn; j++) ta.put(`user:${100000 + j}`, 'v');
        await new Promise((r) => setImmediate(r));
        await until(() => a.synced.stats.outbox === 0);
      }
      await until(() => b.synced.stats.applied + b.synced.stats.keptNewer >= before + n);
      return {
        publish: (pubSocket.bytesWritten + pubSocket.bytesRead - p0) / n,
        follow: (subSocket.bytesRead + subSocket.bytesWritten - f0) / n,
      };
    };
    const one = await measure(100, 1);
    const burst = await measure(1000, 100);
    // The entry itself as a follower receives it (RESP: id, origin, one packed key).
    const [id, fields] = (await env.admin.xrevrange('pile:inv', '+', '-', 'COUNT', 1))[0]!;
    const single = (await env.admin.xrange('pile:inv', '-', '+', 'COUNT', 1))[0]!;
    const resp = (e: [string, string[]]): number => {
      const bulk = (x: string): number => {
        const n = Buffer.byteLength(x);
        return 1 + String(n).length + 2 + n + 2;
      };
      return 4 + bulk(e[0]) + 1 + String(e[1].length).length + 2 + e[1].reduce((sum, x) => sum + bulk(x), 0);
    };
    const entryBytes = resp(single);
    const burstEntryPerKey = resp([id, fields]) / ((fields.length - 2) / 2);
    console.log(
      `      bytes per invalidated key (key 'user:1xxxxx'): entry ${entryBytes} alone, ${burstEntryPerKey.toFixed(1)} in an entry of ${(fields.length - 2) / 2};` +
        ` on the sockets, one write per XADD: publish ${one.publish.toFixed(1)} (request + reply), follow ${one.follow.toFixed(1)} (XREAD + reply);` +
        ` 100 writes per turn: publish ${burst.publish.toFixed(1)}, follow ${burst.follow.toFixed(1)}`,
    );
    expect(entryBytes).to.be.at.most(100);
    expect(burstEntryPerKey).to.be.at.most(100);
    expect(burst.publish).to.be.at.most(100);
    expect(burst.follow).to.be.at.most(100);
  });

  it('validates its options and refuses a second sync of the same cache', async () => {
    const d = tempDir();
    const cache = openCache({ dir: d.dir, sweepIntervalSec: 0 });
    try {
      for (const [opts, name] of [
        [{ redis: env.url, maxLag: 1 }, 'maxLag'],
        [{ redis: env.url, maxLen: 0 }, 'maxLen'],
        [{ redis: 5 }, 'redis'],
        [{ redis: env.url, bogus: 1 }, 'bogus'],
        [{ redis: env.url, origin: 'a b' }, 'origin'],
      ] as const) {
        let err: unknown;
        try {
          syncCache(cache, opts as never);
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(PileError);
        expect((err as PileError).code).to.equal('PILE_INVALID_OPTION');
        expect((err as PileError).message).to.contain(name);
      }
      cache.table('t');
      const s = syncCache(cache, { redis: env.url });
      let err: unknown;
      try {
        syncCache(cache, { redis: env.url });
      } catch (e) {
        err = e;
      }
      expect((err as PileError).code).to.equal('PILE_LOCKED');
      await s.close();
    } finally {
      cache.close();
      d.cleanup();
    }
  });
});
