import type { PileCache } from '@pile/cache';
import { PileError } from '@pile/core';
import type { CacheAccess } from './CacheAccess';

/**
 * The default access: the cache is opened for writing once and held until the last KeyvPile of the
 * directory disconnects. One writing open at a time may have a pile's caches (docs/concurrency.md),
 * so another process that opens the directory gets PILE_LOCKED meanwhile.
 */
export class HeldCache implements CacheAccess {
  private cache: PileCache | undefined;

  /**
   * Opens the cache now.
   * @throws PILE_LOCKED when another process has the directory open with a cache (the message says
   *   to give `shared: true` to every KeyvPile of it); whatever openCache throws
   */
  constructor(open: () => PileCache, dir: string) {
    try {
      this.cache = open();
    } catch (err) {
      if (err instanceof PileError && err.code === 'PILE_LOCKED') {
        throw new PileError(
          'PILE_LOCKED',
          `KeyvPile ${dir}: another process has this directory open (${err.message}); to use one directory from several processes at once give every KeyvPile of it shared: true (docs/keyv.md)`,
        );
      }
      throw err;
    }
  }

  get held(): PileCache | undefined {
    return this.cache;
  }

  run<T>(fn: (cache: PileCache) => T): Promise<T> {
    const cache = this.cache;
    if (cache === undefined) return Promise.reject(new PileError('PILE_CLOSED', 'the KeyvPile store is disconnected'));
    try {
      return Promise.resolve(fn(cache));
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  close(): void {
    const cache = this.cache;
    this.cache = undefined;
    cache?.close();
  }
}
