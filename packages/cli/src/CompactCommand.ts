import type { Pile } from '@pile/core';
import { openExistingPile } from './PileOpener';
import { formatBytes, runClosing } from './Progress';

/** Options of `pile compact`. */
export interface CompactOptions {
  json?: boolean;
}

type CompactResult = ReturnType<Pile['compact']>;

/**
 * `pile compact <dir>`: releases empty trailing segments (their files are deleted) and rebuilds
 * the free lists. The core does it so that an interrupted compact leaves a valid pile.
 * @throws CliError (exit 2) when the pile can not be opened or is locked
 */
export async function runCompact(dir: string, options: CompactOptions): Promise<void> {
  const pile = openExistingPile(dir, { readonly: false });
  const result: CompactResult = runClosing(pile, 'compact', (onProgress) => pile.compact(onProgress));
  if (options.json === true) {
    process.stdout.write(`${JSON.stringify({ dir, ...result }, null, 2)}\n`);
  } else {
    process.stdout.write(
      `${dir}: segments ${result.segmentsBefore} -> ${result.segmentsAfter}, released ${formatBytes(result.bytesReleased)}\n`,
    );
  }
}
