export { syncCache, SyncedCache } from './SyncedCache';
export { SyncedTable } from './SyncedTable';
export type { SyncStats } from './SyncedCache';
export type { SyncOptions } from './SyncOptions';
