import { expect } from 'chai';
import { PileGraph, PileList } from '../src';
import { eachMemoryPile, expectPileError } from './helpers';

describe('graph and list values whose code calls back', () => {
  const t = eachMemoryPile();

  it('a getter may read the graph; a write from it is refused with PILE_REENTRANT and changes nothing', () => {
    const g = PileGraph.open<unknown, unknown>(t.pile, 'g');
    const a = g.addNode({ n: 'a' });
    const b = g.addNode({ n: 'b' });
    g.addEdge(a, b, { w: 1 });
    const c = g.addNode({
      get n() {
        return `after ${(g.getNode(a) as { n: string }).n}`;
      },
    });
    expect(g.getNode(c)).to.deep.equal({ n: 'after a' });
    expectPileError(
      () =>
        g.addNode({
          get n() {
            g.removeEdge(a, b);
            return 'x';
          },
        }),
      'PILE_REENTRANT',
    );
    expectPileError(
      () =>
        g.addEdge(b, a, {
          get w() {
            g.removeNode(c);
            return 2;
          },
        }),
      'PILE_REENTRANT',
    );
    expect(g.hasEdge(a, b)).to.equal(true);
    expect(g.hasEdge(b, a)).to.equal(false);
    expect(g.nodeCount).to.equal(3);
    expect(g.edgeCount).to.equal(1);
    expect(g.getNode(c)).to.deep.equal({ n: 'after a' });
    const l = PileList.open<unknown>(t.pile, 'l');
    l.append('first');
    expectPileError(
      () =>
        l.append({
          get v() {
            l.remove(l.first!);
            return 1;
          },
        }),
      'PILE_REENTRANT',
    );
    expect([...l.values()]).to.deep.equal(['first']);
    expect(t.pile.verify().ok).to.equal(true);
  });
});
