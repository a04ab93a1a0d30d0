import { isPileError } from '@pile/core';
import { cacheOf, closePile } from './CacheTables';
import { readShapeFile } from './FlatSchema';
import { flushOut, writeOut } from './Output';
import { openExistingPile } from './PileOpener';
import { existingTable } from './TableAccess';
import { jsonReplacer } from './ValueFormat';
import type { CacheTable } from '@pile/cache';

/** Options of `pile export`. */
export interface ExportOptions {
  table: string;
  /** One value per line instead of a JSON array. */
  ndjson?: boolean;
  /** A flat shape to decode a typed table that was not made by `pile import --schema`. */
  schema?: string;
  /** Skip entries whose value can not be decoded (counted and named on stderr) instead of stopping. */
  skipDamaged?: boolean;
}

/** Names of skipped entries listed on stderr at most; the rest are counted. */
const NAMED_SKIPS = 20;

/**
 * `pile export <dir> --table NAME > data.json`: writes the table's values as a JSON array (or
 * NDJSON), entry by entry, waiting for stdout to drain, so a table of any size exports with a
 * flat heap. Opens the pile read-only (refused while a live writer has it open).
 * @throws CliError (exit 2) when the pile can not be opened, (exit 1) when the table does not exist
 */
export async function runExport(dir: string, options: ExportOptions): Promise<void> {
  const shape = options.schema === undefined ? undefined : readShapeFile(options.schema);
  const pile = openExistingPile(dir, { readonly: true });
  try {
    const cache = await cacheOf(pile);
    const table = existingTable(pile, cache, options.table, shape);
    const ndjson = options.ndjson === true;
    let first = true;
    if (!ndjson) await writeOut('[');
    const skipped: string[] = [];
    let skips = 0;
    const values = options.skipDamaged === true ? valuesSkippingDamage(table, (key, err) => {
      if (++skips <= NAMED_SKIPS) skipped.push(`  key ${JSON.stringify(key, jsonReplacer)}: ${err}`);
    }) : valuesOf(table);
    for (const value of values) {
      const text = JSON.stringify(value, jsonReplacer);
      if (ndjson) await writeOut(`${text}\n`);
      else await writeOut(first ? `\n${text}` : `,\n${text}`);
      first = false;
    }
    if (!ndjson) await writeOut(first ? ']\n' : '\n]\n');
    await flushOut();
    if (skips > 0) {
      process.stderr.write(`pile: skipped ${skips} damaged entr${skips === 1 ? 'y' : 'ies'} of table '${options.table}':\n${skipped.join('\n')}\n` +
        (skips > NAMED_SKIPS ? `  ... and ${skips - NAMED_SKIPS} more\n` : ''));
    }
  } finally {
    closePile(pile);
  }
}

function* valuesOf(table: CacheTable<unknown>): IterableIterator<unknown> {
  for (const [, value] of table.entries()) yield value;
}

/** Values of the table's entries; an entry whose value does not decode is reported to `skip` and left out. */
function* valuesSkippingDamage(table: CacheTable<unknown>, skip: (key: unknown, reason: string) => void): IterableIterator<unknown> {
  for (const key of table.keys()) {
    let value: unknown;
    try {
      value = table.get(key);
    } catch (err) {
      if (!isPileError(err)) throw err;
      skip(key, err.message);
      continue;
    }
    if (value !== undefined) yield value;
  }
}
