import type { Pile, PilePointer } from '@pile/core';
import type { KeyCodec } from './KeyCodec';
import type { PileMemory } from './PileMemory';

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
  /** Persists the catalog (table list, capacities, chunk pointers) with a crash-atomic pile.set. */
  saveCatalog(): void;
}
