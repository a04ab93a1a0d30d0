export { syncCache, SyncedCache, SyncedTable } from './SyncedCache';
export type { SyncStats } from './SyncedCache';
export type { SyncOptions } from './SyncOptions';
