import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { openPile, type PilePointer } from '../src';
import { buildCore } from './fixtures/build-core';
import { expectPileError } from './fixtures/expect-error';

// pile.close() called inside pile.batch(fn) (docs/concurrency.md, "The writer turn"): the batch's
// turn is let go and the pile closed cleanly, with no other process open or with another one
// closing at the same moment. That one used to deadlock: it held the init lock of pile.coord and
// slept in the writer mutex, which the batch held while its close() waited for the init lock.

const CLOSER = path.join(__dirname, 'fixtures', 'batch-closer.js');
/** How long a child may take for one step before it is taken for hung: far above any step's time. */
const HUNG_MS = 120_000;

type Line = Record<string, unknown>;

/** A batch-closer.js child: `send` writes a line to its stdin, `next` is its next JSON line (undefined: it hung). */
function closer(
  dir: string,
  env: Record<string, string> = {},
): { proc: ChildProcess; send: (l: string) => void; next: () => Promise<Line> } {
  const proc = spawn(process.execPath, [CLOSER], { env: { ...process.env, PILE_DIR: dir, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  return {
    proc,
    send: (l) => proc.stdin!.write(`${l}\n`),
    next: async () => {
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), HUNG_MS)));
      try {
        const r = await Promise.race([lines.next(), hung]);
        if (r === 'hung') {
          proc.kill('SIGKILL');
          throw new Error(`pid ${proc.pid} did not go on for ${HUNG_MS} ms: hung`);
        }
        if (r.done === true) throw new Error(`pid ${proc.pid} ended without reporting`);
        return JSON.parse(r.value as string) as Line;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

describe('close() inside batch(fn)', function () {
  this.timeout(4 * HUNG_MS);
  let tmp: string;
  let dir: string;
  const children: ChildProcess[] = [];

  before(() => buildCore());
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-close-batch-'));
    dir = path.join(tmp, 'pile');
    const p = openPile({ dir });
    p.put('first');
    p.close();
  });
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** The pile as the children left it: closed cleanly (no recovery), with `values` stored, verify passing. */
  function expectClean(values: [unknown, string][]): void {
    const pile = openPile({ dir });
    try {
      expect(pile.lastRecovery.ran, 'the last closer marked the pile clean').to.equal(false);
      for (const [p, v] of values) expect(pile.get(p as PilePointer)).to.equal(v);
      const v = pile.verify();
      expect(v.ok, JSON.stringify(v).slice(0, 2000)).to.equal(true);
    } finally {
      pile.close();
    }
  }

  /** Runs a 'batch' of child `a` to its end; returns its pointers (in the batch, after reopening). */
  async function batchToEnd(a: ReturnType<typeof closer>): Promise<[unknown, string][]> {
    const closed = await a.next();
    expect(closed).to.deep.equal({ closedInBatch: true, afterClose: 'PILE_CLOSED' });
    const reopened = await a.next();
    expect(await a.next()).to.deep.equal({ closed: true });
    return [[reopened.reopened, 'reopened']];
  }

  it('a lone opener: the pile is closed cleanly, writes after close() throw PILE_CLOSED, and it opens again', async () => {
    const a = closer(dir);
    children.push(a.proc);
    expect(await a.next()).to.deep.equal({ opened: true });
    a.send('batch');
    const inBatch = (await a.next()).p;
    const values = await batchToEnd(a);
    a.proc.stdin!.end();
    expectClean([[inBatch, 'in the batch'], ...values]);
  });

  it('beside another process that stays open: that one writes after it, and closes the pile cleanly last', async () => {
    const [a, b] = [closer(dir), closer(dir)];
    children.push(a.proc, b.proc);
    for (const c of [a, b]) expect(await c.next()).to.deep.equal({ opened: true });
    a.send('batch');
    const inBatch = (await a.next()).p;
    const values = await batchToEnd(a);
    b.send('put');
    const byB = (await b.next()).p;
    b.send('close');
    expect(await b.next()).to.deep.equal({ closed: true });
    for (const c of [a, b]) c.proc.stdin!.end();
    expectClean([[inBatch, 'in the batch'], [byB, `put by ${b.proc.pid}`], ...values]);
  });

  it('while another process closes, waiting for the turn the batch holds (holding the init lock): both close, no deadlock', async () => {
    const [a, b] = [closer(dir, { PILE_WAIT_WAITER: '1' }), closer(dir)];
    children.push(a.proc, b.proc);
    for (const c of [a, b]) expect(await c.next()).to.deep.equal({ opened: true });
    a.send('batch');
    const inBatch = (await a.next()).p;
    // a holds the turn inside its batch; b's close takes the init lock, then waits for the turn.
    b.send('close');
    expect(await a.next(), 'b sleeps in the writer mutex').to.deep.equal({ waiter: true });
    const values = await batchToEnd(a);
    expect(await b.next()).to.deep.equal({ closed: true });
    for (const c of [a, b]) c.proc.stdin!.end();
    expectClean([[inBatch, 'in the batch'], ...values]);
  });

  it('close() from code that runs inside a write (a getter of the value being put) throws PILE_REENTRANT, and the pile stays open', () => {
    const pile = openPile({ dir });
    try {
      const value = {
        get name(): string {
          pile.close();
          return 'never';
        },
      };
      expectPileError(() => pile.put(value), 'PILE_REENTRANT');
      expect(pile.isClosed).to.equal(false);
      const p = pile.put('after');
      expect(pile.get(p)).to.equal('after');
    } finally {
      pile.close();
    }
    expect(pile.isClosed).to.equal(true);
  });
});
