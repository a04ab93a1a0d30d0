import type { Pile } from '@pile/core';
import { openExistingPile } from './PileOpener';
import { formatBytes, formatCount } from './Progress';
import { closePile, tableSummaries, type TableSummary } from './CacheTables';

/** Options of `pile stats`. */
export interface StatsOptions {
  json?: boolean;
}

/** What `pile stats --json` prints. */
export interface StatsReport {
  dir: string;
  segmentSize: number;
  segments: number;
  objects: number;
  links: number;
  totalBytes: number;
  allocatedBytes: number;
  utilizedBytes: number;
  overheadBytes: number;
  freeBytes: number;
  roots: string[];
  schemas: { name: string; id: number; fingerprint: string }[];
  tables: TableSummary[];
}

/** Gathers the figures of `pile stats` from an open pile. */
export async function statsReport(dir: string, pile: Pile): Promise<StatsReport> {
  const s = pile.stats;
  return {
    dir,
    segmentSize: pile.segmentSize,
    segments: s.segmentCount,
    objects: s.objectCount,
    links: s.linkCount,
    totalBytes: s.totalBytes,
    allocatedBytes: s.allocatedBytes,
    utilizedBytes: s.utilizedBytes,
    overheadBytes: s.overheadBytes,
    freeBytes: s.freeBytes,
    roots: pile.roots().sort(),
    schemas: pile.schemas().map(({ name, id, fingerprint }) => ({ name, id, fingerprint })),
    tables: await tableSummaries(pile),
  };
}

/** Renders a report as the aligned two-column table `pile stats` prints. */
export function formatStats(r: StatsReport): string {
  const bytes = (n: number): string => `${formatBytes(n)} (${formatCount(n)} B)`;
  const pct = (n: number): string => (r.totalBytes > 0 ? ` ${((100 * n) / r.totalBytes).toFixed(1)}%` : '');
  const rows: [string, string][] = [
    ['pile', r.dir],
    ['segments', `${formatCount(r.segments)} × ${formatBytes(r.segmentSize)}`],
    ['objects', formatCount(r.objects)],
    ['links', formatCount(r.links)],
    ['total', bytes(r.totalBytes)],
    ['allocated', bytes(r.allocatedBytes) + pct(r.allocatedBytes)],
    ['utilized', bytes(r.utilizedBytes) + pct(r.utilizedBytes)],
    ['overhead', bytes(r.overheadBytes) + pct(r.overheadBytes)],
    ['free', bytes(r.freeBytes) + pct(r.freeBytes)],
    ['roots', r.roots.length === 0 ? '(none)' : `${r.roots.length}: ${r.roots.join(', ')}`],
    ['schemas', r.schemas.length === 0 ? '(none)' : `${r.schemas.length}: ${r.schemas.map((s) => `${s.name} (id ${s.id})`).join(', ')}`],
    ['tables', r.tables.length === 0 ? '(none)' : String(r.tables.length)],
  ];
  for (const t of r.tables) {
    rows.push([`  ${t.name}`, `${formatCount(t.count)} entries, capacity ${formatCount(t.capacity)}${t.typed ? ', typed' : ''}`]);
  }
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
}

/**
 * `pile stats <dir>`: counters of the pile and of the cache tables it holds. Opens read-only, and
 * runs beside live writers (its reads are checked); the figures are those of the moment it reads them.
 * @throws CliError (exit 2) when the pile can not be opened
 */
export async function runStats(dir: string, options: StatsOptions): Promise<void> {
  const pile = openExistingPile(dir, { readonly: true });
  try {
    const report = await statsReport(dir, pile);
    process.stdout.write(options.json === true ? `${JSON.stringify(report, null, 2)}\n` : `${formatStats(report)}\n`);
  } finally {
    closePile(pile);
  }
}
