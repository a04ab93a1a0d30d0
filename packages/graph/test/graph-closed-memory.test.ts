import { expect } from 'chai';
import { openPile } from '@pile/core';
import { PileGraph, PileList } from '../src';

// Lists and graphs read their nodes' raw blocks in place; after the pile is closed (its segments
// unmapped), their handles must refuse, never touch the memory.

describe('graph and list handles after close', () => {
  it('refuse every call once the pile is closed, without a crash', () => {
    const pile = openPile({ segmentSize: 1 << 20 });
    const list = PileList.open<string>(pile, 'l');
    const graph = PileGraph.open<string>(pile, 'g');
    const nodes = [];
    for (let i = 0; i < 500; i++) nodes.push(graph.addNode(`n${i}`));
    for (let i = 1; i < 500; i++) graph.addEdge(nodes[i - 1]!, nodes[i]!);
    const first = list.append('a');
    for (let i = 0; i < 500; i++) list.append(`v${i}`);
    let steps = 0;
    for (let r = 0; r < 20; r++) for (const s of graph.traverse(nodes[0]!)) steps += s.depth >= 0 ? 1 : 0;
    expect(steps).to.equal(20 * 500);
    pile.close();
    for (const call of [
      () => list.get(first),
      () => [...list.values()],
      () => list.append('b'),
      () => graph.getNode(nodes[0]!),
      () => [...graph.neighbors(nodes[0]!)],
      () => graph.hasEdge(nodes[0]!, nodes[1]!),
      () => [...graph.traverse(nodes[0]!)],
    ]) {
      expect(call).to.throw().with.property('code', 'PILE_CLOSED');
    }
  });
});
