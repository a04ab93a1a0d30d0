import type { CacheHost } from './CacheHost';
import type { SlotIndex } from './SlotIndex';
import type { ResolvedTableOptions } from './TableOptions';

/** A table as persisted in the cache catalog (internal). */
export interface TableMeta {
  name: string;
  id: number;
  /** Fingerprint of the values' schema, or '' for untyped values. */
  fingerprint: string;
  options: ResolvedTableOptions;
  capacity: number;
  chunkSlots: number;
  chunks: number[];
  header: number;
}

/**
 * What the cold parts of a table (resizing, recovery) work on: the state a {@link CacheTable}
 * holds, so that they are functions of it and the table's class keeps only the API and its hot
 * paths (internal).
 */
export interface TableState {
  readonly host: CacheHost;
  readonly meta: TableMeta;
  /** Replaced by a resize. */
  idx: SlotIndex;
  /** The header block's f64 words (EntryFormat's H_ and S_ constants). */
  readonly header: Float64Array;
  /** The seqlock and table version in the header block, mapped in place (TableSeqlock). */
  readonly seqWords: Uint32Array;
  readonly entryTag: number;
  readonly speculative: boolean;
  /** Stores so far in this process; after a failed grow (out of space), the next attempt waits for growRetryAt. */
  stores: number;
  growRetryAt: number;
  /**
   * No live entry expires before this time (ms): until then `count` needs no sweep. Not
   * persisted: 0 after an open, so the first `count` that may see an expired entry sweeps once.
   */
  expiryKnownUntil: number;
  /** Memory pressure: evicts one entry of the table; false when it is empty. */
  evictOne(samples: number): boolean;
  /** Frees every live entry whose expiry has passed; returns how many (ExpirySweep.sweepTable). */
  sweepExpired(now: number, shrink: boolean): number;
  /** Frees slot i's entry, found expired (a read-only table frees nothing). */
  expireSlot(i: number): void;
}
