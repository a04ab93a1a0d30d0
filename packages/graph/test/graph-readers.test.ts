import { expect } from 'chai';
import * as path from 'node:path';
import { writerBesideReaders } from '../../core/test/fixtures/line-child';
import { isPileError, openPile } from '@pile/core';
import { openGraph } from '../src';
import { SEGMENT, removeDir, tempDir } from './helpers';

// Issue 17, point 6 for graphs: read-only processes read a graph while a writer process changes it
// (docs/concurrency.md, "Graphs beside a writer"). Every node's and edge's data is derived from its
// number and version (fixtures/graph-values.ts), so a reader recognises data never stored, torn, or
// stored for another node or pair. With the reads unchecked (RawStructure.checked false, the open
// allowed) a reader counted 47 false PILE_STALE_POINTER errors in 4 s.

const FIXTURES = path.join(__dirname, 'fixtures');
describe('graphs read by other processes while one writes', function () {
  let dir: string;
  beforeEach(() => {
    dir = tempDir('pile-graph-readers-');
  });
  afterEach(() => removeDir(dir));

  it('two read-only processes read nodes, edges and traversals with no wrong data and no false error', async () => {
    const ms = Number(process.env.PILE_GRAPH_READERS_MS ?? 4000);
    openPile({ dir, segmentSize: SEGMENT }).close();
    const { written, reports } = await writerBesideReaders(
      path.join(FIXTURES, 'graph-churn-writer.ts'),
      path.join(FIXTURES, 'graph-reader.ts'),
      2,
      { PILE_DIR: dir, PILE_MS: String(ms) },
    );
    for (const op of ['addNode', 'setNode', 'addEdge', 'deleteEdge', 'deleteNode']) expect(written[op] as number, op).to.be.above(0);
    for (const report of reports) {
      expect(report.walks as number).to.be.above(0);
      expect(report.traversals as number).to.be.above(0);
      expect(report.edgesSeen as number).to.be.above(0);
      expect({ wrong: report.wrong, errors: report.errors, problems: report.problems }).to.deep.equal({
        wrong: 0,
        errors: 0,
        problems: [],
      });
    }
  });

  it('a reader waits for an operation under way, and gets PILE_LOCKED when its writer left it half-done', () => {
    const pile = openPile({ dir, segmentSize: SEGMENT });
    const g = openGraph<string>(pile, 'g');
    const a = g.addNode('a');
    const b = g.addNode('b');
    g.addEdge(a, b);
    // What a writer killed in the middle of an operation leaves (GraphSync).
    const sync = (g as unknown as { raw: { sync: Uint32Array } }).raw.sync;
    sync[5]!++;
    const reader = openPile({ dir, readonly: true });
    const rg = openGraph<string>(reader, 'g');
    expect(() => rg.getNode(a))
      .to.throw(/being changed by a writer/)
      .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
    // The writer's next open of the graph (its repair) clears it; the reader reads again.
    openGraph<string>(pile, 'g');
    expect(rg.getNode(a)).to.equal('a');
    expect([...rg.neighbors(a)]).to.deep.equal([b]);
    reader.close();
    pile.close();
  });
});
