import { openCache, type CacheOptions, type PileCache } from '@pile/cache';
import type { CacheAccess } from './CacheAccess';
import { HeldCache } from './HeldCache';
import { invalidKeyvOption, type ResolvedKeyvPileOptions } from './KeyvPileOptions';
import { SharedTurns } from './SharedTurns';

/** The options that decide how a directory's cache is opened: every KeyvPile of it in a process must agree on them. */
const OPEN_OPTIONS = ['shared', 'segmentSize', 'maxMemory', 'verifyOnRead', 'sweepIntervalSec', 'lockTimeoutMs', 'turnMs'] as const;

interface Entry {
  access: CacheAccess;
  users: number;
  options: ResolvedKeyvPileOptions;
  /** Errors no operation carries (closing a shared turn), passed to every KeyvPile of the directory. */
  listeners: Set<(err: unknown) => void>;
}

/** One access per directory in this process: a pile directory has one writing open per thread. */
const open = new Map<string, Entry>();

/** A KeyvPile's share of a directory's cache; {@link CacheLease.release} once, at disconnect. */
export interface CacheLease {
  readonly access: CacheAccess;
  release(): void;
}

function cacheOptions(o: ResolvedKeyvPileOptions): CacheOptions {
  const c: CacheOptions = { dir: o.dir, sweepIntervalSec: o.shared ? 0 : o.sweepIntervalSec, verifyOnRead: o.verifyOnRead };
  if (o.segmentSize !== undefined) c.segmentSize = o.segmentSize;
  if (o.maxMemory !== undefined) c.maxMemory = o.maxMemory;
  return c;
}

/**
 * The access to `o.dir`'s cache, opened by the first KeyvPile of the directory in this process and
 * shared by the later ones (as Keyv's test suite makes a store per Keyv over one database), closed
 * when the last one releases it.
 * @throws PILE_INVALID_OPTION when another KeyvPile of this process opened the directory with other
 *   open options (shared, segmentSize, maxMemory, verifyOnRead, sweepIntervalSec, lockTimeoutMs, turnMs), naming the option
 * @throws whatever opening the cache throws (HeldCache): PILE_LOCKED, PILE_CORRUPT, PILE_IO, ...
 */
export function leaseCache(o: ResolvedKeyvPileOptions, onError: (err: unknown) => void): CacheLease {
  let entry = open.get(o.dir);
  if (entry !== undefined) {
    for (const k of OPEN_OPTIONS) {
      if (entry.options[k] !== o[k]) {
        throw invalidKeyvOption(
          k,
          `another KeyvPile of this process has ${o.dir} open with ${k} ${String(entry.options[k])}, not ${String(o[k])}: the KeyvPiles of one directory share its cache and must agree on it`,
        );
      }
    }
  } else {
    const listeners = new Set<(err: unknown) => void>();
    const openIt = (): PileCache => openCache(cacheOptions(o));
    const access: CacheAccess = o.shared
      ? new SharedTurns(openIt, {
          dir: o.dir,
          lockTimeoutMs: o.lockTimeoutMs,
          turnMs: o.turnMs,
          sweepIntervalSec: o.sweepIntervalSec,
          onError: (err) => {
            for (const l of listeners) l(err);
          },
        })
      : new HeldCache(openIt, o.dir);
    entry = { access, users: 0, options: o, listeners };
    open.set(o.dir, entry);
  }
  const e = entry;
  e.users++;
  e.listeners.add(onError);
  let released = false;
  return {
    access: e.access,
    release(): void {
      if (released) return;
      released = true;
      e.listeners.delete(onError);
      if (--e.users > 0) return;
      open.delete(o.dir);
      e.access.close();
    },
  };
}
