import { PileError } from '@pile/core';
import type { CacheKey } from '@pile/cache';
import type { Redis, RedisOptions } from 'ioredis';

/** Options of {@link syncCache}. */
export interface SyncOptions {
  /**
   * The Redis to use: an ioredis client (its options are reused for the two connections @pile/sync
   * opens with `duplicate()`; the client itself is left alone), a `redis://` URL, or ioredis options.
   */
  redis: Redis | string | RedisOptions;
  /** The stream key of the invalidation log, shared by every host of the cache. Default `'pile:inv'`. */
  stream?: string;
  /** Approximate length the stream is trimmed to on each append (`XADD … MAXLEN ~ maxLen`). Default 1,000,000. */
  maxLen?: number;
  /**
   * Milliseconds a host may be disconnected from, or behind, the stream before its tables stop
   * serving local hits (reads go to the loader until it caught up). Default 5000.
   */
  maxLag?: number;
  /**
   * Identity of this host in the stream (its own entries are skipped). Default: a random id made
   * once and stored in the pile. Two live hosts must never share one (do not copy a pile directory
   * to a second live host without giving it its own `origin`).
   */
  origin?: string;
  /** Entries read per XREAD. Default 1000. */
  batch?: number;
  /**
   * Called after a change made on another host was applied here (this host's copy, if any, was
   * dropped): to drop state derived from the key, or to measure propagation. Not called for changes
   * this host kept a newer value against. It must not throw (what it throws is kept in `lastError`).
   */
  onInvalidate?: (table: string, key: CacheKey) => void;
  /**
   * Second tier: values loaded by `getOrLoad` are also kept in Redis (MessagePack), so a miss on one
   * host can be served by another host's load without calling the loader. An L2 value is never
   * older than an invalidation already in the stream (see docs/distributed.md, "The L2 tier").
   * Default false: no value is ever written to Redis.
   */
  l2?: boolean;
  /**
   * Milliseconds {@link SyncedCache.ready} waits for this host to reach Redis and catch up with the
   * stream: past them it rejects with PILE_UNAVAILABLE naming the Redis address, and a warning of that
   * code is emitted (`process.emitWarning`), instead of the tables serving no local hit in silence.
   * The connections go on retrying; a later catch-up makes the tables serve local hits again.
   * 0: wait for ever. Default 10000.
   */
  connectTimeoutMs?: number;
}

/** Options after validation. */
export interface ResolvedSyncOptions {
  stream: string;
  maxLen: number;
  maxLag: number;
  origin: string | undefined;
  batch: number;
  onInvalidate: ((table: string, key: CacheKey) => void) | undefined;
  l2: boolean;
  connectTimeoutMs: number;
}

const KEYS = new Set(['redis', 'stream', 'maxLen', 'maxLag', 'origin', 'batch', 'onInvalidate', 'l2', 'connectTimeoutMs']);

function invalid(option: string, message: string): PileError {
  return new PileError('PILE_INVALID_OPTION', `option ${option}: ${message}`);
}

/** @throws PILE_INVALID_OPTION naming the option */
export function resolveSyncOptions(options: SyncOptions): ResolvedSyncOptions {
  if (options === null || typeof options !== 'object') throw invalid('options', 'expected an object with at least redis');
  for (const k of Object.keys(options)) if (!KEYS.has(k)) throw invalid(k, `unknown option (known: ${[...KEYS].join(', ')})`);
  if (options.redis === undefined || options.redis === null || (typeof options.redis !== 'string' && typeof options.redis !== 'object')) {
    throw invalid('redis', 'expected an ioredis client, a redis:// URL or ioredis options');
  }
  const { stream = 'pile:inv', maxLen = 1_000_000, maxLag = 5000, origin, batch = 1000, onInvalidate, l2 = false } = options;
  const { connectTimeoutMs = 10_000 } = options;
  if (typeof stream !== 'string' || stream === '') throw invalid('stream', 'expected a non-empty string');
  if (!Number.isSafeInteger(maxLen) || maxLen < 1) throw invalid('maxLen', `expected a positive integer, got ${String(maxLen)}`);
  if (typeof maxLag !== 'number' || !Number.isFinite(maxLag) || maxLag < 10 || maxLag > 2 ** 31 - 1)
    throw invalid('maxLag', `expected milliseconds from 10 to 2^31-1, got ${String(maxLag)}`);
  if (origin !== undefined && (typeof origin !== 'string' || !/^[0-9A-Za-z_-]{1,32}$/.test(origin)))
    throw invalid('origin', 'expected 1 to 32 characters of [0-9A-Za-z_-]');
  if (!Number.isSafeInteger(batch) || batch < 1 || batch > 100_000)
    throw invalid('batch', `expected an integer from 1 to 100000, got ${String(batch)}`);
  if (onInvalidate !== undefined && typeof onInvalidate !== 'function')
    throw invalid('onInvalidate', 'expected a function (table, key) => void');
  if (typeof l2 !== 'boolean') throw invalid('l2', `expected true or false, got ${String(l2)}`);
  if (!Number.isSafeInteger(connectTimeoutMs) || connectTimeoutMs < 0 || connectTimeoutMs > 2 ** 31 - 1)
    throw invalid('connectTimeoutMs', `expected milliseconds from 0 (wait for ever) to 2^31-1, got ${String(connectTimeoutMs)}`);
  return { stream, maxLen, maxLag, origin, batch, onInvalidate, l2, connectTimeoutMs };
}
