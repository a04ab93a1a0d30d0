import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildCore } from './fixtures/build-core';

const CHILD = path.join(__dirname, 'fixtures', 'damage-fuzz.js');
/** Cases per run; PILE_FUZZ_CASES=100000 runs longer, PILE_FUZZ_SEED=n starts at another seed (each case's seed is printed on failure). */
const CASES = Number(process.env.PILE_FUZZ_CASES ?? 2000);
const FIRST = Number(process.env.PILE_FUZZ_SEED ?? 1);
const CHILDREN = 2;
/**
 * Where the cases' piles live: a RAM file system when there is one, since each case opens and
 * closes piles several times and every clean close syncs its files (which would make the disk,
 * not the pile, the cost of a case). The mapping semantics are the same. PILE_FUZZ_TMP overrides it.
 */
const TMP = fs.existsSync('/dev/shm') && fs.statSync('/dev/shm').isDirectory() ? '/dev/shm' : os.tmpdir();

interface ChildResult {
  failures: { fail: number; message: string }[];
  lastCase: number | undefined;
  done: boolean;
  opened: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

function runChild(from: number, to: number): Promise<ChildResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CHILD], {
      env: { ...process.env, PILE_FUZZ_FROM: String(from), PILE_FUZZ_TO: String(to), PILE_FUZZ_TMP: process.env.PILE_FUZZ_TMP ?? TMP },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const result: ChildResult = { failures: [], lastCase: undefined, done: false, opened: 0, code: null, signal: null, stderr: '' };
    let buffered = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      buffered += chunk;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const msg = JSON.parse(buffered.slice(0, nl)) as {
          case?: number;
          fail?: number;
          message?: string;
          done?: boolean;
          opened?: number;
        };
        buffered = buffered.slice(nl + 1);
        if (msg.case !== undefined) result.lastCase = msg.case;
        if (msg.fail !== undefined) result.failures.push({ fail: msg.fail, message: msg.message ?? '' });
        if (msg.done) {
          result.done = true;
          result.opened = msg.opened ?? 0;
        }
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      result.stderr += chunk;
    });
    child.on('exit', (code, signal) => {
      result.code = code;
      result.signal = signal;
      resolve(result);
    });
  });
}

describe('damage fuzzer', function () {
  this.timeout(0);
  before(() => buildCore());

  it(`${CASES} damage cases (bit flips, overwrites, truncation, garbage, swapped or deleted files; clean and unclean): no wrong value, no healthy record destroyed, only PileErrors, no signal`, async () => {
    const per = Math.ceil(CASES / CHILDREN);
    const runs: Promise<ChildResult>[] = [];
    for (let c = 0; c < CHILDREN; c++) {
      const from = FIRST + c * per;
      const to = Math.min(FIRST + CASES, from + per);
      if (to > from) runs.push(runChild(from, to));
    }
    const results = await Promise.all(runs);
    const problems: string[] = [];
    for (const r of results) {
      if (!r.done)
        problems.push(
          `a child died in case ${r.lastCase} (rerun: PILE_FUZZ_SEED=${r.lastCase} PILE_FUZZ_CASES=1): exit ${r.code}, signal ${r.signal}; ${r.stderr.slice(0, 2000)}`,
        );
      for (const f of r.failures) problems.push(`case ${f.fail} (rerun: PILE_FUZZ_SEED=${f.fail} PILE_FUZZ_CASES=1): ${f.message}`);
    }
    expect(problems, problems.slice(0, 10).join('\n')).to.deep.equal([]);
    // Most damage leaves a pile that opens: the cases test reads and writes, not only refusals.
    const opened = results.reduce((s, r) => s + r.opened, 0);
    expect(opened).to.be.greaterThan(CASES / 2);
  });
});
