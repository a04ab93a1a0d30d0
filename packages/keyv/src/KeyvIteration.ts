import type Keyv from 'keyv';
import { PileError } from '@pile/core';
import { KeyvPile } from './KeyvPile';

/**
 * Makes `keyv.iterator()` iterate a {@link KeyvPile} store: Keyv 5 wires its iterator only to the
 * adapters it names (sqlite, postgres, mysql, mongo, redis, valkey, etcd). Keyv's own iterator then
 * takes the store's namespace, unprefixes the keys, deserializes the values and skips expired ones,
 * as for those adapters. Returns `keyv`.
 * @throws PILE_INVALID_OPTION when `keyv`'s store is not a KeyvPile
 */
export function attachIterator<K extends Keyv>(keyv: K): K {
  const store: unknown = keyv.store;
  if (!(store instanceof KeyvPile)) throw new PileError('PILE_INVALID_OPTION', 'option keyv: its store is not a KeyvPile');
  keyv.iterator = keyv.generateIterator((namespace: string | undefined) => store.iterator(namespace));
  return keyv;
}
