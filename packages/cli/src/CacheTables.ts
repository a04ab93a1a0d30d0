import { isPileError, type Pile } from '@pile/core';
import { openCache, type PileCache } from '@pile/cache';
import { CliError, EXIT_CANNOT_OPEN } from './CliError';
import { Progress } from './Progress';

/** One keyed table of a cache as `pile stats` shows it. */
export interface TableSummary {
  name: string;
  typed: boolean;
  count: number;
  capacity: number;
}

const open = new Map<Pile, PileCache>();

/**
 * The cache that lives in `pile`, opened once per pile. Close with {@link closePile}.
 */
export async function cacheOf(pile: Pile): Promise<PileCache> {
  let cache = open.get(pile);
  if (cache === undefined) {
    // After a crash the cache checks its indexes and the pile's records: a progress bar on a terminal.
    const bar = new Progress('recovering cache', 'items');
    try {
      cache = openCache({ pile, sweepIntervalSec: 0, onProgress: (p) => bar.update(p.done, p.total) });
    } catch (err) {
      if (isPileError(err, 'PILE_LOCKED')) throw new CliError(`${pile.dir ?? ''} is locked: ${err.message}`, EXIT_CANNOT_OPEN);
      throw err;
    } finally {
      bar.stop();
    }
    open.set(pile, cache);
  }
  return cache;
}

/** Closes the cache opened on `pile` (marking it cleanly closed), then the pile. Idempotent. */
export function closePile(pile: Pile): void {
  const cache = open.get(pile);
  open.delete(pile);
  try {
    if (cache !== undefined && !pile.isClosed) cache.close();
  } finally {
    pile.close();
  }
}

/**
 * Name, entry count and capacity of each table of the cache held by `pile`. A pile no cache
 * ever wrote to has no tables. Typed tables are described without their schema.
 */
export async function tableSummaries(pile: Pile): Promise<TableSummary[]> {
  if (pile.getRoot('pile-cache') === undefined) return [];
  const cache = await cacheOf(pile);
  return cache.tables().map((name) => {
    const info = cache.tableInfo(name)!;
    return { name, typed: info.typed, count: info.count, capacity: info.capacity };
  });
}
