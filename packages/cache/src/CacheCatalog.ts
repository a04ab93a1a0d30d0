import { PileError, type Pile, type PilePointer } from '@pile/core';
import type { TableMeta } from './TableState';

/** Root naming the cache catalog record in the pile. */
export const CACHE_ROOT = 'pile-cache';

const CATALOG_VERSION = 1;

/**
 * The cache catalog: a JSON text record under {@link CACHE_ROOT} (not a generic record: opening a
 * cache then needs no msgpackr), rewritten with a crash-atomic `pile.set` on structural changes only.
 */
export interface Catalog {
  v: number;
  /** True while a PileCache has the pile open: found true at open, the last one did not close. */
  open: boolean;
  nextId: number;
  tables: TableMeta[];
}

/**
 * The catalog stored in `pile` and its pointer; a new empty catalog (pointer undefined) when the
 * pile has none yet.
 * @throws PILE_CORRUPT when the record is not a catalog or is malformed
 * @throws PILE_FORMAT_VERSION when it was written by a newer format
 */
export function loadCatalog(pile: Pile): { catalog: Catalog; ptr: PilePointer | undefined } {
  const ptr = pile.getRoot(CACHE_ROOT);
  if (ptr === undefined) return { catalog: { v: CATALOG_VERSION, open: false, nextId: 1, tables: [] }, ptr };
  return { catalog: readCatalog(pile, ptr), ptr };
}

/**
 * The catalog record at `ptr` (a checked read in a read-only open: a whole version of it).
 * @throws PILE_CORRUPT, PILE_FORMAT_VERSION as {@link loadCatalog}
 */
export function readCatalog(pile: Pile, ptr: PilePointer): Catalog {
  const text = pile.get<unknown>(ptr);
  let c: Catalog | null = null;
  try {
    if (typeof text === 'string') c = JSON.parse(text) as Catalog;
  } catch {
    // reported below as a malformed catalog
  }
  if (c === null || typeof c !== 'object' || typeof c.v !== 'number') {
    throw new PileError('PILE_CORRUPT', `cache catalog (root '${CACHE_ROOT}', pointer ${ptr}) is not a catalog record`);
  }
  if (c.v > CATALOG_VERSION) {
    throw new PileError(
      'PILE_FORMAT_VERSION',
      `cache catalog (root '${CACHE_ROOT}') has version ${c.v}; this build reads up to ${CATALOG_VERSION}`,
    );
  }
  if (
    !Array.isArray(c.tables) ||
    typeof c.nextId !== 'number' ||
    c.tables.some((t) => typeof t?.name !== 'string' || typeof t.id !== 'number' || !Array.isArray(t.chunks))
  ) {
    throw new PileError('PILE_CORRUPT', `cache catalog (root '${CACHE_ROOT}', pointer ${ptr}) is malformed`);
  }
  return c;
}
