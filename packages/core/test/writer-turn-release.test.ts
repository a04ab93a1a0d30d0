import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile } from '../src';
import { buildCore } from './fixtures/build-core';

// Where a thread that took the writer turn lets go of it between writes (docs/concurrency.md, "The
// writer turn"): at the end of the event-loop turn in which it took it, for every pile it wrote in
// that turn, and at process.exit(). Another process then takes the turn and finds what was
// written published. No assertion depends on timing: a turn left held makes the other process wait
// until spawnSync's timeout, which fails the test.

const CORE = path.join(__dirname, '..', 'dist', 'index.js');
/** Only reached when the turn was left held (the other process waits for it meanwhile). */
const STUCK_MS = 120_000;

/** Runs `script` in another process with `args`, this process's event loop blocked meanwhile. */
function runChild(script: string, args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, ['-e', `const { openPile } = require(${JSON.stringify(CORE)});\n${script}`, ...args], {
    encoding: 'utf8',
    timeout: STUCK_MS,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return { status: r.status, out: r.stdout };
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('the writer turn between writes', function () {
  this.timeout(300_000);
  let tmp: string;

  before(() => buildCore());
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-turn-release-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('the turns of two piles taken in one event-loop turn are both released at its end, what was written published', async () => {
    const dirs = [path.join(tmp, 'a'), path.join(tmp, 'b')];
    const piles = dirs.map((dir) => openPile({ dir, checkpointInterval: 0 }));
    try {
      for (let round = 1; round <= 3; round++) {
        // Both turns taken in this event-loop turn (two writes each), then its end.
        for (const pile of piles) {
          pile.put({ round, n: 1 });
          pile.put({ round, n: 2 });
        }
        await nextTurn();
        // This thread's event loop is blocked while the other process writes in both piles.
        const child = runChild(
          `const counts = process.argv.slice(1).map((dir) => {
            const pile = openPile({ dir, checkpointInterval: 0 });
            pile.put({ child: true });
            const n = pile.stats.objectCount;
            pile.close();
            return n;
          });
          process.stdout.write(JSON.stringify(counts));`,
          dirs,
        );
        expect(child.status, 'the other process got both turns').to.equal(0);
        // It saw this process's writes of every round and its own (one per round).
        expect(JSON.parse(child.out)).to.deep.equal([3 * round, 3 * round]);
        for (const pile of piles) expect(pile.stats.objectCount).to.equal(3 * round);
      }
    } finally {
      for (const pile of piles) pile.close();
    }
  });

  it('a process that writes and calls process.exit() in the same event-loop turn releases the turn: the next writer repairs nothing', async () => {
    const dir = path.join(tmp, 'p');
    // Kept open so that pile.coord and its mutex outlive the child.
    const keeper = openPile({ dir, checkpointInterval: 0 });
    try {
      keeper.put('keeper');
      await nextTurn();
      const child = runChild(
        `const pile = openPile({ dir: process.argv[1], checkpointInterval: 0 });
        pile.put('child');
        pile.put('child again');
        process.exit(0);`,
        [dir],
      );
      expect(child.status).to.equal(0);
      // Left held, the mutex would come to this writer OWNER_DEAD, and it would repair.
      keeper.put('keeper again');
      expect(keeper.lastRecovery.ran, 'the child left the turn released').to.equal(false);
      expect(keeper.stats.objectCount).to.equal(4);
    } finally {
      keeper.close();
    }
  });
});
