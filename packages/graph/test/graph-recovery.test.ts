import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { expect } from 'chai';
import { openPile, type Pile } from '@pile/core';
import { PileGraph, PileList } from '../src';
import {
  GRAPH_SCENARIOS,
  LIST_SCENARIOS,
  buildBase,
  buildList,
  graphProblems,
  injectFault,
  shapeOf,
  type GraphShape,
} from './fixtures/scenarios';
import { SEGMENT, eachTempDir } from './helpers';

class Interrupted extends Error {}
const interrupt = (): never => {
  throw new Interrupted('interrupted');
};

/** Pile calls the scenario makes when it runs to the end. */
function callsOf(run: (pile: Pile) => void, setup: (pile: Pile) => void): number {
  const pile = openPile({ segmentSize: SEGMENT });
  setup(pile);
  const counter = injectFault(pile, Infinity, interrupt);
  run(pile);
  pile.close();
  return counter.calls;
}

describe('PileGraph recovery from an interrupted operation', () => {
  for (const [name, scenario] of Object.entries(GRAPH_SCENARIOS)) {
    it(`${name}: stopped at each pile call, the next open finds the graph before or after it, whole, with nothing leaked`, () => {
      const run = (pile: Pile, ids = buildBase(pile)): void => scenario.run(PileGraph.open<string, string>(pile, 'g'), ids);
      const total = callsOf(
        (p) => run(p, buildIds.get(p)!),
        (p) => buildIds.set(p, buildBase(p)),
      );
      expect(total).to.be.greaterThan(2);
      for (let k = 1; k <= total; k++) {
        const pile = openPile({ segmentSize: SEGMENT });
        const ids = buildBase(pile);
        const before = shapeOf(PileGraph.open<string, string>(pile, 'g'));
        const after = structuredClone(before) as GraphShape;
        scenario.apply(after);
        const counter = injectFault(pile, k, interrupt);
        try {
          run(pile, ids);
        } catch (err) {
          if (!(err instanceof Interrupted)) throw err;
        }
        counter.disarm();
        // What a kill leaves is what the interrupted call left in memory; a new handle repairs it.
        const g = PileGraph.open<string, string>(pile, 'g');
        const shape = shapeOf(g);
        expect([before, after], `stopped at call ${k} of ${total}`).to.deep.include(shape);
        expect(graphProblems(pile, g), `stopped at call ${k} of ${total}`).to.deep.equal([]);
        pile.close();
      }
    });
  }
});

const buildIds = new WeakMap<Pile, ReturnType<typeof buildBase>>();

describe('PileList recovery from an interrupted operation', () => {
  for (const [name, scenario] of Object.entries(LIST_SCENARIOS)) {
    it(`${name}: stopped at each pile call, the next open finds the list before or after it, with nothing leaked`, () => {
      const nodesOf = new WeakMap<Pile, ReturnType<typeof buildList>>();
      const total = callsOf(
        (p) => scenario.run(PileList.open<string>(p, 'l'), nodesOf.get(p)!),
        (p) => nodesOf.set(p, buildList(p)),
      );
      for (let k = 1; k <= total; k++) {
        const pile = openPile({ segmentSize: SEGMENT });
        const nodes = buildList(pile);
        const before = ['a', 'b', 'c', 'd', 'e'];
        const after = [...before];
        scenario.apply(after);
        const counter = injectFault(pile, k, interrupt);
        try {
          scenario.run(PileList.open<string>(pile, 'l'), nodes);
        } catch (err) {
          if (!(err instanceof Interrupted)) throw err;
        }
        counter.disarm();
        const l = PileList.open<string>(pile, 'l');
        const values = [...l];
        expect([before, after], `stopped at call ${k} of ${total}`).to.deep.include(values);
        expect([...l.reversed()]).to.deep.equal([...values].reverse());
        expect(l.length).to.equal(values.length);
        expect(pile.stats.objectCount, 'records: header, sync block (GraphSync), node and value per element').to.equal(
          2 + 2 * values.length,
        );
        expect(pile.verify().ok).to.equal(true);
        pile.close();
      }
    });
  }
});

describe('PileGraph and PileList across processes', function () {
  this.timeout(120_000);
  const child = path.join(__dirname, 'fixtures', 'graph-child.ts');
  const runChild = (...args: string[]): { status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string } =>
    spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', child, ...args], {
      encoding: 'utf8',
      cwd: path.join(__dirname, '..'),
    });
  const tmp = eachTempDir();

  it('a graph built in one process is traversed in another', () => {
    const n = 3000;
    const r = runChild('build', tmp.dir, String(n));
    expect(r.status, r.stderr).to.equal(0);
    const { ids } = JSON.parse(r.stdout) as { ids: number[] };
    const pile = openPile({ dir: tmp.dir });
    try {
      const g = PileGraph.open<{ i: number }, number>(pile, 'ring');
      const start = pile.getRoot('ring:start')!;
      expect(start).to.equal(ids[0]);
      expect(g.nodeCount).to.equal(n);
      const steps = [...g.traverse(start)];
      expect(steps).to.have.length(n);
      expect(g.getNode(steps[steps.length - 1]!.node).i).to.be.a('number');
      // following only the ring edges visits nodes in order
      let p = start;
      for (let i = 0; i < n; i++) {
        expect(g.getNode(p)).to.deep.equal({ i });
        const next = ids[(i + 1) % n]!;
        expect(g.edge(p, next as never)).to.equal(i);
        p = next as never;
      }
      expect(g.degree(start, 'in')).to.equal(2); // from the ring and from its own chord (0 * 13 = 0)
    } finally {
      pile.close();
    }
  });

  const kills: [string, string, number][] = [
    ['graph', 'removeHub', 9],
    ['graph', 'addEdgeGrowsTable', 7],
    ['list', 'removeMiddle', 5],
  ];
  for (const [kind, scenario, k] of kills) {
    it(`recovers after SIGKILL in the middle of ${kind} ${scenario}`, () => {
      const r = runChild('kill', tmp.dir, kind, scenario, String(k));
      expect(r.signal, r.stderr + r.stdout).to.equal('SIGKILL');
      const pile = openPile({ dir: tmp.dir });
      try {
        expect(pile.lastRecovery.ran).to.equal(true);
        if (kind === 'graph') {
          const g = PileGraph.open<string, string>(pile, 'g');
          const shadow = openPile({ segmentSize: SEGMENT });
          buildBase(shadow);
          const before = shapeOf(PileGraph.open<string, string>(shadow, 'g'));
          shadow.close();
          const after = structuredClone(before) as GraphShape;
          GRAPH_SCENARIOS[scenario]!.apply(after);
          expect([before, after]).to.deep.include(shapeOf(g));
          expect(graphProblems(pile, g)).to.deep.equal([]);
        } else {
          const l = PileList.open<string>(pile, 'l');
          const before = ['a', 'b', 'c', 'd', 'e'];
          const after = [...before];
          LIST_SCENARIOS[scenario]!.apply(after);
          expect([before, after]).to.deep.include([...l]);
          expect([...l.reversed()].reverse()).to.deep.equal([...l]);
        }
      } finally {
        pile.close();
      }
    });
  }
});
