import type { Figures, PeerResult, TargetResult } from './Workload';
import { fmtRatio } from './Format';

/** The figure `key` of `peer`, or undefined when that peer was skipped, failed or did not report it. */
export function figure(peers: readonly PeerResult[], peer: string, key: string): number | undefined {
  const p = peers.find((r) => r.peer === peer);
  if (p === undefined || p.error !== undefined || p.skipped !== undefined) return undefined;
  const v = p.figures[key];
  return v === undefined || !Number.isFinite(v) ? undefined : v;
}

function label(peers: readonly PeerResult[], peer: string): string {
  return peers.find((r) => r.peer === peer)?.label ?? peer;
}

/**
 * A target on the ratio pile / peer of one figure: `op` '<=' (pile at most `bound` times the peer's:
 * pauses, memory) or '>=' (pile at least `bound` times the peer's: rates).
 */
export function target(
  statement: string,
  peers: readonly PeerResult[],
  pile: string,
  peer: string,
  key: string,
  op: '<=' | '>=',
  bound: number,
  fmt: (v: number) => string,
): TargetResult {
  const a = figure(peers, pile, key);
  const b = figure(peers, peer, key);
  const required = `${op === '<=' ? '≤' : '≥'} ${fmtRatio(bound)}`;
  if (a === undefined || b === undefined) {
    return {
      statement,
      measured: `${label(peers, pile)}: ${a === undefined ? 'not measured' : fmt(a)}, ${label(peers, peer)}: ${b === undefined ? 'not measured' : fmt(b)}`,
      ratio: Number.NaN,
      required,
      met: null,
    };
  }
  const ratio = b === 0 ? (a === 0 ? 1 : Number.POSITIVE_INFINITY) : a / b;
  return {
    statement,
    measured: `${label(peers, pile)} ${fmt(a)} vs ${label(peers, peer)} ${fmt(b)}`,
    ratio,
    required,
    met: op === '<=' ? ratio <= bound : ratio >= bound,
  };
}

/** ratios[pileVariant][peer][key] = pile / peer for each key both report. */
export function ratios(
  peers: readonly PeerResult[],
  pileVariants: readonly string[],
  keys: readonly string[],
): Record<string, Record<string, Figures>> {
  const out: Record<string, Record<string, Figures>> = {};
  for (const pv of pileVariants) {
    const mine: Record<string, Figures> = {};
    for (const other of peers) {
      if (other.peer === pv || other.error !== undefined || other.skipped !== undefined) continue;
      const f: Figures = {};
      for (const k of keys) {
        const a = figure(peers, pv, k);
        const b = figure(peers, other.peer, k);
        if (a !== undefined && b !== undefined && b !== 0) f[k] = a / b;
      }
      if (Object.keys(f).length > 0) mine[other.peer] = f;
    }
    out[pv] = mine;
  }
  return out;
}

/** One table row per peer: the label then `cells(figures)`; failed / skipped peers say so. */
export function peerRows(peers: readonly PeerResult[], width: number, cells: (f: Figures, p: PeerResult) => string[]): string[][] {
  return peers.map((p) => {
    if (p.error !== undefined) return [p.label, `failed: ${p.error}`, ...Array<string>(width - 2).fill('')];
    if (p.skipped !== undefined) return [p.label, `skipped: ${p.skipped}`, ...Array<string>(width - 2).fill('')];
    return [p.label, ...cells(p.figures, p)];
  });
}
