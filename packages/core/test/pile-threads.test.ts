import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildCore } from './fixtures/build-core';

// The native addon is context-aware: the main thread and worker threads of one process each load
// it and map piles of their own at the same time.

describe('piles in worker threads', function () {
  this.timeout(120_000);

  it('two worker threads of one process open mapped piles after the main thread did', () => {
    buildCore();
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-threads-'));
    try {
      const r = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'worker-piles.js'), tmp], {
        encoding: 'utf8',
        timeout: 100_000,
      });
      expect(r.signal, r.stderr).to.equal(null);
      expect(r.stderr).to.equal('');
      expect(r.status).to.equal(0);
      const results = JSON.parse(r.stdout) as { bad: number; ok: boolean; segments: number }[];
      expect(results).to.have.length(3);
      for (const res of results) {
        expect(res.bad).to.equal(0);
        expect(res.ok).to.equal(true);
      }
      // The workers' piles grew past one segment, so each thread mapped several files.
      expect(results[1]!.segments).to.be.greaterThan(1);
      expect(results[2]!.segments).to.be.greaterThan(1);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
