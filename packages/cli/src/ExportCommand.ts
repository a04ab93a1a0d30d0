import type { PileError } from '@pile/core';
import { cacheOf, closePile } from './CacheTables';
import { readShapeFile } from './FlatSchema';
import { flushOut, writeOut } from './Output';
import { openExistingPile } from './PileOpener';
import { existingTable } from './TableAccess';
import { jsonReplacer } from './ValueFormat';
import type { CacheKey, CacheTable } from '@pile/cache';

/** Options of `pile export`. */
export interface ExportOptions {
  table: string;
  /** One value per line instead of a JSON array. */
  ndjson?: boolean;
  /** A shape (as for `import --schema`) to decode a typed table with, instead of its stored one. */
  schema?: string;
  /** Skip entries whose value can not be decoded (counted and named on stderr) instead of stopping. */
  skipDamaged?: boolean;
}

/** Names of skipped entries listed on stderr at most; the rest are counted. */
const NAMED_SKIPS = 20;

/**
 * `pile export <dir> --table NAME > data.json`: writes the table's values as a JSON array (or
 * NDJSON), entry by entry, waiting for stdout to drain, so a table of any size exports with a
 * flat heap. Opens the pile read-only, and runs beside live writers (its reads are checked).
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
    // Each entry's checksum is checked: an export is a copy of the data, and a flipped byte inside a
    // string still decodes, so it must not leave the pile as a good value.
    const values = valuesOf(
      table,
      options.skipDamaged === true
        ? (key, err) => {
            const which = key === undefined ? 'an entry whose key does not decode' : `key ${JSON.stringify(key, jsonReplacer)}`;
            if (++skips <= NAMED_SKIPS) skipped.push(`  ${which}: ${err.code}: ${err.message}`);
          }
        : undefined,
    );
    for (const value of values) {
      const text = JSON.stringify(value, jsonReplacer);
      if (ndjson) await writeOut(`${text}\n`);
      else await writeOut(first ? `\n${text}` : `,\n${text}`);
      first = false;
    }
    if (!ndjson) await writeOut(first ? ']\n' : '\n]\n');
    await flushOut();
    if (skips > 0) {
      process.stderr.write(
        `pile: skipped ${skips} damaged entr${skips === 1 ? 'y' : 'ies'} of table '${options.table}':\n${skipped.join('\n')}\n` +
          (skips > NAMED_SKIPS ? `  ... and ${skips - NAMED_SKIPS} more\n` : ''),
      );
    }
  } finally {
    closePile(pile);
  }
}

function* valuesOf(
  table: CacheTable<unknown>,
  onDamaged: ((key: CacheKey | undefined, err: PileError) => void) | undefined,
): IterableIterator<unknown> {
  for (const [, value] of table.checkedEntries(onDamaged)) yield value;
}
