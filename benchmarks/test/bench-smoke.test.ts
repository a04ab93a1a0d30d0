import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { quantile } from '../src/Measure';
import type { WorkloadResult } from '../src/Workload';

const RUN = path.join(__dirname, '..', 'dist', 'run.js');
const DOC = path.join(__dirname, '..', '..', 'docs', 'benchmarks.md');

describe('benchmarks smoke run', function () {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-bench-test-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('measures every peer of the gc and codec workloads, writes their results and a report with targets and charts', function () {
    if (!fs.existsSync(RUN)) this.skip(); // `tsc -b` builds dist before the suite runs (pnpm test)
    const doc = path.join(dir, 'benchmarks.md');
    const res = spawnSync(process.execPath, [RUN, 'gc', 'codec', '--smoke', '--n', '3000', '--ops', '3000', '--out', dir, '--doc', doc], {
      encoding: 'utf8',
    });
    expect(res.status, res.stderr).to.equal(0);

    const gc = JSON.parse(fs.readFileSync(path.join(dir, 'gc.json'), 'utf8')) as WorkloadResult;
    expect(gc.params['n']).to.equal(3000);
    expect(gc.peers.map((p) => p.peer)).to.have.members(['map', 'lru-cache', 'pile-typed', 'pile-generic', 'pile-mapped', 'lmdb']);
    for (const p of gc.peers) {
      expect(p.error, p.peer).to.equal(undefined);
      expect(p.figures['getPerSec'], p.peer).to.be.greaterThan(0);
      expect(p.figures['gcPauseMs'], p.peer).to.be.greaterThan(0);
      expect(p.figures['heapUsed'], p.peer).to.be.greaterThan(0);
    }
    expect(gc.targets.every((t) => typeof t.met === 'boolean' && Number.isFinite(t.ratio))).to.equal(true);
    expect(gc.ratios['pile-typed']?.['map']?.['gcPauseMs']).to.be.a('number');
    expect(gc.machine.cores).to.equal(os.cpus().length);

    const codec = JSON.parse(fs.readFileSync(path.join(dir, 'codec.json'), 'utf8')) as WorkloadResult;
    expect(codec.targets).to.have.length(4);

    const md = fs.readFileSync(doc, 'utf8');
    expect(md).to.contain('## Targets');
    expect(md).to.contain('pnpm bench gc --smoke --n 3000 --ops 3000');
    expect(md).to.contain('(smoke sizes: the figures mean nothing)');
    const charts = fs.readdirSync(path.join(dir, 'benchmarks')).filter((f) => f.endsWith('.svg'));
    expect(charts.length).to.be.greaterThanOrEqual(4);
    for (const f of charts) {
      expect(md).to.contain(`](benchmarks/${f})`);
      expect(fs.readFileSync(path.join(dir, 'benchmarks', f), 'utf8')).to.match(/^<svg /);
    }
    expect(md).to.match(/\*\*(not met|met)\*\*/);
  });

  it('writes a smoke run and its report beside its results, never to docs/benchmarks.md', function () {
    if (!fs.existsSync(RUN)) this.skip();
    const before = fs.readFileSync(DOC, 'utf8');
    const res = spawnSync(process.execPath, [RUN, 'insert', '--smoke', '--n', '2000', '--out', dir], { encoding: 'utf8' });
    expect(res.status, res.stderr).to.equal(0);
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'insert.json'), 'utf8'))).to.have.property('smoke', true);
    expect(fs.readFileSync(path.join(dir, 'benchmarks.md'), 'utf8')).to.contain('pnpm bench insert --smoke --n 2000');
    expect(fs.readFileSync(DOC, 'utf8') === before, 'docs/benchmarks.md was rewritten by a smoke run').to.equal(true);
  });

  it('rejects an unknown workload with a message naming the known ones and exit status 2', function () {
    if (!fs.existsSync(RUN)) this.skip();
    const res = spawnSync(process.execPath, [RUN, 'nope', '--out', dir, '--doc', path.join(dir, 'b.md')], { encoding: 'utf8' });
    expect(res.status).to.equal(2);
    expect(res.stderr).to.contain("unknown workload 'nope'");
    expect(res.stderr).to.contain('gc, codec, insert, restart, cache, cache-bounded');
  });
});

describe('benchmark statistics', () => {
  it('interpolates quantiles between the closest ranks, as tinybench reports median and p99', () => {
    const xs = Array.from({ length: 101 }, (_, i) => 100 - i); // 0..100, unsorted
    expect(quantile(xs, 0.5)).to.equal(50);
    expect(quantile(xs, 0.99)).to.equal(99);
    expect(quantile([1, 2], 0.5)).to.equal(1.5);
    expect(quantile([4], 0.99)).to.equal(4);
    expect(Number.isNaN(quantile([], 0.5))).to.equal(true);
  });
});
