// @keyv/test-suite, unmodified, against KeyvPile: the API, value, namespace and iterator tests.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as test from 'vitest';
import keyvTestSuite, { keyvIteratorTests } from '@keyv/test-suite';
import { Keyv, type KeyvOptions } from 'keyv';
import { KeyvPile, attachIterator } from '../../src';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-keyv-suite-'));
test.afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// A store per call, as the suite expects (it makes a Keyv per test): they share the directory's cache.
const store = (): KeyvPile => new KeyvPile({ dir, table: 'suite' });

// Keyv 5 wires keyv.iterator() only for the adapters it names; attachIterator does it for KeyvPile.
class IterableKeyv extends Keyv {
  constructor(options?: KeyvOptions) {
    super(options);
    if (this.store instanceof KeyvPile) attachIterator(this); // one test makes a Keyv over its default Map
  }
}

keyvTestSuite(test, IterableKeyv, store);
keyvIteratorTests(test, IterableKeyv, store);
