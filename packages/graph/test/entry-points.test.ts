import { expect } from 'chai';
import { z } from 'zod';
import { PileGraph, PileList, openGraph, openList } from '../src';
import { eachMemoryPile, expectPileError } from './helpers';

describe('graph entry points and names', () => {
  const t = eachMemoryPile();

  it('openList and openGraph open what PileList.open and PileGraph.open open, by name', () => {
    const l = openList(t.pile, 'jobs', { schema: z.object({ id: z.number() }) });
    l.append({ id: 1 });
    expect([...PileList.open(t.pile, 'jobs', { schema: z.object({ id: z.number() }) }).values()]).to.deep.equal([{ id: 1 }]);
    const g = openGraph<string, number>(t.pile, 'g');
    const a = g.addNode('a');
    const b = g.addNode('b');
    g.addEdge(a, b, 7);
    expect(PileGraph.open<string, number>(t.pile, 'g').edge(a, b)).to.equal(7);
  });

  it('delete, deleteNode and deleteEdge, with remove, removeNode and removeEdge kept as aliases', () => {
    const l = openList<string>(t.pile, 'l');
    const x = l.append('x');
    const y = l.append('y');
    l.delete(x);
    expect([...l.values()]).to.deep.equal(['y']);
    l.remove(y);
    expect(l.length).to.equal(0);
    expectPileError(() => l.get(x), 'PILE_STALE_POINTER');

    const g = openGraph<string>(t.pile, 'g');
    const [a, b, c] = ['a', 'b', 'c'].map((n) => g.addNode(n)) as [never, never, never];
    g.addEdge(a, b);
    g.addEdge(b, c);
    expect(g.deleteEdge(a, b)).to.equal(true);
    expect(g.removeEdge(b, c)).to.equal(true);
    expect(g.deleteEdge(a, b)).to.equal(false);
    expect(g.edgeCount).to.equal(0);
    g.deleteNode(a);
    g.removeNode(b);
    expect(g.nodeCount).to.equal(1);
    expectPileError(() => g.getNode(a), 'PILE_STALE_POINTER');
  });
});
