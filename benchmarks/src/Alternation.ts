import { fmtRate } from './Format';
import { median } from './Measure';
import type { Params, PeerResult, RunContext } from './Workload';

/**
 * Runs each peer in `processes` child processes, the peers taking turns (a, b, c, a, b, c, ...),
 * and gives one result per peer whose figures are the medians over its processes. On a shared
 * machine the rates move by up to ~15% from one process to the next; one process per peer let
 * that decide a ratio. `rateFigure` is listed per process in the peer's notes.
 */
export function runAlternating(
  ctx: RunContext,
  peers: readonly string[],
  params: Params,
  processes: number,
  rateFigure: string,
  rateLabel: string,
): PeerResult[] {
  const runs = new Map<string, PeerResult[]>(peers.map((peer) => [peer, []]));
  for (let k = 0; k < processes; k++) {
    for (const [peer, results] of runs) results.push(ctx.child(peer, params));
  }
  return [...runs.values()].map((results) => combineRuns(results, rateFigure, rateLabel));
}

/** One result from a peer's processes: the first failure or skip if any, else the median of each figure. */
function combineRuns(results: PeerResult[], rateFigure: string, rateLabel: string): PeerResult {
  const bad = results.find((r) => r.error !== undefined || r.skipped !== undefined);
  if (bad !== undefined) return bad;
  const first = results[0]!;
  if (results.length === 1) return first;
  const figures: Record<string, number> = {};
  for (const name of Object.keys(first.figures)) figures[name] = median(results.map((r) => r.figures[name]!));
  const each = results.map((r) => fmtRate(r.figures[rateFigure])).join(', ');
  return { ...first, figures, notes: [...(first.notes ?? []), `${rateLabel} of each of its ${results.length} processes: ${each}`] };
}
