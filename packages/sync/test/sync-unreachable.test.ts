import { expect } from 'chai';
import * as net from 'node:net';
import { openCache } from '@pile/cache';
import { PileError } from '@pile/core';
import { syncCache } from '../src';
import { tempDir } from './helpers';

/** A loopback port where nothing listens: bound once by this process, then closed. */
async function deadPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('sync: no reachable Redis', function () {
  this.timeout(30_000);
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.cleanup());

  it('ready rejects with PILE_UNAVAILABLE naming the Redis URL after connectTimeoutMs, with a warning', async () => {
    const port = await deadPort();
    const cache = openCache({ dir: tmp.dir });
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w);
    };
    process.on('warning', onWarning);
    const started = Date.now();
    const synced = syncCache(cache, { redis: `redis://127.0.0.1:${port}`, connectTimeoutMs: 300 });
    try {
      const err = await synced.ready.then(
        () => undefined,
        (e: unknown) => e,
      );
      const waited = Date.now() - started;
      expect(err).to.be.instanceOf(PileError);
      expect((err as PileError).code).to.equal('PILE_UNAVAILABLE');
      expect((err as PileError).message)
        .to.contain(`redis://127.0.0.1:${port}`)
        .and.contain('connectTimeoutMs 300');
      expect((err as PileError).message).to.contain('ECONNREFUSED');
      expect(waited).to.be.at.least(290).and.below(5000);
      await new Promise((r) => setImmediate(r));
      const w = warnings.find((x) => (x as { code?: string }).code === 'PILE_UNAVAILABLE');
      expect(w?.message).to.contain(`redis://127.0.0.1:${port}`);
      // The tables go on working from the loader, without local hits.
      const t = synced.table<string>('t');
      t.table.put('k', 'v');
      expect(t.table.get('k')).to.equal(undefined);
    } finally {
      process.off('warning', onWarning);
      await synced.close(100);
      cache.close();
    }
  });

  it('hides the password of the URL, and a ready nobody awaits does not reject unhandled', async () => {
    const port = await deadPort();
    const cache = openCache({ dir: tmp.dir });
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown): void => {
      unhandled.push(e);
    };
    process.on('unhandledRejection', onUnhandled);
    const synced = syncCache(cache, { redis: `redis://:secret@127.0.0.1:${port}`, connectTimeoutMs: 100 });
    try {
      // Past the timeout with no handler of this test's own on ready: no unhandled rejection.
      await new Promise((r) => setTimeout(r, 300));
      expect(unhandled).to.deep.equal([]);
      const err = (await synced.ready.catch((e: unknown) => e)) as PileError;
      expect(err.code).to.equal('PILE_UNAVAILABLE');
      expect(err.message).to.not.contain('secret');
      expect(err.message).to.contain(`redis://:***@127.0.0.1:${port}`);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await synced.close(100);
      cache.close();
    }
  });

  it('connectTimeoutMs is checked in the constructor', () => {
    const cache = openCache({ dir: tmp.dir });
    try {
      for (const bad of [-1, 1.5, 'soon', 2 ** 31]) {
        expect(() => syncCache(cache, { redis: 'redis://127.0.0.1:1', connectTimeoutMs: bad as never }))
          .to.throw(PileError, 'option connectTimeoutMs')
          .with.property('code', 'PILE_INVALID_OPTION');
      }
    } finally {
      cache.close();
    }
  });
});
