import { expect } from 'chai';
import { z } from 'zod';
import { openPile, type PilePointer } from '@pile/core';
import { PileGraph } from '../src';
import { SEGMENT, eachMemoryPile, eachTempDir, expectPileError } from './helpers';

describe('PileGraph operations', () => {
  const t = eachMemoryPile();

  it('stores node data and reads it back by id', () => {
    const g = PileGraph.open<{ name: string } | string>(t.pile, 'g');
    const a = g.addNode({ name: 'ada' });
    const b = g.addNode('plain string');
    expect(g.getNode(a)).to.deep.equal({ name: 'ada' });
    expect(g.getNode(b)).to.equal('plain string');
    expect(g.nodeCount).to.equal(2);
    expect(g.hasNode(a)).to.equal(true);
  });

  it('setNode replaces data in place and keeps id and edges, also when the value grows', () => {
    const g = PileGraph.open<string>(t.pile, 'g');
    const a = g.addNode('a');
    const b = g.addNode('b');
    g.addEdge(a, b);
    g.setNode(a, 'x'.repeat(5000));
    expect(g.getNode(a)).to.equal('x'.repeat(5000));
    expect(g.hasEdge(a, b)).to.equal(true);
    g.setNode(a, 'short');
    expect(g.getNode(a)).to.equal('short');
  });

  it('adds, finds and removes edges with and without data', () => {
    const g = PileGraph.open<number, { w: number }>(t.pile, 'g');
    const [a, b, c] = [g.addNode(1), g.addNode(2), g.addNode(3)];
    g.addEdge(a, b, { w: 7 });
    g.addEdge(b, c);
    expect(g.hasEdge(a, b)).to.equal(true);
    expect(g.hasEdge(b, a)).to.equal(false);
    expect(g.edge(a, b)).to.deep.equal({ w: 7 });
    expect(g.edge(b, c)).to.equal(undefined);
    expect(g.edge(c, a)).to.equal(undefined);
    expect(g.edgeCount).to.equal(2);
    expect(g.removeEdge(a, b)).to.equal(true);
    expect(g.removeEdge(a, b)).to.equal(false);
    expect(g.hasEdge(a, b)).to.equal(false);
    expect(g.edgeCount).to.equal(1);
  });

  it('adding an existing edge replaces its data; undefined clears it; no duplicate edge', () => {
    const g = PileGraph.open<number, string>(t.pile, 'g');
    const [a, b] = [g.addNode(1), g.addNode(2)];
    g.addEdge(a, b, 'one');
    g.addEdge(a, b, 'two, and longer than the first one by a good margin');
    expect(g.edge(a, b)).to.equal('two, and longer than the first one by a good margin');
    g.addEdge(a, b);
    expect(g.edge(a, b)).to.equal(undefined);
    g.addEdge(a, b, 'three');
    expect(g.edge(a, b)).to.equal('three');
    expect(g.edgeCount).to.equal(1);
    expect(g.degree(a)).to.equal(1);
    expect(g.degree(b, 'in')).to.equal(1);
  });

  it('neighbors and degree by direction, self-loops included once per neighbor', () => {
    const g = PileGraph.open<string>(t.pile, 'g');
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((s) => g.addNode(s)) as [PilePointer, PilePointer, PilePointer, PilePointer];
    g.addEdge(a, b);
    g.addEdge(a, c);
    g.addEdge(c, a);
    g.addEdge(d, a);
    g.addEdge(a, a);
    const names = (it: Iterable<PilePointer>): string[] => [...it].map((p) => g.getNode(p)).sort();
    expect(names(g.neighbors(a))).to.deep.equal(['a', 'b', 'c']);
    expect(names(g.neighbors(a, 'in'))).to.deep.equal(['a', 'c', 'd']);
    expect(names(g.neighbors(a, 'both'))).to.deep.equal(['a', 'b', 'c', 'd']);
    expect(g.degree(a)).to.equal(3);
    expect(g.degree(a, 'in')).to.equal(3);
    expect(g.degree(a, 'both')).to.equal(6);
    expect(g.degree(b, 'both')).to.equal(1);
    expectPileError(() => g.degree(a, 'sideways' as never), 'PILE_INVALID_OPTION', /direction/);
  });

  it('handles a node with tens of thousands of edges (hash tables grow and shrink)', () => {
    const g = PileGraph.open<number>(t.pile, 'g');
    const hub = g.addNode(-1);
    const leaves: PilePointer[] = [];
    for (let i = 0; i < 20000; i++) {
      const x = g.addNode(i);
      leaves.push(x);
      g.addEdge(hub, x);
      if (i % 2 === 0) g.addEdge(x, hub);
    }
    expect(g.degree(hub)).to.equal(20000);
    expect(g.degree(hub, 'in')).to.equal(10000);
    for (let i = 0; i < 20000; i += 997) {
      expect(g.hasEdge(hub, leaves[i]!)).to.equal(true);
      expect(g.hasEdge(leaves[i]!, hub)).to.equal(i % 2 === 0);
    }
    const before = t.pile.stats.allocatedBytes;
    for (let i = 0; i < 19990; i++) g.removeEdge(hub, leaves[i]!);
    expect(g.degree(hub)).to.equal(10);
    expect(t.pile.stats.allocatedBytes).to.be.lessThan(before - 200_000); // the 20k-slot table moved to a small block
    expect(new Set(g.neighbors(hub))).to.deep.equal(new Set(leaves.slice(19990)));
  });

  it('removeNode removes its edges both ways, frees its space, and its id goes stale', () => {
    const g = PileGraph.open<string, string>(t.pile, 'g');
    const base = t.pile.stats.objectCount;
    const [a, b, c] = [g.addNode('a'), g.addNode('b'), g.addNode('c')];
    g.addEdge(a, b, 'ab');
    g.addEdge(b, a, 'ba');
    g.addEdge(b, c, 'bc');
    g.addEdge(b, b, 'bb');
    g.removeNode(b);
    expect(g.nodeCount).to.equal(2);
    expect(g.edgeCount).to.equal(0);
    expect(g.degree(a, 'both')).to.equal(0);
    expect(g.degree(c, 'both')).to.equal(0);
    expectPileError(() => g.getNode(b), 'PILE_STALE_POINTER');
    expectPileError(() => g.hasEdge(a, b), 'PILE_STALE_POINTER');
    expectPileError(() => g.addEdge(a, b), 'PILE_STALE_POINTER');
    expectPileError(() => g.removeNode(b), 'PILE_STALE_POINTER');
    expect(g.hasNode(b)).to.equal(false);
    g.removeNode(a);
    g.removeNode(c);
    expect(t.pile.stats.objectCount).to.equal(base);
    expect(t.pile.verify().ok).to.equal(true);
  });

  it('traverses lazily: bfs depths are shortest distances, dfs goes deep first, maxDepth and direction apply', () => {
    const g = PileGraph.open<string>(t.pile, 'g');
    const n: Record<string, PilePointer> = {};
    for (const s of ['a', 'b', 'c', 'd', 'e', 'f']) n[s] = g.addNode(s);
    const e = (x: string, y: string): void => g.addEdge(n[x]!, n[y]!);
    e('a', 'b');
    e('a', 'c');
    e('b', 'd');
    e('c', 'd');
    e('d', 'e');
    e('a', 'e');
    e('f', 'a');
    const run = (it: Iterable<{ node: PilePointer; depth: number }>): Record<string, number> =>
      Object.fromEntries([...it].map((s) => [g.getNode(s.node), s.depth]));
    expect(run(g.traverse(n.a!))).to.deep.equal({ a: 0, b: 1, c: 1, e: 1, d: 2 });
    expect(run(g.traverse(n.a!, { maxDepth: 1 }))).to.deep.equal({ a: 0, b: 1, c: 1, e: 1 });
    expect(run(g.traverse(n.a!, { maxDepth: 0 }))).to.deep.equal({ a: 0 });
    expect(run(g.traverse(n.e!, { direction: 'in' }))).to.deep.equal({ e: 0, d: 1, a: 1, b: 2, c: 2, f: 2 });
    expect(run(g.traverse(n.b!, { direction: 'both' }))).to.deep.equal({ b: 0, a: 1, d: 1, c: 2, e: 2, f: 2 });
    // dfs on a chain reports the depth along the path
    const dfs = [...g.traverse(n.f!, { order: 'dfs' })];
    expect(dfs[0]).to.deep.equal({ node: n.f, depth: 0 });
    expect(new Set(dfs.map((s) => g.getNode(s.node)))).to.deep.equal(new Set(['a', 'b', 'c', 'd', 'e', 'f']));
    for (let i = 1; i < dfs.length; i++) expect(dfs[i]!.depth).to.be.at.most(dfs[i - 1]!.depth + 1);
    // lazy: taking the first step does not visit the rest, and a removed node is skipped
    const it = g.traverse(n.a!);
    expect(it.next().value).to.deep.equal({ node: n.a, depth: 0 });
    g.removeNode(n.c!);
    expect(run(it)).to.deep.equal({ b: 1, e: 1, d: 2 });
    expectPileError(() => g.traverse(n.a!, { order: 'random' as never }), 'PILE_INVALID_OPTION', /order/);
    expectPileError(() => g.traverse(n.a!, { maxDepth: -1 }), 'PILE_INVALID_OPTION', /maxDepth/);
    expectPileError(() => g.traverse(n.c!), 'PILE_STALE_POINTER');
  });

  it('nodes() yields every node once and tolerates removing the current node', () => {
    const g = PileGraph.open<number>(t.pile, 'g');
    const ids = new Set<PilePointer>();
    for (let i = 0; i < 50; i++) ids.add(g.addNode(i));
    expect(new Set(g.nodes())).to.deep.equal(ids);
    let seen = 0;
    for (const id of g.nodes()) {
      g.removeNode(id);
      seen++;
    }
    expect(seen).to.equal(50);
    expect(g.nodeCount).to.equal(0);
    expect([...g.nodes()]).to.deep.equal([]);
  });

  it('rejects pointers that are not nodes of this graph', () => {
    const g = PileGraph.open<number>(t.pile, 'g');
    const h = PileGraph.open<number>(t.pile, 'h');
    const a = g.addNode(1);
    const x = h.addNode(2);
    const rec = t.pile.put({ not: 'a node' });
    expectPileError(() => g.getNode(x), 'PILE_INVALID_POINTER', /not a node of graph 'g'/);
    expectPileError(() => g.addEdge(a, x), 'PILE_INVALID_POINTER');
    expectPileError(() => g.getNode(rec), 'PILE_INVALID_POINTER');
    expectPileError(() => g.getNode(123456789 as PilePointer), 'PILE_INVALID_POINTER');
    expect(g.hasNode(x)).to.equal(false);
  });

  it('validates open options', () => {
    expectPileError(() => PileGraph.open(t.pile, ''), 'PILE_INVALID_OPTION', /name/);
    expectPileError(() => PileGraph.open(t.pile, 'g', { nodeSchema: 5 } as never), 'PILE_INVALID_OPTION', /nodeSchema/);
    expectPileError(() => PileGraph.open(t.pile, 'g', { colour: 'red' } as never), 'PILE_INVALID_OPTION', /colour/);
    t.pile.put('x');
    t.pile.setRoot('graph:bogus', t.pile.put('not a graph'));
    expectPileError(() => PileGraph.open(t.pile, 'bogus'), 'PILE_CORRUPT', /graph:bogus/);
  });

  it('typed node and edge schemas use the compiled codec and reject bad values', () => {
    const User = z.object({ handle: z.string(), age: z.number() });
    const Follow = z.object({ since: z.number() });
    const g = PileGraph.open(t.pile, 'typed', { nodeSchema: User, edgeSchema: Follow });
    const a = g.addNode({ handle: 'ada', age: 36 });
    const b = g.addNode({ handle: 'bob', age: 40 });
    g.addEdge(a, b, { since: 2020 });
    expect(g.getNode(a)).to.deep.equal({ handle: 'ada', age: 36 });
    expect(g.edge(a, b)).to.deep.equal({ since: 2020 });
    const objects = t.pile.stats.objectCount;
    expectPileError(() => g.addNode({ handle: 7 } as never), 'PILE_SCHEMA_VIOLATION');
    expectPileError(() => g.addEdge(b, a, { since: 'then' } as never), 'PILE_SCHEMA_VIOLATION');
    expect(t.pile.stats.objectCount).to.equal(objects);
    expect(g.nodeCount).to.equal(2);
    expect(g.edgeCount).to.equal(1);
    expect([...t.pile.entries()].filter((e) => e.kind === 'typed')).to.have.length(3);
  });

  it('throws PILE_CLOSED after the pile is closed', () => {
    const g = PileGraph.open<number>(t.pile, 'g');
    const a = g.addNode(1);
    t.pile.close();
    expectPileError(() => g.getNode(a), 'PILE_CLOSED');
    expectPileError(() => g.addNode(2), 'PILE_CLOSED');
    expectPileError(() => g.nodeCount, 'PILE_CLOSED');
    expectPileError(() => g.nodes(), 'PILE_CLOSED');
  });
});

describe('PileGraph persistence', () => {
  const tmp = eachTempDir();

  it('survives close and reopen: nodes, edges, data, counters, ids', () => {
    let pile = openPile({ dir: tmp.dir, segmentSize: SEGMENT });
    let g = PileGraph.open<string, number>(pile, 'g');
    const a = g.addNode('a');
    const b = g.addNode('b');
    const c = g.addNode('c');
    g.addEdge(a, b, 1);
    g.addEdge(b, c, 2);
    g.addEdge(c, a);
    g.removeNode(c);
    pile.close();
    pile = openPile({ dir: tmp.dir });
    g = PileGraph.open<string, number>(pile, 'g');
    expect(g.nodeCount).to.equal(2);
    expect(g.edgeCount).to.equal(1);
    expect(g.getNode(a)).to.equal('a');
    expect(g.edge(a, b)).to.equal(1);
    expect(g.degree(b, 'both')).to.equal(1);
    expectPileError(() => g.getNode(c), 'PILE_STALE_POINTER');
    expect([...g.traverse(a)].map((s) => s.node)).to.deep.equal([a, b]);
    expect(pile.verify().ok).to.equal(true);
    pile.close();
  });

  it('reads in a read-only pile and refuses writes', () => {
    let pile = openPile({ dir: tmp.dir, segmentSize: SEGMENT });
    const g = PileGraph.open<string>(pile, 'g');
    const a = g.addNode('a');
    const b = g.addNode('b');
    g.addEdge(a, b);
    pile.close();
    pile = openPile({ dir: tmp.dir, readonly: true });
    const r = PileGraph.open<string>(pile, 'g');
    expect([...r.neighbors(a)]).to.deep.equal([b]);
    expectPileError(() => r.addNode('c'), 'PILE_READONLY');
    expectPileError(() => r.addEdge(b, a), 'PILE_READONLY');
    expectPileError(() => r.removeNode(a), 'PILE_READONLY');
    expectPileError(() => PileGraph.open(pile, 'missing'), 'PILE_READONLY');
    pile.close();
  });
});
