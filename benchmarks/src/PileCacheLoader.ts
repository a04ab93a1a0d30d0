/**
 * @pile/cache, loaded on first use: a child that measures another store never pays for (or
 * depends on) loading it, and a missing build fails only the peers that need it.
 */
export function loadPileCache(): typeof import('@pile/cache') {
  return require('@pile/cache') as typeof import('@pile/cache');
}
