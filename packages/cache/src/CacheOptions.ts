import { Pile, PileError, type PileOptions } from '@pile/core';
import { invalidOption } from './TableOptions';

/** Options the cache adds to those of the pile it opens or is given. */
export interface CacheBehaviourOptions {
  /**
   * Time source in ms since the epoch for ages and expiry; default Date.now. Tests inject a fake
   * clock; a real deployment should leave it, as expiry times are persisted as absolute times.
   */
  clock?: () => number;
  /** Seconds between automatic sweeps of expired entries (an unref'd timer); 0 = only cache.sweep(). Default 30. */
  sweepIntervalSec?: number;
  /**
   * Called during a long open: the pile's recovery after a crash (when the cache opens the pile)
   * and the cache's own check of its indexes (phase 'cache-index', done / total tables) and of
   * the pile's records (phase 'cache-orphans', done / total records).
   */
  onProgress?: (p: { phase: string; done: number; total: number }) => void;
}

/** {@link openCache} over a pile it opens (and owns): the pile's options plus the cache's. */
export interface CacheOptions extends PileOptions, CacheBehaviourOptions {}

/** {@link openCache} over a pile the caller opened: the cache never closes it. */
export interface CacheOverPileOptions extends CacheBehaviourOptions {
  pile: Pile;
}

const CACHE_KEYS = new Set(['clock', 'sweepIntervalSec']);

/** The options of a cache, checked: its own, and either the pile it was given or the options of the pile it opens. */
export interface ResolvedCacheOptions {
  clock: () => number;
  sweepIntervalSec: number;
  onProgress: CacheBehaviourOptions['onProgress'];
  /** The caller's pile ({@link CacheOverPileOptions}), or undefined when the cache opens its own. */
  pile: Pile | undefined;
  /** What the cache passes to openPile when it opens the pile itself. */
  pileOptions: PileOptions;
}

/**
 * Checks the options of openCache, before anything is opened.
 * @throws PILE_INVALID_OPTION for a bad option, naming it (over a given pile: any pile option)
 * @throws PILE_CLOSED when the pile given is closed
 */
export function resolveCacheOptions(options: CacheOptions | CacheOverPileOptions): ResolvedCacheOptions {
  if (options === null || typeof options !== 'object') throw invalidOption('options', 'expected an object');
  const { clock = Date.now, sweepIntervalSec = 30 } = options;
  if (typeof clock !== 'function') throw invalidOption('clock', 'expected a function returning ms since the epoch');
  if (
    typeof sweepIntervalSec !== 'number' ||
    !Number.isFinite(sweepIntervalSec) ||
    sweepIntervalSec < 0 ||
    sweepIntervalSec > 2 ** 31 / 1000
  ) {
    throw invalidOption('sweepIntervalSec', `expected a number of seconds from 0 to ${2 ** 31 / 1000}, got ${String(sweepIntervalSec)}`);
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function')
    throw invalidOption('onProgress', 'expected a function');
  const resolved = { clock, sweepIntervalSec, onProgress: options.onProgress, pile: undefined, pileOptions: {} };
  if (!('pile' in options)) {
    const pileOptions: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(options)) if (!CACHE_KEYS.has(k)) pileOptions[k] = v;
    return { ...resolved, pileOptions: pileOptions as PileOptions };
  }
  for (const k of Object.keys(options)) {
    if (k !== 'pile' && k !== 'onProgress' && !CACHE_KEYS.has(k))
      throw invalidOption(
        k,
        "a cache over a given pile takes only pile, clock, sweepIntervalSec and onProgress (the pile's options were given when it was opened)",
      );
  }
  if (!(options.pile instanceof Pile)) throw invalidOption('pile', 'expected a Pile from openPile');
  if (options.pile.isClosed) throw new PileError('PILE_CLOSED', 'option pile: the pile is closed');
  return { ...resolved, pile: options.pile };
}
