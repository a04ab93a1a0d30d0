import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile } from '@pile/core';
import { openCache } from '../src';

// A table handle keeps typed arrays over its index, which lives in the pile's mapped memory.
// Once the pile is closed (its segments unmapped), the handle must refuse, never touch the memory.

describe('cache handles after close', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-cache-closed-'));
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  for (const how of ['the cache', 'the pile under it'] as const) {
    it(`a table of a closed cache refuses every call when ${how} is closed, without a crash`, () => {
      const pile = openPile({ dir: tmp, segmentSize: 1 << 20 });
      const cache = openCache({ pile });
      const t = cache.table<{ x: number }>('t', { collisionMode: 'durable' });
      for (let i = 0; i < 2000; i++) t.put(`k${i}`, { x: i });
      // Hot lookups first, so the optimised path is what meets the closed pile.
      for (let i = 0; i < 20_000; i++) expect(t.get(`k${i % 2000}`)!.x).to.equal(i % 2000);
      if (how === 'the cache') cache.close();
      pile.close();
      for (const call of [() => t.get('k1'), () => t.has('k1'), () => t.put('k2', { x: 0 }), () => t.remove('k3'), () => [...t.keys()]]) {
        expect(call).to.throw().with.property('code', 'PILE_CLOSED');
      }
    });
  }
});
