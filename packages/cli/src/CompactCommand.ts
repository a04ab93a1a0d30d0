import type { Pile } from '@pile/core';
import { CliError, EXIT_FAILED } from './CliError';
import { openExistingPile } from './PileOpener';
import { Progress, formatBytes } from './Progress';

/** Options of `pile compact`. */
export interface CompactOptions {
  json?: boolean;
}

/** What `pile.compact()` reports. */
export interface CompactResult {
  segmentsBefore: number;
  segmentsAfter: number;
  bytesReleased: number;
}

type Compactable = Pile & { compact?: (onProgress?: (p: { phase: string; done: number; total: number }) => void) => CompactResult };

/**
 * `pile compact <dir>`: releases empty trailing segments (their files are deleted) and rebuilds
 * the free lists. The core does it so that an interrupted compact leaves a valid pile.
 * @throws CliError (exit 2) when the pile can not be opened or is locked
 */
export async function runCompact(dir: string, options: CompactOptions): Promise<void> {
  const pile = openExistingPile(dir, { readonly: false }) as Compactable;
  const bar = new Progress('compact', 'items');
  let result: CompactResult;
  try {
    if (typeof pile.compact !== 'function') throw new CliError('this build of @pile/core has no compact()', EXIT_FAILED);
    result = pile.compact((p) => bar.update(p.done, p.total));
  } finally {
    bar.stop();
    pile.close();
  }
  if (options.json === true) {
    process.stdout.write(`${JSON.stringify({ dir, ...result }, null, 2)}\n`);
  } else {
    process.stdout.write(`${dir}: segments ${result.segmentsBefore} -> ${result.segmentsAfter}, released ${formatBytes(result.bytesReleased)}\n`);
  }
}
