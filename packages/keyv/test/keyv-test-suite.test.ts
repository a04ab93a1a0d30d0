import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';

// @keyv/test-suite is written for vitest: it runs unmodified under vitest (test/suite/keyv-suite.vitest.ts),
// and this test makes it part of the repository's mocha run.
describe('keyv: @keyv/test-suite', function () {
  this.timeout(180_000);
  it('passes every test of keyvTestSuite and keyvIteratorTests (42), none skipped', () => {
    const pkg = path.join(__dirname, '..');
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pile-keyv-vitest-')), 'report.json');
    const r = spawnSync(
      path.join(pkg, 'node_modules', '.bin', 'vitest'),
      ['run', '--config', 'vitest.config.mjs', '--reporter=json', `--outputFile=${out}`],
      {
        cwd: pkg,
        encoding: 'utf8',
        timeout: 170_000,
      },
    );
    expect(fs.existsSync(out), r.stdout + r.stderr).to.equal(true);
    const report = JSON.parse(fs.readFileSync(out, 'utf8')) as {
      numTotalTests: number;
      numPassedTests: number;
      numFailedTests: number;
      numPendingTests: number;
    };
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
    expect(report.numFailedTests, r.stdout + r.stderr).to.equal(0);
    expect(report.numPendingTests).to.equal(0);
    expect(report.numTotalTests).to.equal(42);
    expect(report.numPassedTests).to.equal(42);
    expect(r.status).to.equal(0);
  });
});
