import type { Pile } from '@pile/core';
import type { Product } from './Product';

/** Root naming the record that says the cache table's initial load finished (one process: {@link Catalog}). */
export const LOADED_ROOT = 'catalog-server:loaded';
/** Root naming the directory of product records that node:cluster workers share ({@link WorkerCatalog}). */
export const DIRECTORY_ROOT = 'catalog-server:directory';

/**
 * What CatalogServer serves products from: the durable cache table of one process
 * ({@link Catalog}), or the typed pile records that the workers of `--workers N` share
 * ({@link WorkerCatalog}).
 */
export interface ProductStore {
  readonly pile: Pile;
  /** Products in the catalog. */
  readonly count: number;
  get(id: number): Product | undefined;
  /**
   * Reads product `id`, builds its new value with `make` (which may throw to refuse it) and stores
   * that, as one step: no other process's update of the product falls between the read and the write.
   */
  update(id: number, make: (old: Product | undefined) => Product): { product: Product; created: boolean };
  /** Every product, streamed (never gathered in memory). */
  list(): IterableIterator<Product>;
  /** The `table` (and `cache`, when there is one) fields of GET /stats. */
  stats(): Record<string, unknown>;
  /** Index slots (the table's capacity) and operation counters by outcome, for GET /metrics. */
  gauges(): { capacity: number; operations: Record<string, number> };
  close(): void;
}
