import type { CacheKey } from './KeyCodec';
import type { CollisionMode } from './TableOptions';

/** Counters of one table, persisted with it. */
export interface TableStats {
  hits: number;
  misses: number;
  inserts: number;
  replaces: number;
  overwrites: number;
  collisions: number;
  removes: number;
  expired: number;
  evicted: number;
  grows: number;
  shrinks: number;
}

/** Counters summed over every table, plus sizes. */
export interface CacheStats extends TableStats {
  /** Number of tables. */
  tables: number;
  /** Entries over all tables. */
  count: number;
  /** Slots over all tables. */
  capacity: number;
}

/** Returned by {@link PileCache.tableInfo}. */
export interface TableInfo {
  name: string;
  /** True when the table's values are typed by a schema (open it with `table(name, { schema })`). */
  typed: boolean;
  collisionMode: CollisionMode;
  /** Live entries (expired ones are not counted). */
  count: number;
  /** Slots of the index. */
  capacity: number;
  /**
   * For a typed table: the name under which the pile stores its values' schema (`pile.schemas()`
   * gives its descriptor, which is enough to decode them without the zod schema).
   */
  schemaName?: string;
}

/** Options of {@link CacheTable.put}. */
export interface PutOptions {
  /** Seconds until the entry expires; overrides the table's defaultMaxAgeSec. 0 = never. */
  maxAgeSec?: number;
  /** When the entry expires (a Date or ms since the epoch); give this or maxAgeSec, not both. */
  expiresAt?: Date | number;
  /** An int32; a speculative put may overwrite an entry of lower or equal priority. Default 0. */
  priority?: number;
}

/** Options of {@link CacheTable.get}. */
export interface GetOptions {
  /** Entries older than this (since put or rejuvenate) are treated as misses (and left in place). */
  maxAgeSec?: number;
}

/** What a put did. */
export type PutResult = 'inserted' | 'replaced' | 'overwritten' | 'collision';

/**
 * Advanced: what a replication layer (`@pile/sync`) attaches to a table with
 * {@link CacheTable.setHook}. Without a hook a table pays one field test per get and per write.
 */
export interface TableHook {
  /**
   * False while the table's copy may be stale (its replication is disconnected or lagging):
   * get and has answer a miss without looking (get counts it as a miss).
   */
  serving: boolean;
  /**
   * Entries whose sequence number is below this are treated as absent by get, has and rejuvenate
   * (left in place until replaced, removed or swept): a table epoch, 0 = none. Compare with
   * {@link CacheTable.sequence}.
   */
  epoch: number;
  /**
   * Called before a local change of `key` is written: `'put'`, `'delete'`, `'expiry'` (rejuvenate),
   * whether or not the key is present and whether or not the write then stores anything (a
   * speculative collision, a schema violation): so a crash between the two can only announce a
   * change that did not happen, never hide one. Memory-pressure evictions, expiry sweeps and
   * speculative overwrites of other keys are local and not reported. Runs synchronously; it may use
   * other tables, not this one.
   */
  changed(op: 'put' | 'delete' | 'expiry', key: CacheKey): void;
}
