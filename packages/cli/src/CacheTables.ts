import type { Pile } from '@pile/core';
import type { PileCache } from '@pile/cache';

/** One keyed table of a cache as `pile stats` shows it. */
export interface TableSummary {
  name: string;
  count: number;
  capacity: number;
}

/**
 * Opens the cache that lives in `pile` (loaded on demand: commands that never touch tables do
 * not pay for loading @pile/cache). The cache shares the pile; close the pile, not the cache.
 */
export async function cacheOf(pile: Pile): Promise<PileCache> {
  const { openCache } = await import('@pile/cache');
  return openCache({ pile });
}

/** Name, entry count and capacity of each table of the cache held by `pile`. */
export async function tableSummaries(pile: Pile): Promise<TableSummary[]> {
  const cache = await cacheOf(pile);
  return cache.tables().map((name) => {
    const t = cache.table(name);
    return { name, count: t.count, capacity: t.capacity };
  });
}
