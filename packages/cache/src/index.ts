export { openCache, PileCache, CACHE_ROOT } from './PileCache';
export type { CacheOptions, CacheOverPileOptions, CacheBehaviourOptions, CacheStats, TableInfo } from './PileCache';
export { CacheTable, SPECULATIVE_PROBES } from './CacheTable';
export type { TableStats, PutOptions, GetOptions, PutResult, TableHook } from './CacheTable';
export type { TableOptions, CollisionMode } from './TableOptions';
export type { CacheKey } from './KeyCodec';
