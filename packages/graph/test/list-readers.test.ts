import { expect } from 'chai';
import * as path from 'node:path';
import { writerBesideReaders } from '../../core/test/fixtures/line-child';
import { isPileError, openPile } from '@pile/core';
import { openList } from '../src';
import { SEGMENT, removeDir, tempDir } from './helpers';

// Issue 17, point 6 for lists: read-only processes read a list while a writer process changes it
// (docs/concurrency.md, "Graphs and lists beside a writer"), through the seqlock lists now share
// with graphs (GraphSync, root list:<name>:sync). Every element's value is derived from its number
// and version (fixtures/graph-values.ts), so a reader recognises a value never stored or torn.

const FIXTURES = path.join(__dirname, 'fixtures');
describe('lists read by other processes while one writes', function () {
  let dir: string;
  beforeEach(() => {
    dir = tempDir('pile-list-readers-');
  });
  afterEach(() => removeDir(dir));

  it('two read-only processes walk, get and step through a list with no wrong data and no false error', async () => {
    const ms = Number(process.env.PILE_LIST_READERS_MS ?? 4000);
    openPile({ dir, segmentSize: SEGMENT }).close();
    const { written, reports } = await writerBesideReaders(
      path.join(FIXTURES, 'list-churn-writer.ts'),
      path.join(FIXTURES, 'list-reader.ts'),
      2,
      { PILE_DIR: dir, PILE_MS: String(ms) },
    );
    for (const op of ['append', 'prepend', 'insertAfter', 'set', 'delete']) expect(written[op] as number, op).to.be.above(0);
    for (const report of reports) {
      expect(report.walks as number).to.be.above(0);
      expect(report.nodesSeen as number).to.be.above(0);
      expect({ wrong: report.wrong, errors: report.errors, problems: report.problems }).to.deep.equal({
        wrong: 0,
        errors: 0,
        problems: [],
      });
    }
  });

  it('a reader reads what the writer wrote, waits for an operation under way, and gets PILE_LOCKED when its writer left it half-done', () => {
    const pile = openPile({ dir, segmentSize: SEGMENT });
    const l = openList<string>(pile, 'l');
    const a = l.append('a');
    const b = l.append('b');
    const reader = openPile({ dir, readonly: true });
    const rl = openList<string>(reader, 'l');
    expect([...rl.values()]).to.deep.equal(['a', 'b']);
    expect(rl.length).to.equal(2);
    expect(rl.next(a)).to.equal(b);
    // What a writer killed in the middle of an operation leaves (GraphSync).
    const sync = (l as unknown as { raw: { sync: Uint32Array } }).raw.sync;
    sync[5]!++;
    expect(() => rl.get(a))
      .to.throw(/being changed by a writer/)
      .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
    // The writer's next open of the list clears it (its repair); the reader reads again.
    openList<string>(pile, 'l');
    expect(rl.get(b)).to.equal('b');
    expect([...rl.reversed()]).to.deep.equal(['b', 'a']);
    reader.close();
    pile.close();
  });

  it('a list without a seqlock (no writer of this version opened it) is refused to a read-only open beside a writer', () => {
    const pile = openPile({ dir, segmentSize: SEGMENT });
    openList<string>(pile, 'l').append('x');
    // A list an earlier version made and wrote: no sync block.
    pile.setRoot('list:l:sync', null);
    const reader = openPile({ dir, readonly: true });
    expect(() => openList<string>(reader, 'l'))
      .to.throw()
      .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
    reader.close();
    pile.close();
  });
});
