import { cacheOf, closePile } from './CacheTables';
import { readShapeFile } from './FlatSchema';
import { flushOut, writeOut } from './Output';
import { openExistingPile } from './PileOpener';
import { existingTable } from './TableAccess';
import { jsonReplacer } from './ValueFormat';

/** Options of `pile export`. */
export interface ExportOptions {
  table: string;
  /** One value per line instead of a JSON array. */
  ndjson?: boolean;
  /** A flat shape to decode a typed table that was not made by `pile import --schema`. */
  schema?: string;
}

/**
 * `pile export <dir> --table NAME > data.json`: writes the table's values as a JSON array (or
 * NDJSON), entry by entry, waiting for stdout to drain, so a table of any size exports with a
 * flat heap. Opens the pile read-only, so it runs alongside a writer.
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
    for (const [, value] of table.entries()) {
      const text = JSON.stringify(value, jsonReplacer);
      if (ndjson) await writeOut(`${text}\n`);
      else await writeOut(first ? `\n${text}` : `,\n${text}`);
      first = false;
    }
    if (!ndjson) await writeOut(first ? ']\n' : '\n]\n');
    await flushOut();
  } finally {
    closePile(pile);
  }
}
