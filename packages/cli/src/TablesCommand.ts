import type { Pile } from '@pile/core';
import { cacheOf, closePile } from './CacheTables';
import { CliError, EXIT_FAILED } from './CliError';
import { flushOut, writeOut } from './Output';
import { openExistingPile } from './PileOpener';
import { formatBytes, formatCount } from './Progress';
import { forgetShape, storedShape } from './TableAccess';

/** One table as `pile tables` shows it. */
export interface TableRow {
  name: string;
  mode: 'durable' | 'speculative';
  /** Live entries. */
  count: number;
  /** Pile bytes of the table: its index, header and entry records. */
  bytes: number;
  /** The shape `pile import --schema` stored, 'typed' for a typed table without one, or 'none'. */
  schema: string;
}

/** The tables of the cache in `pile` (none when no cache ever wrote to it), by name. */
export async function tableRows(pile: Pile): Promise<TableRow[]> {
  if (pile.getRoot('pile-cache') === undefined) return [];
  const cache = await cacheOf(pile);
  return cache
    .tables()
    .sort()
    .map((name) => {
      const info = cache.tableInfo(name)!;
      const shape = storedShape(pile, name);
      return {
        name,
        mode: info.collisionMode,
        count: info.count,
        bytes: cache.tableBytes(name)!,
        schema: shape !== undefined ? JSON.stringify(shape) : info.typed ? 'typed' : 'none',
      };
    });
}

/**
 * `pile tables <dir> [--json]`: name, mode, live entries, bytes and schema of each cache table.
 * Read-only. @throws CliError (exit 2) when the pile can not be opened
 */
export async function runTables(dir: string, options: { json?: boolean }): Promise<void> {
  const pile = openExistingPile(dir, { readonly: true });
  try {
    const rows = await tableRows(pile);
    if (options.json === true) {
      await writeOut(`${JSON.stringify(rows, null, 2)}\n`);
    } else if (rows.length === 0) {
      await writeOut(`${dir} holds no cache tables\n`);
    } else {
      const cells = rows.map((r) => [r.name, r.mode, formatCount(r.count), formatBytes(r.bytes), r.schema]);
      const head = ['name', 'mode', 'count', 'bytes', 'schema'];
      const width = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
      const line = (c: string[]): string =>
        c
          .map((x, i) => (i === 2 || i === 3 ? x.padStart(width[i]!) : x.padEnd(width[i]!)))
          .join('  ')
          .trimEnd();
      await writeOut(`${[line(head), ...cells.map(line)].join('\n')}\n`);
    }
    await flushOut();
  } finally {
    closePile(pile);
  }
}

/**
 * `pile drop-table <dir> <name>`: deletes a cache table, every entry of it and the shape an
 * import stored for it. Opens the pile for writing (beside other writers, taking the writer turn)
 * and its cache for writing, which one open does at a time: refused (exit 2, locked) while another
 * open, in this process or another, has the pile's cache (or a graph or list of it) open for writing.
 * @throws CliError (exit 2) when the pile can not be opened, (exit 1) when there is no such table
 */
export async function runDropTable(dir: string, name: string): Promise<void> {
  const pile = openExistingPile(dir, { readonly: false });
  try {
    const cache = pile.getRoot('pile-cache') === undefined ? undefined : await cacheOf(pile);
    const names = cache?.tables() ?? [];
    if (cache === undefined || !names.includes(name)) {
      throw new CliError(`no table named '${name}' in ${dir} (tables: ${names.join(', ') || 'none'})`, EXIT_FAILED);
    }
    const count = cache.tableInfo(name)!.count;
    cache.dropTable(name);
    forgetShape(pile, name);
    pile.flush();
    await writeOut(`dropped table '${name}' (${formatCount(count)} entries)\n`);
    await flushOut();
  } finally {
    closePile(pile);
  }
}
