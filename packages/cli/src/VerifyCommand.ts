import type { VerifyReport } from '@pile/core';
import { CliError, EXIT_FAILED } from './CliError';
import { openExistingPile } from './PileOpener';
import { formatCount, runClosing } from './Progress';

/** Options of `pile verify`. */
export interface VerifyOptions {
  json?: boolean;
  /** Open read-only: records only, no free-list or counter check. */
  readonly?: boolean;
}

/** Renders a verify report for people: a summary line, then one line per damaged record. */
export function formatVerify(dir: string, r: VerifyReport, recovered: string | undefined): string {
  const lines: string[] = [];
  if (recovered !== undefined) lines.push(recovered);
  // stats counts the records alone; the walk also checks the pile's own blocks, so say both.
  const own = r.recordsChecked - r.objectsChecked;
  lines.push(
    `${r.ok ? 'ok' : 'DAMAGED'}: ${dir}: ${formatCount(r.segmentsChecked)} segments, ${formatCount(r.recordsChecked)} blocks checked: ` +
      `${formatCount(r.objectsChecked)} records and ${formatCount(own)} of the pile's own (catalog, journal, bodies of moved records)`,
  );
  if (r.corrupt.length > 0) {
    lines.push(`${r.corrupt.length} corrupt record${r.corrupt.length === 1 ? '' : 's'}:`);
    for (const c of r.corrupt) {
      lines.push(`  segment ${c.segment} offset ${c.offset}${c.file === undefined ? '' : ` (${c.file})`}: ${c.reason}`);
    }
  }
  if (r.freeListErrors > 0) lines.push(`free-list errors: ${r.freeListErrors}`);
  if (r.unaccountedBytes > 0)
    lines.push(`unaccounted bytes: ${formatCount(r.unaccountedBytes)} (blocks after a damaged header could not be walked)`);
  for (const e of r.statsErrors) lines.push(`counter mismatch: ${e}`);
  return lines.join('\n');
}

/**
 * `pile verify <dir>`: the full integrity check. Exit code 0 when clean, 1 when damage was found.
 * The default open is for writing, which also checks free lists and counters; a pile left by a
 * crashed writer is recovered by that open first (and the recovery reported).
 * @throws CliError (exit 2) when the pile can not be opened, (exit 1) when damage was found
 */
export async function runVerify(dir: string, options: VerifyOptions): Promise<void> {
  const readonly = options.readonly === true;
  const pile = openExistingPile(dir, { readonly });
  const rec = pile.lastRecovery;
  const recovered = rec.ran
    ? `recovered after an unclean shutdown: ${rec.tornRecords} torn records dropped, ${rec.journalsReplayed} journals replayed, ${rec.orphansFreed} orphans freed`
    : undefined;
  const report: VerifyReport = runClosing(pile, 'verify', (onProgress) => pile.verify(onProgress));
  if (options.json === true) {
    process.stdout.write(`${JSON.stringify({ dir, readonly, recovery: rec, ...report }, null, 2)}\n`);
  } else {
    process.stdout.write(`${formatVerify(dir, report, recovered)}\n`);
    if (readonly) process.stdout.write('(read-only check: free lists and counters were not checked)\n');
  }
  if (!report.ok) throw new CliError(`${dir} is damaged`, EXIT_FAILED);
}
