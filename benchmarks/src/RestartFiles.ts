/** Names under the restart workload's directory that its setup writes and its probes read. */
export const RESTART_FILES = {
  cache: 'cache',
  json: 'products.json',
  lmdb: 'lmdb',
  indexRoot: 'products-index',
  cacheTable: 'products',
};

/** The mapped-pile stores, each in a directory of its name: typed or generic (msgpack) records, and the segment size. */
export const PILE_STORES = ['pile', 'pile-256m', 'pile-1g', 'generic', 'generic-256m', 'generic-1g'];
