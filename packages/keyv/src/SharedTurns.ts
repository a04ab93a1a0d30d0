import type { PileCache } from '@pile/cache';
import { PileError } from '@pile/core';
import type { CacheAccess } from './CacheAccess';

/** After a turn held for turnMs while busy, this process waits this long before it takes one again: longer than a waiter's longest nap (below), so that a waiting process gets in. */
const YIELD_MS = 12;
/** A waiter naps between attempts from 1 ms, doubling up to this (plus up to as much again at random). */
const MAX_NAP_MS = 4;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What {@link SharedTurns} needs besides the way to open the cache. */
export interface SharedTurnOptions {
  dir: string;
  lockTimeoutMs: number;
  turnMs: number;
  sweepIntervalSec: number;
  /** Called with an error that no operation's promise can carry (closing a turn after its operations resolved). */
  onError: (err: unknown) => void;
}

/**
 * `shared: true`: one writing open at a time may have a pile's caches (docs/concurrency.md), so the
 * processes of one directory take turns. A turn is a writable open of the cache, taken by the first
 * operation that needs it, and closed at the end of the event-loop turn in which the operations ran
 * (so a process never keeps it while idle), or after `turnMs` of work without a pause, when the
 * process lets others in for {@link YIELD_MS} before it takes it again. A process that finds the
 * cache held by another (PILE_LOCKED from openCache) naps and tries again, for up to
 * `lockTimeoutMs`. Entries are in the mapped files, so a turn's writes are seen by the next turn of
 * any process; a process killed in its turn leaves an unclean cache that the next turn recovers.
 */
export class SharedTurns implements CacheAccess {
  /** Never held for good: see the class comment. */
  readonly held = undefined;
  private cache: PileCache | undefined;
  private takenAt = 0;
  private yieldUntil = 0;
  private taking: Promise<PileCache> | undefined;
  private releasing = false;
  private lastSweep = 0;
  private closed = false;

  constructor(
    private readonly open: () => PileCache,
    private readonly o: SharedTurnOptions,
  ) {}

  run<T>(fn: (cache: PileCache) => T): Promise<T> {
    const held = this.cache;
    if (held !== undefined && !this.closed && Date.now() - this.takenAt < this.o.turnMs) return this.runIn(held, fn);
    return this.turn().then((cache) =>
      // Another operation may have ended the turn between the take and this callback: take one again.
      this.cache === cache ? this.runIn(cache, fn) : this.run(fn),
    );
  }

  /** Runs `fn` synchronously in the turn `cache` (so nothing ends the turn under it). */
  private runIn<T>(cache: PileCache, fn: (cache: PileCache) => T): Promise<T> {
    try {
      return Promise.resolve(fn(cache));
    } catch (err) {
      return Promise.reject(err as Error);
    } finally {
      this.scheduleRelease();
    }
  }

  close(): void {
    this.closed = true;
    this.letGo();
  }

  private async turn(): Promise<PileCache> {
    if (this.closed) throw new PileError('PILE_CLOSED', 'the KeyvPile store is disconnected');
    const held = this.cache;
    if (held !== undefined) {
      if (Date.now() - this.takenAt < this.o.turnMs) return held;
      this.letGo();
      this.yieldUntil = Date.now() + YIELD_MS;
    }
    this.taking ??= this.take().finally(() => {
      this.taking = undefined;
    });
    return this.taking;
  }

  private async take(): Promise<PileCache> {
    const start = Date.now();
    let nap = 1;
    for (;;) {
      const wait = this.yieldUntil - Date.now();
      if (wait > 0) await sleep(wait);
      if (this.closed) throw new PileError('PILE_CLOSED', 'the KeyvPile store is disconnected');
      let cache: PileCache;
      try {
        cache = this.open();
      } catch (err) {
        if (!(err instanceof PileError) || err.code !== 'PILE_LOCKED') throw err;
        const waited = Date.now() - start;
        if (waited >= this.o.lockTimeoutMs) {
          throw new PileError(
            'PILE_LOCKED',
            `KeyvPile ${this.o.dir}: another process kept the cache for ${waited} ms (lockTimeoutMs ${this.o.lockTimeoutMs}); every process of the directory must give shared: true (${err.message})`,
          );
        }
        await sleep(nap + Math.random() * nap);
        nap = Math.min(nap * 2, MAX_NAP_MS);
        continue;
      }
      this.cache = cache;
      this.takenAt = Date.now();
      if (this.o.sweepIntervalSec > 0 && this.takenAt - this.lastSweep >= this.o.sweepIntervalSec * 1000) {
        this.lastSweep = this.takenAt;
        cache.sweep();
      }
      this.scheduleRelease();
      return cache;
    }
  }

  private scheduleRelease(): void {
    if (this.releasing) return;
    this.releasing = true;
    setImmediate(() => {
      this.releasing = false;
      this.letGo();
    });
  }

  private letGo(): void {
    const cache = this.cache;
    this.cache = undefined;
    if (cache === undefined) return;
    try {
      cache.close();
    } catch (err) {
      this.o.onError(err);
    }
  }
}
