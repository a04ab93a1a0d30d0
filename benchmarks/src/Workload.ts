/** Types shared by the runner, the workloads and the report. Every value here is plain JSON. */

/** Named figures of one peer, in the units their names say (`...Ms`, `...PerSec`, bytes otherwise). */
export type Figures = Record<string, number>;

/** What one peer's child process measured. */
export interface PeerResult {
  peer: string;
  /** How the report names the peer. */
  label: string;
  figures: Figures;
  /** Curves such as GC pause vs N: name -> [x, y] points. */
  series?: Record<string, [number, number][]>;
  notes?: string[];
  /** Set when the child failed; the run then exits non-zero. */
  error?: string;
  /** Set when the peer could not be measured on this machine (e.g. no redis-server); not a failure. */
  skipped?: string;
}

/** A performance target from the project's issues and whether this run met it. */
export interface TargetResult {
  /** What is promised, e.g. "Full-GC pause with 5 M records alive: pile ≤ 1/100 of Map's". */
  statement: string;
  /** The pile's figure and the peer's, as text. */
  measured: string;
  /** pile / peer (or peer / pile for "faster" targets): the number the requirement is about. */
  ratio: number;
  /** The requirement on `ratio`, as text ("≤ 0.01", "≥ 3"). */
  required: string;
  /** null when a peer of the comparison was skipped or failed. */
  met: boolean | null;
  /** A bar whose miss fails a full run (exit status 1), not only the report's line. */
  fatal?: boolean;
}

export interface Table {
  title: string;
  columns: string[];
  rows: string[][];
}

export interface BarChart {
  kind: 'bars';
  title: string;
  unit: string;
  bars: { label: string; value: number; highlight?: boolean }[];
}

export interface LineChart {
  kind: 'lines';
  title: string;
  xLabel: string;
  yLabel: string;
  lines: { label: string; points: [number, number][] }[];
}

export type Chart = BarChart | LineChart;

/** What a workload makes of its peers' results. */
export interface Summary {
  /** ratios[pileVariant][peer][figure] = pile figure / peer figure. */
  ratios: Record<string, Record<string, Figures>>;
  targets: TargetResult[];
  tables: Table[];
  charts: Chart[];
  notes: string[];
}

/** benchmarks/results/<workload>.json */
export interface WorkloadResult extends Summary {
  workload: string;
  title: string;
  description: string;
  /** When the workload finished (ISO 8601). */
  date: string;
  machine: MachineInfo;
  /** 1-minute load average when the workload finished (`machine.loadAverage` is the one at its start). */
  loadAverageEnd?: number;
  /** `git rev-parse --short HEAD` of the measured tree, with `+changes` when it had uncommitted changes. */
  commit?: string;
  /**
   * Where the figures come from when they were not written by `pnpm bench` itself: e.g. carried over
   * from an earlier report, stating that report's date and commit. The report prints it beside the figures.
   */
  provenance?: string;
  /** The command that reproduces this result. */
  command: string;
  smoke: boolean;
  params: Params;
  peers: PeerResult[];
  /** Wall time of the whole workload, ms. */
  elapsedMs: number;
}

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryBytes: number;
  platform: string;
  release: string;
  arch: string;
  node: string;
  v8: string;
  /** 1-minute load average when the workload started: other work on the machine skews every figure. */
  loadAverage: number;
}

export type Params = Record<string, number | string | boolean>;

/** Options the command line gives every workload. */
export interface RunOptions {
  smoke: boolean;
  /** --n: the record count of every selected workload. */
  n?: number;
  /** --ops: the operation count of read / cache loops. */
  ops?: number;
}

/** The parent side's handle to run one peer in a fresh child process. */
export interface RunContext {
  child(peer: string, params: Params): PeerResult;
  log(line: string): void;
}

/**
 * One workload. `run` orchestrates (in the parent) and calls `ctx.child` for each peer, which
 * runs `measure` in a fresh `node --expose-gc` process so no peer's heap distorts another's figures.
 */
export interface Workload {
  name: string;
  title: string;
  description: string;
  params(options: RunOptions): Params;
  run(ctx: RunContext, params: Params): Promise<PeerResult[]>;
  measure(peer: string, params: Params): Promise<PeerResult>;
  summarize(params: Params, peers: PeerResult[]): Summary;
}

export function num(params: Params, key: string): number {
  const v = params[key];
  if (typeof v !== 'number') throw new Error(`benchmark parameter ${key}: expected a number, got ${String(v)}`);
  return v;
}

export function str(params: Params, key: string): string {
  const v = params[key];
  if (typeof v !== 'string') throw new Error(`benchmark parameter ${key}: expected a string, got ${String(v)}`);
  return v;
}
