/**
 * The report, docs/benchmarks.md: rendered from benchmarks/results/<workload>.json (one file per
 * workload, each the latest run of that workload) and the hand-written fragments of
 * benchmarks/report/, with the charts as SVG files beside it (docs/benchmarks/<workload>-<n>.svg).
 *
 * Nothing in the report is typed into it: `pnpm bench <workload>` rewrites that workload's results
 * file and renders the whole report again from every results file present; `pnpm bench --report-only`
 * renders it without measuring. benchmarks/test/report.test.ts checks that the committed report is
 * what the committed results and fragments render to.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as prettier from 'prettier';
import { fmtBytes, fmtRatio } from './Format';
import { barChart, lineChart } from './Svg';
import { WORKLOADS } from './Workloads';
import type { Chart, Figures, PeerResult, Table, WorkloadResult } from './Workload';

const PACKAGE_DIR = path.join(__dirname, '..');

/** benchmarks/report: intro.md, workloads/<workload>.md, analyses.md. */
export const FRAGMENTS_DIR = path.join(PACKAGE_DIR, 'report');
export const RESULTS_DIR = path.join(PACKAGE_DIR, 'results');
export const DOC_PATH = path.join(PACKAGE_DIR, '..', 'docs', 'benchmarks.md');

export interface RenderedReport {
  markdown: string;
  /** SVG files, by name, for the directory `chartsDirOf(doc)`. */
  charts: Map<string, string>;
}

/** Where the charts of a report go: docs/benchmarks.md -> docs/benchmarks/. */
export function chartsDirOf(docPath: string): string {
  return path.join(path.dirname(docPath), path.basename(docPath, '.md'));
}

/** Every results file of `dir` that belongs to a known workload, in the workloads' order. */
export function loadResults(dir: string): WorkloadResult[] {
  const out: WorkloadResult[] = [];
  for (const w of WORKLOADS) {
    const file = path.join(dir, `${w.name}.json`);
    if (fs.existsSync(file)) out.push(JSON.parse(fs.readFileSync(file, 'utf8')) as WorkloadResult);
  }
  return out;
}

function fragment(fragmentsDir: string, name: string): string | undefined {
  const file = path.join(fragmentsDir, name);
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : undefined;
}

function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** A Markdown table; its first `left` columns (names) aligned left, the others (figures) right. */
function table(t: { columns: string[]; rows: string[][] }, left = 1): string {
  return [
    `| ${t.columns.map(cell).join(' | ')} |`,
    `| ${t.columns.map((_, i) => (i < left ? '---' : '---:')).join(' | ')} |`,
    ...t.rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

function met(m: boolean | null): string {
  return m === true ? '**met**' : m === false ? '**not met**' : 'not measured';
}

/** 2026-12-07T03:12:44.123Z -> 2026-12-07 03:12 UTC */
function when(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

function load(r: WorkloadResult): string {
  const start = r.machine.loadAverage.toFixed(1);
  return r.loadAverageEnd === undefined ? `${start} → not recorded` : `${start} → ${r.loadAverageEnd.toFixed(1)}`;
}

function machine(r: WorkloadResult): string {
  const m = r.machine;
  return `${m.cpu}, ${m.cores} cores, ${fmtBytes(m.memoryBytes)} RAM, ${m.platform} ${m.release} (${m.arch}), Node ${m.node} (V8 ${m.v8})`;
}

/** getPerSec -> "get /s", gcPauseMs -> "gc pause ms", heapUsed -> "heap used" */
function figureLabel(key: string): string {
  return key
    .replace(/PerSec$/, ' /s')
    .replace(/Ms$/, ' ms')
    .replace(/Bytes$/, ' bytes')
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase();
}

/** Figures that are counts of the run's own making, not measurements: no ratio of them says anything. */
const NOT_COMPARED = /^(n|fit|puts|held|loadAverage.*|killedRecoveryFull|.*Tenth\d+PerSec)$/;

function isPile(p: PeerResult): boolean {
  return /pile/i.test(p.label) || p.peer.startsWith('pile');
}

/** A peer that measures the floor (e.g. a process that opens nothing): a ratio to it says nothing. */
function isFloor(p: PeerResult): boolean {
  return /\bfloor\b/i.test(p.label);
}

/**
 * pile / peer for each figure both measured in this run: the workload's own `ratios` when it made
 * them, else every Pile peer against every other peer over the figures they share.
 */
function ratioTable(r: WorkloadResult): Table | undefined {
  const ok = r.peers.filter((p) => p.error === undefined && p.skipped === undefined);
  const byPeer = new Map(ok.map((p) => [p.peer, p]));
  let ratios: Record<string, Record<string, Figures>> = r.ratios;
  if (Object.keys(ratios).every((k) => Object.keys(ratios[k] ?? {}).length === 0)) {
    ratios = {};
    for (const a of ok.filter(isPile)) {
      const mine: Record<string, Figures> = {};
      for (const b of ok.filter((p) => !isPile(p) && !isFloor(p))) {
        const f: Figures = {};
        for (const [k, v] of Object.entries(a.figures)) {
          const w = b.figures[k];
          if (!NOT_COMPARED.test(k) && w !== undefined && Number.isFinite(v) && Number.isFinite(w) && w !== 0) f[k] = v / w;
        }
        if (Object.keys(f).length > 0) mine[b.peer] = f;
      }
      if (Object.keys(mine).length > 0) ratios[a.peer] = mine;
    }
  }
  const keys = [...new Set(Object.values(ratios).flatMap((m) => Object.values(m).flatMap((f) => Object.keys(f))))];
  if (keys.length === 0) return undefined;
  const rows: string[][] = [];
  for (const [pv, mine] of Object.entries(ratios)) {
    for (const [other, f] of Object.entries(mine)) {
      const v = (k: string): string => (f[k] === undefined ? '' : fmtRatio(f[k]));
      rows.push([byPeer.get(pv)?.label ?? pv, byPeer.get(other)?.label ?? other, ...keys.map(v)]);
    }
  }
  return { title: 'Ratios, Pile ÷ the peer measured in the same run', columns: ['pile', 'peer', ...keys.map(figureLabel)], rows };
}

function hasData(c: Chart): boolean {
  return c.kind === 'bars' ? c.bars.length > 0 : c.lines.some((l) => l.points.length > 0);
}

/** The report's Markdown (formatted as prettier formats it) and its charts. */
export async function renderReport(
  results: readonly WorkloadResult[],
  options: { fragmentsDir?: string; chartsDir: string },
): Promise<RenderedReport> {
  const fragmentsDir = options.fragmentsDir ?? FRAGMENTS_DIR;
  const charts = new Map<string, string>();
  const lines: string[] = [
    '# Benchmarks',
    '',
    '<!-- Generated by `pnpm bench` (benchmarks/src/Report.ts) from benchmarks/results/*.json and benchmarks/report/*.md. Do not edit: edit those and run `pnpm bench:report`. -->',
    '',
  ];
  const intro = fragment(fragmentsDir, 'intro.md');
  if (intro !== undefined) lines.push(intro, '');

  const latest = [...results].sort((a, b) => b.date.localeCompare(a.date))[0];
  if (latest !== undefined) {
    const machines = new Set(results.map(machine));
    lines.push(
      '## Machine and runs',
      '',
      machines.size === 1
        ? `Every workload below ran on the same machine: ${machine(latest)}.`
        : `The workloads below ran on ${machines.size} machine configurations; each section names its own. The latest: ${machine(latest)}.`,
      'The machine has other work on it: the load average (1 minute) at the start and end of each workload is part of its figures.',
      '',
      '| workload | command | measured | commit | load average, start → end | wall time |',
      '| --- | --- | --- | --- | ---: | ---: |',
      ...results.map(
        (r) =>
          `| [${r.workload}](#${anchor(r)}) | \`${r.command}\` | ${when(r.date)}${r.provenance !== undefined ? ' (carried over)' : ''} | ${r.commit ?? 'not recorded'} | ${load(r)} | ${(r.elapsedMs / 1000).toFixed(0)} s |`,
      ),
      '',
    );
  }

  lines.push(
    '## Targets',
    '',
    'Each target of Pile with the figure its workload measured in its latest run. A target not met is reported as not met.',
    '',
    '| workload | target | bar | measured | ratio | result |',
    '| --- | --- | ---: | --- | ---: | --- |',
  );
  for (const r of results) {
    for (const t of r.targets) {
      lines.push(
        `| ${r.workload} | ${cell(t.statement)} | ${cell(t.required)} | ${cell(t.measured)} | ${fmtRatio(t.ratio)} | ${met(t.met)} |`,
      );
    }
  }
  lines.push('');

  for (const r of results) {
    const w = WORKLOADS.find((x) => x.name === r.workload);
    lines.push(`## ${w?.title ?? r.title} (\`${r.workload}\`)`, '');
    const about = fragment(fragmentsDir, path.join('workloads', `${r.workload}.md`));
    const [summary, ...more] = (about ?? w?.description ?? r.description).split(/\n\n+/);
    lines.push(summary!, '');
    lines.push(
      `**Command:** \`${r.command}\`. Measured ${when(r.date)} at commit ${r.commit ?? 'not recorded'}, load average ${load(r)}, ${(r.elapsedMs / 1000).toFixed(0)} s${r.smoke ? ' (smoke sizes: the figures mean nothing)' : ''}. Parameters: ${Object.entries(
        r.params,
      )
        .map(([k, v]) => `${k} = ${typeof v === 'number' ? v.toLocaleString('en-US') : String(v)}`)
        .join(', ')}.`,
      '',
    );
    if (r.provenance !== undefined) lines.push(`_${r.provenance}_`, '');
    for (const t of r.tables) lines.push(`### ${t.title}`, '', table(t), '');
    const ratios = ratioTable(r);
    if (ratios !== undefined) {
      lines.push(
        `### ${ratios.title}`,
        '',
        'Above 1: Pile’s figure is the larger (faster for a rate, slower or bigger for a time or a size).',
        '',
        table(ratios, 2),
        '',
      );
    }
    let n = 0;
    for (const c of r.charts.filter(hasData)) {
      const file = `${r.workload}-${++n}.svg`;
      charts.set(file, `${c.kind === 'bars' ? barChart(c) : lineChart(c)}\n`);
      lines.push(`![${c.title.replace(/[[\]]/g, '')}](${path.basename(options.chartsDir)}/${file})`, '');
    }
    const notes = [...r.notes, ...r.peers.flatMap((p) => (p.notes ?? []).map((x) => `${p.label}: ${x}`))];
    if (notes.length > 0) lines.push('### How it is measured', '', ...notes.map((x) => `- ${x}`), '');
    if (more.length > 0) lines.push(more.join('\n\n'), '');
  }

  const analyses = fragment(fragmentsDir, 'analyses.md');
  if (analyses !== undefined) lines.push(analyses, '');

  const config = (await prettier.resolveConfig(path.join(PACKAGE_DIR, '..', 'docs', 'benchmarks.md'))) ?? {};
  const markdown = await prettier.format(lines.join('\n'), { ...config, parser: 'markdown' });
  return { markdown, charts };
}

/** GitHub's anchor of a workload's section heading. */
function anchor(r: WorkloadResult): string {
  const title = WORKLOADS.find((x) => x.name === r.workload)?.title ?? r.title;
  return `${title} (${r.workload})`
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-');
}

/**
 * Renders `docPath` and its charts from every results file in `resultsDir`; charts of a former
 * render that this one does not make are removed.
 */
export async function writeReport(resultsDir: string, docPath: string, fragmentsDir = FRAGMENTS_DIR): Promise<RenderedReport> {
  const chartsDir = chartsDirOf(docPath);
  const report = await renderReport(loadResults(resultsDir), { fragmentsDir, chartsDir });
  fs.mkdirSync(chartsDir, { recursive: true });
  for (const f of fs.readdirSync(chartsDir)) if (f.endsWith('.svg') && !report.charts.has(f)) fs.rmSync(path.join(chartsDir, f));
  for (const [f, svg] of report.charts) fs.writeFileSync(path.join(chartsDir, f), svg);
  fs.writeFileSync(docPath, report.markdown);
  return report;
}
