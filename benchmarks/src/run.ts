/**
 * `node benchmarks/dist/run.js [workload...] [--n N] [--ops N] [--smoke] [--out DIR] [--doc FILE] [--report-only]`
 *
 * Runs the workloads (all when none is named), each peer in its own child process, writes
 * `results/<workload>.json` (the latest run of that workload: its figures, machine, load, date and
 * commit) and renders docs/benchmarks.md from every results file present and the fragments of
 * benchmarks/report/ (Report.ts). Running one workload so replaces only that workload's section.
 * `--smoke` runs tiny sizes and writes to results/smoke/ (its own report there), never to docs/.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { runChild } from './ChildRunner';
import { machineInfo } from './Machine';
import { writeReport } from './Report';
import { WORKLOADS, findWorkload } from './Workloads';
import type { PeerResult, RunOptions, Workload, WorkloadResult } from './Workload';

const PACKAGE_DIR = path.join(__dirname, '..');

interface Cli extends RunOptions {
  workloads: Workload[];
  /** Regenerate the report from the results files present, measuring nothing. */
  reportOnly: boolean;
  out: string;
  doc: string;
}

const USAGE = `usage: pnpm bench [workload...] [--n N] [--ops N] [--smoke] [--out DIR] [--doc FILE] [--report-only]
workloads: ${WORKLOADS.map((w) => `${w.name} (${w.title})`).join(', ')}
  --n N      record count of every selected workload (5m, 500k and 1e6 are accepted)
  --ops N    operation count of the read and cache loops
  --smoke    tiny sizes, results in benchmarks/results/smoke/ (never docs/)
  --out DIR  results directory (default benchmarks/results)
  --doc FILE report to regenerate (default docs/benchmarks.md)
  --report-only  regenerate the report from the results files present, measure nothing`;

function count(flag: string, text: string | undefined): number {
  const m = /^(\d+(?:\.\d+)?(?:e\d+)?)([kmKM]?)$/.exec(text ?? '');
  const v = m === null ? Number.NaN : Number(m[1]) * (m[2] === '' ? 1 : m[2]!.toLowerCase() === 'k' ? 1e3 : 1e6);
  if (!Number.isSafeInteger(v) || v < 1)
    throw new Error(`${flag}: expected a positive integer such as 100000, 500k or 5m, got ${String(text)}`);
  return v;
}

function parse(argv: string[]): Cli {
  const names: string[] = [];
  const cli: Partial<Cli> & { smoke: boolean; reportOnly: boolean } = { smoke: false, reportOnly: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] =
      a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = (): string | undefined => inline ?? argv[++i];
    if (flag === '--smoke') cli.smoke = true;
    else if (flag === '--report-only') cli.reportOnly = true;
    else if (flag === '--n') cli.n = count('--n', value());
    else if (flag === '--ops') cli.ops = count('--ops', value());
    else if (flag === '--out') cli.out = path.resolve(value() ?? '');
    else if (flag === '--doc') cli.doc = path.resolve(value() ?? '');
    else if (flag === '--help' || flag === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (flag.startsWith('-')) throw new Error(`unknown option ${flag}\n${USAGE}`);
    else names.push(flag);
  }
  const out = cli.out ?? path.join(PACKAGE_DIR, 'results', ...(cli.smoke ? ['smoke'] : []));
  const result: Cli = {
    smoke: cli.smoke,
    reportOnly: cli.reportOnly,
    workloads: names.length === 0 ? [...WORKLOADS] : names.map(findWorkload),
    out,
    doc: cli.doc ?? (cli.smoke ? path.join(out, 'benchmarks.md') : path.join(PACKAGE_DIR, '..', 'docs', 'benchmarks.md')),
  };
  if (cli.n !== undefined) result.n = cli.n;
  if (cli.ops !== undefined) result.ops = cli.ops;
  return result;
}

/**
 * The commit being measured, `+changes` when the measuring code (benchmarks/src, packages/) differs
 * from it; files that only render results into the report do not count. Undefined outside a git checkout.
 */
const RENDERING = ['Report.ts', 'Svg.ts', 'Format.ts'];

function gitCommit(): string | undefined {
  try {
    const git = (...args: string[]): string =>
      execFileSync('git', args, { cwd: PACKAGE_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const head = git('rev-parse', '--short', 'HEAD').trim();
    const dirty =
      git(
        'status',
        '--porcelain',
        '--untracked-files=no',
        '--',
        'src',
        '../packages',
        ...RENDERING.map((f) => `:(exclude)src/${f}`),
      ).trim() !== '';
    return dirty ? `${head}+changes` : head;
  } catch {
    return undefined;
  }
}

async function main(): Promise<number> {
  const cli = parse(process.argv.slice(2));
  fs.mkdirSync(cli.out, { recursive: true });
  const started = Date.now();
  let failures = 0;
  const commit = gitCommit();
  for (const w of cli.reportOnly ? [] : cli.workloads) {
    const machine = machineInfo();
    const params = w.params(cli);
    const t0 = performance.now();
    process.stderr.write(`[${w.name}] ${w.title}: ${JSON.stringify(params)}\n`);
    const ctx = {
      child: (peer: string, p: typeof params): PeerResult => {
        const t = performance.now();
        const r = runChild(w.name, peer, p, cli.smoke ? 120_000 : 3_600_000);
        const status = r.error !== undefined ? `FAILED (${r.error})` : r.skipped !== undefined ? `skipped (${r.skipped})` : 'ok';
        process.stderr.write(`  ${peer.padEnd(22)} ${status} in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
        return r;
      },
      log: (line: string) => process.stderr.write(`  ${line}\n`),
    };
    const peers = await w.run(ctx, params);
    failures += peers.filter((p) => p.error !== undefined).length;
    const result: WorkloadResult = {
      workload: w.name,
      title: w.title,
      description: w.description,
      date: new Date().toISOString(),
      machine,
      loadAverageEnd: os.loadavg()[0] ?? 0,
      ...(commit !== undefined ? { commit } : {}),
      command: [
        'pnpm bench',
        w.name,
        ...(cli.smoke ? ['--smoke'] : []),
        ...(cli.n !== undefined ? [`--n ${cli.n}`] : []),
        ...(cli.ops !== undefined ? [`--ops ${cli.ops}`] : []),
      ].join(' '),
      smoke: cli.smoke,
      params,
      peers,
      elapsedMs: performance.now() - t0,
      ...w.summarize(params, peers),
    };
    fs.writeFileSync(path.join(cli.out, `${w.name}.json`), `${JSON.stringify(result, null, 2)}\n`);
    for (const t of result.targets) {
      if (t.fatal === true && t.met === false) {
        // Smoke sizes on a shared CI machine say nothing of a bar; a full run fails on it.
        if (!cli.smoke) failures++;
        process.stderr.write(`  FAILED ${t.statement}: ${t.measured}\n`);
      }
      process.stderr.write(
        `  target ${t.met === true ? 'MET    ' : t.met === false ? 'NOT MET' : 'n/a    '} ${t.statement}: ${t.measured}\n`,
      );
    }
  }
  await writeReport(cli.out, cli.doc);
  process.stderr.write(`results in ${cli.out}, report ${cli.doc} (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
  return failures === 0 ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
  },
);
