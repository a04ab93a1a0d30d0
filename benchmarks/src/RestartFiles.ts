/** Names under the restart workload's directory that its setup writes and its probes read. */
export const RESTART_FILES = {
  cache: 'cache',
  json: 'products.json',
  lmdb: 'lmdb',
  indexRoot: 'products-index',
  cacheTable: 'products',
};
