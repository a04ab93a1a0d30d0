export { KeyvPile } from './KeyvPile';
export type { KeyvPileStoreOptions, KeyvPileEntry } from './KeyvPile';
export { attachIterator } from './KeyvIteration';
export type { KeyvPileOptions, ResolvedKeyvPileOptions } from './KeyvPileOptions';
