import { Command, InvalidArgumentError, Option } from 'commander';
import { runCompact } from './CompactCommand';
import { runDump } from './DumpCommand';
import { runExport } from './ExportCommand';
import { runImport } from './ImportCommand';
import { runStats } from './StatsCommand';
import { runDropTable, runTables } from './TablesCommand';
import { runVerify } from './VerifyCommand';

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

const EXIT_HELP = `
Exit codes:
  0  success (verify: no damage found)
  1  the command failed: damage found, malformed input, no such table or root
  2  the pile could not be opened: missing directory, not a pile, locked, damaged, newer format`;

/**
 * The `pile` command line: one subcommand per task, each with its own --help.
 * Commander's own usage errors (unknown option, missing argument) exit with code 1.
 */
export function buildProgram(): Command {
  const program = new Command('pile')
    .description('Inspect, check, compact, import into and export from a Pile directory.')
    .version(require('../package.json').version as string)
    .showHelpAfterError()
    .addHelpText('after', EXIT_HELP);

  program
    .command('stats')
    .description(
      'Segments, objects, links, bytes allocated / utilized / free, roots, schemas and cache tables of a pile. Read-only, runs beside live writers (the figures of the moment it reads them).',
    )
    .argument('<dir>', 'pile directory')
    .option('--json', 'print the figures as JSON')
    .action((dir: string, opts: { json?: boolean }) => runStats(dir, opts));

  program
    .command('verify')
    .description(
      'Full integrity check of every record, free list and counter, with a progress bar. Opens for writing and runs beside live writers (it holds the writer turn for the walk: their writes wait). Exit 0 when clean, 1 with a list of damaged records, 2 when the pile can not be opened.',
    )
    .argument('<dir>', 'pile directory')
    .option('--json', 'print the report as JSON')
    .option('--readonly', 'open read-only (also beside live writers): check records only (free lists and counters are not checked)')
    .action((dir: string, opts: { json?: boolean; readonly?: boolean }) => runVerify(dir, opts));

  program
    .command('dump')
    .description(
      'Print records: decoded values (typed records by the layout the pile stores for their schema), hex for bytes and raw blocks; with --table, the keys and values of a cache table, decoded (a typed table by its stored schema). Read-only, runs beside live writers.',
    )
    .argument('<dir>', 'pile directory')
    .option('--root <name>', 'print only the record of this root')
    .option('--table <name>', 'print the entries of this cache table: key and value, decoded (typed tables too: no schema needed)')
    .option('--limit <n>', 'print at most n records', positiveInt)
    .option('--json', 'one JSON object per record and line')
    .action((dir: string, opts: { root?: string; table?: string; limit?: number; json?: boolean }) => runDump(dir, opts));

  program
    .command('tables')
    .description('The cache tables of a pile: name, mode, live entries, bytes and schema. Read-only, runs beside live writers.')
    .argument('<dir>', 'pile directory')
    .option('--json', 'print the tables as JSON')
    .action((dir: string, opts: { json?: boolean }) => runTables(dir, opts));

  program
    .command('drop-table')
    .description(
      "Delete a cache table with all its entries (and the shape an import stored for it). Opens the pile for writing (beside live writers) and its cache for writing: refused (exit 2, locked) while another process has the pile's cache open, as one open at a time writes a cache.",
    )
    .argument('<dir>', 'pile directory')
    .argument('<name>', 'table to delete')
    .action((dir: string, name: string) => runDropTable(dir, name));

  program
    .command('compact')
    .description(
      'Release empty trailing segments (their files are deleted) and rebuild the free lists, with a progress bar. The pile stays valid if interrupted. Takes the writer turn: runs beside live writers, theirs with a cache too (their writes wait meanwhile).',
    )
    .argument('<dir>', 'pile directory')
    .option('--json', 'print the result as JSON')
    .action((dir: string, opts: { json?: boolean }) => runCompact(dir, opts));

  program
    .command('import')
    .description(
      "Stream a JSON array or NDJSON from stdin into a cache table (created if missing; the pile too, in a missing or empty directory), with a progress bar. Any size: the heap stays flat. Opens the cache for writing: refused (exit 2, locked) while another process has the pile's cache open.",
    )
    .argument('<dir>', 'pile directory')
    .requiredOption('--table <name>', 'table to import into')
    .requiredOption('--key <field>', 'field of each record whose string or number value is its key')
    .addOption(
      new Option(
        '--on-duplicate <what>',
        'a record whose key is already in the table: replace its value, skip the record, or stop with an error',
      )
        .choices(['replace', 'skip', 'error'])
        .default('replace'),
    )
    .option(
      '--schema <file>',
      'JSON file of a record shape, e.g. {"id":"int","name":"string","tags":"string[]","dims":{"w":"number","h":"number?"},"parts":[{"sku":"string"}]}; types: string, number, int, int32, boolean; a trailing [] makes an array of the type, a trailing ? allows null or missing; an object is a nested shape, [shape] an array of it',
    )
    .addHelpText(
      'after',
      `
Malformed input stops the import with its line, column and byte. Into an existing table the records
before it stay imported; a table the import created is removed. The report counts new keys and
replaced (or skipped) ones.
Example:
  pile import ./data --table products --key id --schema products.schema.json < products.ndjson`,
    )
    .action((dir: string, opts: { table: string; key: string; schema?: string; onDuplicate?: 'replace' | 'skip' | 'error' }) =>
      runImport(dir, opts),
    );

  program
    .command('export')
    .description(
      'Write the values of a cache table to stdout as a JSON array (or NDJSON), streaming entry by entry; typed tables are decoded by their stored schema. Read-only, runs beside live writers.',
    )
    .argument('<dir>', 'pile directory')
    .requiredOption('--table <name>', 'table to export')
    .option('--ndjson', 'one value per line instead of a JSON array')
    .option(
      '--schema <file>',
      'shape to decode a typed table with, as for import --schema (not needed: otherwise the shape an import stored, else the layout the pile stores for the table, is used)',
    )
    .option('--skip-damaged', 'leave out entries whose value can not be decoded, and name them on stderr, instead of stopping at the first')
    .action((dir: string, opts: { table: string; ndjson?: boolean; schema?: string; skipDamaged?: boolean }) => runExport(dir, opts));

  return program;
}
