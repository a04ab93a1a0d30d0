import type { Pile } from '@pile/core';
import type { CacheTable, PileCache } from '@pile/cache';
import type { ZodType } from 'zod';
import { CliError, EXIT_FAILED } from './CliError';
import { storedTableSchema } from './DescriptorSchema';
import { zodOfShape, type FlatShape } from './FlatSchema';

/** Root under which `pile import --schema` keeps a table's shape, so export and dump can decode it later. */
export function shapeRootName(table: string): string {
  return `pile-cli:shape:${table}`;
}

/** The shape stored by an earlier `pile import --schema` for `table`, if any. */
export function storedShape(pile: Pile, table: string): FlatShape | undefined {
  const p = pile.getRoot(shapeRootName(table));
  return p === undefined ? undefined : pile.get<FlatShape>(p);
}

/** Remembers `shape` as the shape of `table` (replacing an earlier one). */
export function storeShape(pile: Pile, table: string, shape: FlatShape): void {
  const old = pile.getRoot(shapeRootName(table));
  if (old !== undefined) pile.set(old, shape);
  else pile.setRoot(shapeRootName(table), pile.put(shape));
}

/** Forgets the shape stored for `table` (its table was dropped). */
export function forgetShape(pile: Pile, table: string): void {
  const p = pile.getRoot(shapeRootName(table));
  if (p === undefined) return;
  pile.setRoot(shapeRootName(table), null);
  pile.delete(p);
}

/**
 * Opens an existing table of `cache` for reading, decoding typed values with `shape` (given, or
 * stored by the import that made the table), else with the schema rebuilt from the layout the pile
 * stores for the table's values: any typed table is read without its zod schema.
 * @throws CliError (exit 1) when the table does not exist
 */
export function existingTable(pile: Pile, cache: PileCache, name: string, shape: FlatShape | undefined): CacheTable<unknown> {
  const names = cache.tables();
  if (!names.includes(name)) {
    throw new CliError(`no table named '${name}' in ${pile.dir ?? 'the pile'} (tables: ${names.join(', ') || 'none'})`, EXIT_FAILED);
  }
  const s = shape ?? storedShape(pile, name);
  if (s !== undefined) return cache.table(name, { schema: zodOfShape(s) as ZodType<unknown> });
  const stored = storedTableSchema(pile, cache, name);
  return stored === undefined ? cache.table(name) : cache.table(name, { schema: stored });
}
