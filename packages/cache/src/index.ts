export { openCache, PileCache, CACHE_ROOT } from './PileCache';
export type { CacheOptions, CacheOverPileOptions, CacheBehaviourOptions, CacheStats, TableInfo } from './PileCache';
export { CacheTable } from './CacheTable';
export { SPECULATIVE_PROBES } from './TableResize';
export type { TableStats, PutOptions, GetOptions, PutResult, TableHook } from './TableTypes';
export type { TableOptions, CollisionMode } from './TableOptions';
export type { CacheKey } from './KeyCodec';
