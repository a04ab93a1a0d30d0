import * as fs from 'node:fs';
import { isPileError, openPile, type Pile } from '@pile/core';
import type { ZodType } from 'zod';
import { cacheOf, closePile } from './CacheTables';
import { CliError, EXIT_CANNOT_OPEN, EXIT_FAILED } from './CliError';
import { readShapeFile, zodOfShape, type FlatShape } from './FlatSchema';
import { JsonInputError, JsonRecordSplitter, type InputPosition } from './JsonRecordSplitter';
import { openExistingPile } from './PileOpener';
import { Progress, formatBytes, formatCount } from './Progress';
import { forgetShape, storeShape, storedShape } from './TableAccess';

/** Options of `pile import`. */
export interface ImportOptions {
  table: string;
  key: string;
  schema?: string;
  /** The shape of `schema`, when the caller has read it already (a pipe can be read only once). */
  shape?: FlatShape;
  /** What a record whose key is already in the table does: 'replace' (default), 'skip', or 'error' (stops the import). */
  onDuplicate?: 'replace' | 'skip' | 'error';
}

/** What an import did. */
export interface ImportResult {
  records: number;
  /** Records stored under a new key. */
  inserted: number;
  /** Records that replaced the value of a key already in the table (with --on-duplicate=replace). */
  replaced: number;
  /** Records left out because their key was already in the table (with --on-duplicate=skip). */
  skipped: number;
  bytes: number;
  seconds: number;
}

function at(p: InputPosition): string {
  return `line ${p.line}, column ${p.column} (byte ${p.byte})`;
}

/** Opens the pile an import writes to: an existing pile, or a new one in a missing or empty directory. */
function openForImport(dir: string): Pile {
  let fresh = !fs.existsSync(dir);
  if (!fresh && fs.statSync(dir).isDirectory() && fs.readdirSync(dir).length === 0) fresh = true;
  if (!fresh) return openExistingPile(dir, { readonly: false });
  try {
    return openPile({ dir });
  } catch (err) {
    if (isPileError(err)) throw new CliError(`can not create a pile in ${dir}: ${err.message}`, EXIT_CANNOT_OPEN);
    throw err;
  }
}

/**
 * Streams a JSON array or NDJSON from `input` into a cache table, keyed by the `key` field of
 * each record. Reads chunk by chunk with backpressure and keeps only the record being parsed on
 * the heap, so input of any size imports with a flat heap. Malformed input stops the import with
 * the line, column and byte of the error; the records imported before it stay in the table and
 * are flushed. The table is durable: no record is dropped for lack of room.
 * @throws CliError (exit 2) when the pile can not be opened; (exit 1) on malformed input, a
 *   record without a usable key, a record that does not match the schema
 */
export async function importInto(
  pile: Pile,
  input: NodeJS.ReadableStream,
  totalBytes: number,
  options: ImportOptions,
): Promise<ImportResult> {
  const given = options.shape ?? (options.schema !== undefined ? readShapeFile(options.schema) : undefined);
  const shape: FlatShape | undefined = given ?? storedShape(pile, options.table);
  const cache = await cacheOf(pile);
  // An import that creates its table and then fails leaves no table behind.
  const creates = !cache.tables().includes(options.table);
  const onDuplicate = options.onDuplicate ?? 'replace';
  let table;
  try {
    table =
      shape === undefined
        ? cache.table(options.table, { collisionMode: 'durable' })
        : cache.table(options.table, { collisionMode: 'durable', schema: zodOfShape(shape) as ZodType<unknown> });
  } catch (err) {
    if (isPileError(err)) throw new CliError(`can not open table '${options.table}': ${err.message}`, EXIT_FAILED);
    throw err;
  }
  if (given !== undefined) storeShape(pile, options.table, given);

  const keyField = options.key;
  const splitter = new JsonRecordSplitter();
  const bar = new Progress(`import ${options.table}`, 'bytes');
  const t0 = process.hrtime.bigint();
  let imported = 0;
  let inserted = 0;
  let replaced = 0;
  let skipped = 0;
  let stop = false;
  const onSignal = (): void => {
    stop = true;
    // A reader blocked on a pipe that sends nothing would otherwise never see the flag.
    (input as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const onValue = (value: unknown, pos: InputPosition): void => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new CliError(`record at ${at(pos)} is not an object`, EXIT_FAILED);
    }
    const key = (value as Record<string, unknown>)[keyField];
    if (typeof key !== 'string' && typeof key !== 'number') {
      throw new CliError(`record at ${at(pos)} has no string or number field '${keyField}' to use as its key`, EXIT_FAILED);
    }
    // JSON numbers become doubles: integers beyond 2^53 lose digits, so two different ids would
    // silently become one key.
    if (typeof key === 'number' && Number.isInteger(key) && !Number.isSafeInteger(key)) {
      throw new CliError(
        `record at ${at(pos)} has key ${keyField} = ${key}, an integer beyond 2^53 that a number can not hold exactly; write such ids as strings`,
        EXIT_FAILED,
      );
    }
    if (onDuplicate !== 'replace' && table.has(key)) {
      if (onDuplicate === 'error') {
        throw new CliError(
          `record at ${at(pos)} has the key ${JSON.stringify(key)}, which is already in table '${options.table}' (--on-duplicate=error)`,
          EXIT_FAILED,
        );
      }
      skipped++;
      return;
    }
    try {
      if (table.put(key, value) === 'replaced') replaced++;
      else inserted++;
      imported++;
    } catch (err) {
      if (isPileError(err)) throw new CliError(`record at ${at(pos)} was not imported: ${err.message}`, EXIT_FAILED);
      throw err;
    }
  };
  const done = (): ImportResult => ({
    records: imported,
    inserted,
    replaced,
    skipped,
    bytes: splitter.bytesRead,
    seconds: Number(process.hrtime.bigint() - t0) / 1e9,
  });
  const interrupted = (): CliError => new CliError(`interrupted after byte ${splitter.bytesRead}`, 130);
  try {
    try {
      for await (const chunk of input) {
        if (stop) break;
        splitter.write(chunk as Buffer, onValue);
        bar.update(splitter.bytesRead, totalBytes);
      }
    } catch (err) {
      if (stop) throw interrupted();
      throw err;
    }
    if (stop) throw interrupted();
    splitter.end(onValue);
    bar.update(splitter.bytesRead, totalBytes);
    return done();
  } catch (err) {
    let kept = `; ${formatCount(imported)} record${imported === 1 ? '' : 's'} imported before it ${imported === 1 ? 'was' : 'were'} kept`;
    if (creates && !pile.isClosed && cache.tables().includes(options.table)) {
      cache.dropTable(options.table);
      forgetShape(pile, options.table);
      kept = `; table '${options.table}', which this import created, was removed`;
    }
    if (err instanceof JsonInputError) throw new CliError(`malformed input at ${err.message}${kept}`, EXIT_FAILED);
    if (err instanceof CliError) throw new CliError(`${err.message}${kept}`, err.exitCode);
    throw err;
  } finally {
    bar.stop();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    // What was imported stays: durable against power loss too.
    if (!pile.isClosed) pile.flush();
  }
}

/**
 * `pile import <dir> --table NAME --key FIELD [--schema FILE] < data.json`. Creates the pile
 * when `dir` is missing or empty. Reports on stdout; the progress bar (bytes read of the
 * file's size when stdin is a file) goes to stderr.
 */
export async function runImport(dir: string, options: ImportOptions): Promise<void> {
  // Read once, before the pile is touched: a bad schema file fails first, and a pipe
  // (`--schema <(...)`) can not be read a second time.
  const shape = options.schema !== undefined ? readShapeFile(options.schema) : undefined;
  const pile = openForImport(dir);
  try {
    let total = 0;
    try {
      const st = fs.fstatSync(0);
      if (st.isFile()) total = st.size;
    } catch {
      /* no size known: the bar shows bytes only */
    }
    const r = await importInto(pile, process.stdin, total, shape === undefined ? options : { ...options, shape });
    const rate = r.seconds > 0 ? `${formatCount(r.records / r.seconds)} records/s, ${formatBytes(r.bytes / r.seconds)}/s` : '';
    const keys =
      `${formatCount(r.inserted)} new key${r.inserted === 1 ? '' : 's'}, ${formatCount(r.replaced)} replaced` +
      (r.skipped > 0 ? `, ${formatCount(r.skipped)} skipped (key already in the table)` : '');
    process.stdout.write(
      `imported ${formatCount(r.records)} records (${formatBytes(r.bytes)}) into table '${options.table}' in ${r.seconds.toFixed(2)} s (${rate}): ${keys}\n`,
    );
  } finally {
    closePile(pile);
  }
}
