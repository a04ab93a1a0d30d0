export { openCache, PileCache } from './PileCache';
export { CACHE_ROOT } from './CacheCatalog';
export type { CacheOptions, CacheOverPileOptions, CacheBehaviourOptions } from './CacheOptions';
export { CacheTable } from './CacheTable';
export { SPECULATIVE_PROBES } from './TableResize';
export type { TableStats, PutOptions, GetOptions, PutResult, TableHook, CacheStats, TableInfo } from './TableTypes';
export type { TableOptions, CollisionMode } from './TableOptions';
export type { CacheKey } from './KeyCodec';
