import { isPileError, type Pile } from '@pile/core';
import { openCache, type PileCache } from '@pile/cache';
import { storedShape } from './TableAccess';
import { zodOfShape } from './FlatSchema';

/** One keyed table of a cache as `pile stats` shows it; count and capacity are null for a typed table whose shape is not known. */
export interface TableSummary {
  name: string;
  typed: boolean;
  count: number | null;
  capacity: number | null;
}

const open = new Map<Pile, PileCache>();

/**
 * The cache that lives in `pile`, opened once per pile. Close with {@link closePile}.
 */
export async function cacheOf(pile: Pile): Promise<PileCache> {
  let cache = open.get(pile);
  if (cache === undefined) {
    cache = openCache({ pile, sweepIntervalSec: 0 });
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
 * ever wrote to has no tables. Typed tables are opened with the shape `pile import` stored.
 */
export async function tableSummaries(pile: Pile): Promise<TableSummary[]> {
  if (pile.getRoot('pile-cache') === undefined) return [];
  const cache = await cacheOf(pile);
  return cache.tables().map((name) => {
    try {
      const t = cache.table(name);
      return { name, typed: false, count: t.count, capacity: t.capacity };
    } catch (err) {
      if (!isPileError(err, 'PILE_SCHEMA_MISMATCH')) throw err;
    }
    const shape = storedShape(pile, name);
    if (shape === undefined) return { name, typed: true, count: null, capacity: null };
    const t = cache.table(name, { schema: zodOfShape(shape) });
    return { name, typed: true, count: t.count, capacity: t.capacity };
  });
}
