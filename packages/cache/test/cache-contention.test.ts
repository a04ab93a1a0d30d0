import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { isPileError } from '@pile/core';
import { openCache } from '../src';

// Issue 17's "cache under contention" bar (docs/concurrency.md, "Cache tables beside a writer"):
// a writer process fills a table past two grows and evicts under maxMemory (and deletes keys,
// which shifts entries back) while three read-only processes get random keys. Every value is
// derived from its key and write number (fixtures/contention-values.ts), so a reader recognises
// any value never put for the key it asked for, and any torn one. PILE_CACHE_CONTENTION_MS sets
// how long the writer writes at least (4 s by default). With the checks after the read removed
// (CheckedRead: the seqlock's second load, rawSettled, find's FIND_AGAIN; the index still re-read
// on a new version) the readers counted 7 wrong values (another key's value) in 5 s; with the
// whole checked path removed they keep the index of their open and see almost nothing.

const FIXTURES = path.join(__dirname, 'fixtures');

type Line = Record<string, unknown>;

/** A child running `script` with ts-node; `next()` is its next JSON line on stdout. */
function child(script: string, env: Record<string, string>): { proc: ChildProcess; next: () => Promise<Line> } {
  const proc = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', path.join(FIXTURES, script)], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  return {
    proc,
    next: async () => {
      const r = await lines.next();
      if (r.done === true) throw new Error(`${script} ended without reporting`);
      return JSON.parse(r.value as string) as Line;
    },
  };
}

describe('cache tables read by other processes while one writes', function () {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-cache-contention-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('three read-only processes get no wrong value while a writer grows the table twice and evicts', async () => {
    const ms = Number(process.env.PILE_CACHE_CONTENTION_MS ?? 4000);
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    cache.table<string>('kv', { initialCapacity: 1024, minCapacity: 1024 });
    cache.close();
    const env = { PILE_DIR: dir, PILE_MS: String(ms) };

    // Plain opens, readers first: read-only opens may be open beside a live writer.
    const readers = [1, 2, 3].map((seed) => child('contention-reader.ts', { ...env, PILE_SEED: String(seed) }));
    for (const r of readers) expect(await r.next()).to.deep.equal({ opened: true });
    const writer = child('contention-writer.ts', env);
    expect(await writer.next()).to.deep.equal({ opened: true });
    for (const r of readers) r.proc.stdin!.write('go\n');
    const written = await writer.next();
    for (const r of readers) r.proc.stdin!.end();
    const reports = await Promise.all(readers.map((r) => r.next()));
    console.log(`      writer: ${JSON.stringify(written)}; readers: ${JSON.stringify(reports)}`);
    expect(written.grows as number).to.be.at.least(2);
    expect(written.evicted as number).to.be.above(0);
    for (const report of reports) {
      expect(report.hits as number).to.be.above(0);
      expect({ wrong: report.wrong, errors: report.errors, first: report.firstProblem }).to.deep.equal({
        wrong: 0,
        errors: 0,
        first: undefined,
      });
    }
  });

  it('a seqlock a writer left odd stalls a reader with PILE_LOCKED, and the next writable open clears it', () => {
    const words = (t: unknown): Uint32Array => (t as { seqWords: Uint32Array }).seqWords;
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    const t = cache.table<string>('kv');
    t.put('a', 'A');
    // What a writer killed in the middle of a backward shift or a rehash leaves (TableSeqlock).
    words(t)[5]!++;
    cache.close();

    const reader = openCache({ dir, readonly: true });
    expect(() => reader.table<string>('kv').get('a'))
      .to.throw(/being changed by a writer/)
      .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
    reader.close();

    const writer = openCache({ dir, sweepIntervalSec: 0 });
    expect(words(writer.table<string>('kv'))[5]! % 2).to.equal(0);
    writer.close();
    const again = openCache({ dir, readonly: true });
    expect(again.table<string>('kv').get('a')).to.equal('A');
    expect(again.table<string>('kv').has('a')).to.equal(true);
    again.close();
  });
});
