import { isPileError, type Pile, type PileEntry, type PilePointer } from '@pile/core';
import { cacheOf, closePile } from './CacheTables';
import { existingTable } from './TableAccess';
import { CliError, EXIT_FAILED } from './CliError';
import { openExistingPile } from './PileOpener';
import { hexOf, jsonReplacer, textOf } from './ValueFormat';
import { flushOut, writeOut } from './Output';

/** Options of `pile dump`. */
export interface DumpOptions {
  root?: string;
  /** Print the entries of this cache table instead of records. */
  table?: string;
  limit?: number;
  json?: boolean;
}

/** One record as `pile dump --json` prints it (one JSON object per line). */
export interface DumpedRecord {
  pointer: number;
  kind: PileEntry['kind'];
  size: number;
  roots?: string[];
  /** The decoded value; absent when it could not be decoded (see `note`). */
  value?: unknown;
  /** Hex of the payload (bytes, buffer, raw records). */
  hex?: string;
  /** Why the value is not shown: damage, or a typed record whose stored layout can not be read. */
  note?: string;
  /** The schema a typed record was written with. */
  schema?: string;
}

/** Decodes one record for the dump: never throws for a record it can not decode, says why instead. */
export function dumpRecord(pile: Pile, entry: PileEntry, roots: string[] | undefined): DumpedRecord {
  const out: DumpedRecord = { pointer: entry.pointer, kind: entry.kind, size: entry.size };
  if (roots !== undefined) out.roots = roots;
  try {
    // inspect(): typed records decode by the layout stored in the pile, no zod schema needed.
    const v = pile.inspect(entry.pointer);
    if (entry.kind === 'typed') {
      const name = pile.schemaOf(entry.pointer);
      if (name !== undefined) out.schema = name;
    }
    if (v instanceof Uint8Array && entry.kind !== 'typed') out.hex = hexOf(v);
    else out.value = v;
  } catch (err) {
    if (!isPileError(err)) throw err;
    out.note = `<${err.code}: ${err.message}>`;
  }
  return out;
}

function textLine(r: DumpedRecord): string {
  const head = `${r.pointer} ${r.kind}${r.schema === undefined ? '' : `:${r.schema}`} ${r.size}B${r.roots === undefined ? '' : ` root=${r.roots.join(',')}`}`;
  const body = r.note ?? (r.hex !== undefined ? `hex ${r.hex}` : textOf(r.value));
  return `${head}  ${body}\n`;
}

/**
 * `pile dump <dir>`: prints records decoded (typed ones by the layout stored in the pile), hex
 * for bytes and raw blocks.
 * Opens read-only, and runs beside live writers (its reads are checked).
 * @throws CliError (exit 2) when the pile can not be opened, (exit 1) for an unknown root
 */
export async function runDump(dir: string, options: DumpOptions): Promise<void> {
  if (options.table !== undefined) return dumpTable(dir, options.table, options);
  const pile = openExistingPile(dir, { readonly: true });
  try {
    const rootsOf = new Map<number, string[]>();
    for (const name of pile.roots()) {
      const p = pile.getRoot(name);
      if (p === undefined) continue;
      const list = rootsOf.get(p);
      if (list === undefined) rootsOf.set(p, [name]);
      else list.push(name);
    }
    const limit = options.limit ?? Infinity;
    const emit = (r: DumpedRecord): Promise<void> => writeOut(options.json === true ? `${JSON.stringify(r, jsonReplacer)}\n` : textLine(r));
    if (options.root !== undefined) {
      const p = pile.getRoot(options.root);
      if (p === undefined)
        throw new CliError(`${dir} has no root named '${options.root}' (roots: ${pile.roots().join(', ') || 'none'})`, EXIT_FAILED);
      const entry = findEntry(pile, p);
      await emit(dumpRecord(pile, entry, rootsOf.get(p)));
      await flushOut();
      return;
    }
    let n = 0;
    for (const entry of pile.entries()) {
      if (n >= limit) break;
      n++;
      await emit(dumpRecord(pile, entry, rootsOf.get(entry.pointer)));
    }
    await flushOut();
  } finally {
    pile.close();
  }
}

function findEntry(pile: Pile, p: PilePointer): PileEntry {
  // entries() is the one public place that tells a record's kind; a root is looked up once.
  for (const e of pile.entries()) if (e.pointer === p) return e;
  return { pointer: p, kind: 'msgpack', size: pile.sizeOf(p) };
}

/** One entry as `pile dump --table NAME --json` prints it (one JSON object per line). */
export interface DumpedEntry {
  key: unknown;
  /** The decoded value; absent when it could not be decoded (see `note`). */
  value?: unknown;
  note?: string;
}

/**
 * `pile dump <dir> --table NAME`: the table's entries, key and value decoded (a typed table by the
 * shape `pile import --schema` stored, else by the layout the pile stores for its schema), in slot
 * order; an entry that does not decode is shown with its error, not skipped.
 * @throws CliError (exit 2) when the pile can not be opened, (exit 1) when there is no such table
 */
async function dumpTable(dir: string, name: string, options: DumpOptions): Promise<void> {
  const pile = openExistingPile(dir, { readonly: true });
  try {
    const cache = await cacheOf(pile);
    const table = existingTable(pile, cache, name, undefined);
    const limit = options.limit ?? Infinity;
    let n = 0;
    for (const key of table.keys()) {
      if (n >= limit) break;
      n++;
      const e: DumpedEntry = { key };
      try {
        e.value = table.get(key);
      } catch (err) {
        if (!isPileError(err)) throw err;
        e.note = `<${err.code}: ${err.message}>`;
      }
      await writeOut(options.json === true ? `${JSON.stringify(e, jsonReplacer)}\n` : `${textOf(key)}  ${e.note ?? textOf(e.value)}\n`);
    }
    await flushOut();
  } finally {
    closePile(pile);
  }
}
