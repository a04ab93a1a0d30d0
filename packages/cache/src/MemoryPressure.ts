import { H_COUNT } from './EntryFormat';
import { EVICTION_SAMPLES } from './Eviction';
import type { TableState } from './TableState';

/**
 * The pile is full: frees the expired entries of every table, or else evicts a batch of entries,
 * each the lowest-priority then oldest of a sample ({@link EVICTION_SAMPLES} fresh ones and the
 * table's pool) from a table picked in proportion to its size. False when there was nothing left
 * to free. The cache's `makeRoom` (CacheHost), which counts the evictions.
 */
export function freeOrEvict(tables: TableState[], now: number): boolean {
  let freed = 0;
  for (const t of tables) freed += t.sweepExpired(now, false);
  if (freed > 0) return true;
  let total = 0;
  for (const t of tables) total += t.header[H_COUNT]!;
  if (total === 0) return false;
  const batch = Math.max(8, Math.min(1024, Math.ceil(total / 256)));
  let evicted = 0;
  for (let n = 0; n < batch && total > 0; n++) {
    let r = Math.random() * total;
    let pick = tables[0]!;
    for (const t of tables) {
      pick = t;
      r -= t.header[H_COUNT]!;
      if (r < 0) break;
    }
    if (!pick.evictOne(EVICTION_SAMPLES)) continue;
    evicted++;
    total--;
  }
  return evicted > 0;
}
