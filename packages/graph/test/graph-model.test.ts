import { expect } from 'chai';
import fc from 'fast-check';
import { openPile, type Pile, type PilePointer } from '@pile/core';
import { PileGraph } from '../src';
import { SEGMENT, expectPileError, removeDir, tempDir } from './helpers';

type Op =
  | { t: 'addNode'; v: number }
  | { t: 'setNode'; i: number; v: string }
  | { t: 'removeNode'; i: number }
  | { t: 'addEdge'; i: number; j: number; d: number | undefined }
  | { t: 'removeEdge'; i: number; j: number }
  | { t: 'reopen' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant('addNode' as const), v: fc.integer() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('setNode' as const), i: fc.nat(), v: fc.string({ maxLength: 40 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('removeNode' as const), i: fc.nat() }) },
  {
    weight: 8,
    arbitrary: fc.record({ t: fc.constant('addEdge' as const), i: fc.nat(), j: fc.nat(), d: fc.option(fc.integer(), { nil: undefined }) }),
  },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('removeEdge' as const), i: fc.nat(), j: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ t: 'reopen' as const }) },
);

/** The model: node id -> data, and an adjacency Map per node (target -> edge data). */
interface Model {
  data: Map<PilePointer, unknown>;
  out: Map<PilePointer, Map<PilePointer, number | undefined>>;
}

function bfsModel(m: Model, start: PilePointer, dir: 'out' | 'in' | 'both'): Map<PilePointer, number> {
  const dist = new Map<PilePointer, number>([[start, 0]]);
  const queue = [start];
  while (queue.length > 0) {
    const p = queue.shift()!;
    const next: PilePointer[] = [];
    if (dir !== 'in') next.push(...m.out.get(p)!.keys());
    if (dir !== 'out') for (const [u, adj] of m.out) if (adj.has(p)) next.push(u);
    for (const q of next) {
      if (!dist.has(q)) {
        dist.set(q, dist.get(p)! + 1);
        queue.push(q);
      }
    }
  }
  return dist;
}

function check(g: PileGraph<unknown, number>, m: Model, removed: PilePointer[]): void {
  const ids = [...m.data.keys()];
  expect(g.nodeCount).to.equal(ids.length);
  let edges = 0;
  for (const adj of m.out.values()) edges += adj.size;
  expect(g.edgeCount).to.equal(edges);
  expect(new Set(g.nodes())).to.deep.equal(new Set(ids));
  for (const id of ids) {
    expect(g.getNode(id)).to.deep.equal(m.data.get(id));
    const out = m.out.get(id)!;
    const inn = ids.filter((u) => m.out.get(u)!.has(id));
    expect(new Set(g.neighbors(id))).to.deep.equal(new Set(out.keys()));
    expect(new Set(g.neighbors(id, 'in'))).to.deep.equal(new Set(inn));
    expect(new Set(g.neighbors(id, 'both'))).to.deep.equal(new Set([...out.keys(), ...inn]));
    expect(g.degree(id, 'both')).to.equal(out.size + inn.length);
    for (const to of ids) {
      expect(g.hasEdge(id, to)).to.equal(out.has(to));
      expect(g.edge(id, to)).to.equal(out.get(to));
    }
  }
  if (ids.length > 0) {
    const start = ids[0]!;
    for (const dir of ['out', 'in', 'both'] as const) {
      const got = new Map([...g.traverse(start, { direction: dir })].map((s) => [s.node, s.depth]));
      expect(got).to.deep.equal(bfsModel(m, start, dir));
      const dfs = [...g.traverse(start, { direction: dir, order: 'dfs' })];
      expect(new Set(dfs.map((s) => s.node))).to.deep.equal(new Set(got.keys()));
      expect(dfs.length).to.equal(got.size);
    }
  }
  for (const r of removed) expectPileError(() => g.getNode(r), 'PILE_STALE_POINTER');
}

describe('PileGraph against a Map model (fast-check)', () => {
  it('agrees with the model through random operations and reopens', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 60 }), (ops) => {
        const dir = tempDir();
        let pile: Pile = openPile({ dir, segmentSize: SEGMENT });
        try {
          let g = PileGraph.open<unknown, number>(pile, 'model');
          const m: Model = { data: new Map(), out: new Map() };
          const removed: PilePointer[] = [];
          const pick = (i: number): PilePointer | undefined => {
            const ids = [...m.data.keys()];
            return ids.length === 0 ? undefined : ids[i % ids.length];
          };
          for (const op of ops) {
            switch (op.t) {
              case 'addNode': {
                const id = g.addNode(op.v);
                m.data.set(id, op.v);
                m.out.set(id, new Map());
                break;
              }
              case 'setNode': {
                const id = pick(op.i);
                if (id === undefined) break;
                g.setNode(id, op.v);
                m.data.set(id, op.v);
                break;
              }
              case 'removeNode': {
                const id = pick(op.i);
                if (id === undefined) break;
                g.removeNode(id);
                m.data.delete(id);
                m.out.delete(id);
                for (const adj of m.out.values()) adj.delete(id);
                removed.push(id);
                break;
              }
              case 'addEdge': {
                const a = pick(op.i);
                const b = pick(op.j);
                if (a === undefined || b === undefined) break;
                g.addEdge(a, b, op.d);
                m.out.get(a)!.set(b, op.d);
                break;
              }
              case 'removeEdge': {
                const a = pick(op.i);
                const b = pick(op.j);
                if (a === undefined || b === undefined) break;
                expect(g.removeEdge(a, b)).to.equal(m.out.get(a)!.delete(b));
                break;
              }
              case 'reopen':
                pile.close();
                pile = openPile({ dir });
                g = PileGraph.open<unknown, number>(pile, 'model');
                break;
            }
          }
          check(g, m, removed);
          pile.close();
          pile = openPile({ dir });
          check(PileGraph.open<unknown, number>(pile, 'model'), m, removed);
          expect(pile.verify().ok).to.equal(true);
        } finally {
          pile.close();
          removeDir(dir);
        }
      }),
      { numRuns: 60 },
    );
  });
});
