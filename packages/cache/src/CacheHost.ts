import type { Pile, PilePointer } from '@pile/core';
import type { KeyCodec } from './KeyCodec';
import type { PileMemory } from './PileMemory';

/** Where a table's index is, as the cache catalog says (TableMeta's fields of the same names). */
export interface StoredIndex {
  capacity: number;
  chunkSlots: number;
  chunks: number[];
}

/** What a table needs from the cache that owns it (internal). */
export interface CacheHost {
  readonly pile: Pile;
  readonly mem: PileMemory;
  readonly keys: KeyCodec;
  readonly clock: () => number;
  readonly readonly: boolean;
  /** Bumped by every memory-pressure eviction: a put re-probes when it changed under it. */
  readonly evictions: number;
  /** @throws PILE_CLOSED */
  check(): void;
  /** @throws PILE_CLOSED, PILE_READONLY */
  writable(): void;
  /** A scratch Buffer of at least `n` bytes (8-aligned, own ArrayBuffer) and its DataView. */
  scratch(n: number): { buf: Buffer; view: DataView };
  /** putRaw that evicts entries (expired first) while the pile is out of space. */
  store(bytes: Uint8Array, tag: number): PilePointer;
  /**
   * Memory pressure: frees the expired entries of every table or else evicts a batch, as a put
   * that finds the pile full does. False when there was nothing to free.
   */
  makeRoom(): boolean;
  /**
   * The index of table `id` as the pile's cache catalog names it now (a checked read of the catalog
   * record): what a read-only open re-reads when the writer gave the table a new index.
   * Undefined when the table was dropped.
   * @throws PILE_CORRUPT, PILE_LOCKED
   */
  storedIndex(id: number): StoredIndex | undefined;
  /**
   * Persists the catalog (table list, capacities, chunk pointers) with a crash-atomic pile.set.
   * With `evict` false a full pile fails the save with PILE_OUT_OF_SPACE instead of evicting:
   * a rehash saves while its entries sit in two indexes, and an eviction then would free records
   * the new index still names.
   */
  saveCatalog(evict?: boolean): void;
}
