import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile } from '../src/Pile';

describe('what verify counts beside stats', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-verify-counts-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('objectsChecked is stats.objectCount; recordsChecked adds the catalog and the bodies of moved records', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const view = pile.schema('item', z.object({ id: z.number(), name: z.string() }));
    const ptrs = [];
    for (let i = 0; i < 300; i++) ptrs.push(view.put({ id: i, name: `item ${i}` }));
    // Generic values grown in place move to a larger block: the head becomes a link to a body.
    const grown = [];
    for (let i = 0; i < 5; i++) grown.push(pile.put({ i }));
    for (const p of grown) pile.set(p, { i: 0, pad: 'x'.repeat(500) });
    pile.delete(ptrs[0]!);

    const stats = pile.stats;
    expect(stats.objectCount).to.equal(304);
    expect(stats.linkCount).to.equal(5);
    const report = pile.verify();
    expect(report.ok).to.equal(true);
    expect(report.objectsChecked).to.equal(stats.objectCount);
    // one catalog record (the schema and msgpack structures) and five bodies
    expect(report.recordsChecked).to.equal(stats.objectCount + 1 + stats.linkCount);
    pile.close();

    const ro = openPile({ dir, readonly: true });
    const again = ro.verify();
    expect(again.objectsChecked).to.equal(304);
    expect(again.recordsChecked).to.equal(310);
    ro.close();
  });
});
