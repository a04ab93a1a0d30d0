import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect } from 'chai';
import { DOC_PATH, RESULTS_DIR, chartsDirOf, loadResults, renderReport, type RenderedReport } from '../src/Report';
import { WORKLOADS } from '../src/Workloads';

/** docs/benchmarks.md is rendered from benchmarks/results/*.json and benchmarks/report/*.md: never edited by hand. */
describe('benchmarks report (docs/benchmarks.md)', function () {
  this.timeout(60_000);
  let report: RenderedReport;
  before(async () => {
    report = await renderReport(loadResults(RESULTS_DIR), { chartsDir: chartsDirOf(DOC_PATH) });
  });

  it('renders from the committed results a report under 600 lines with the targets and a section per workload', () => {
    const lines = report.markdown.split('\n').length;
    expect(lines, `${lines} lines`).to.be.below(600);
    expect(report.markdown).to.contain('## Machine and runs');
    expect(report.markdown).to.contain('## Targets');
    expect(report.markdown).to.match(/\*\*(not met|met)\*\*/);
    for (const r of loadResults(RESULTS_DIR)) {
      expect(r.smoke, `${r.workload}.json is of a smoke run`).to.equal(false);
      expect(report.markdown).to.contain(`(\`${r.workload}\`)`);
      expect(report.markdown).to.contain(`\`pnpm bench ${r.workload}`);
    }
    expect(loadResults(RESULTS_DIR).map((r) => r.workload)).to.deep.equal(WORKLOADS.map((w) => w.name));
  });

  it('is what the generator renders from the committed results and fragments, charts included (run `pnpm bench:report` after changing them)', () => {
    expect(fs.readFileSync(DOC_PATH, 'utf8') === report.markdown, 'docs/benchmarks.md differs from its rendering').to.equal(true);
    const dir = chartsDirOf(DOC_PATH);
    expect(
      fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.svg'))
        .sort(),
    ).to.deep.equal([...report.charts.keys()].sort());
    for (const [file, svg] of report.charts) {
      expect(fs.readFileSync(path.join(dir, file), 'utf8') === svg, `docs/benchmarks/${file} differs from its rendering`).to.equal(true);
      expect(report.markdown).to.contain(`](benchmarks/${file})`);
    }
  });

  it('speaks of Pile and its workloads, not of issue numbers or sessions', () => {
    const text = report.markdown.replace(/read sessions?/gi, '');
    expect(text.match(/.{0,40}\bsessions?\b.{0,40}/gi) ?? []).to.deep.equal([]);
    expect(text.match(/.{0,40}\bissues?[ -]?\d+.{0,40}/gi) ?? []).to.deep.equal([]);
  });
});
