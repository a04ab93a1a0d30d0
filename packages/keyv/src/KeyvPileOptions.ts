import * as path from 'node:path';
import { PileError } from '@pile/core';

/** Options of {@link KeyvPile}. Checked once, in its constructor. */
export interface KeyvPileOptions {
  /** The directory of the pile that holds the cache (created if missing). Required. */
  dir: string;
  /** The name of the @pile/cache table that holds the entries; default `'keyv'`. */
  table?: string;
  /**
   * false (default): the store takes the strings Keyv hands it (its serialized `{ value, expires }`)
   * and stores them as UTF-8. true: values are stored as given, through the cache's own codec
   * (MessagePack), with no JSON step: give Keyv `serialize: undefined, deserialize: undefined` so that it
   * hands the store its `{ value, expires }` objects (docs/keyv.md, "Raw values").
   */
  raw?: boolean;
  /**
   * false (default): this process opens the cache for writing once and holds it until
   * {@link KeyvPile.disconnect}; another process opening the directory gets PILE_LOCKED. true: every
   * process that gives `shared: true` may use the directory at once, taking turns (docs/keyv.md,
   * "Several processes").
   */
  shared?: boolean;
  /** With `shared`: how long an operation waits for another process's turn before PILE_LOCKED; default 10,000 ms. */
  lockTimeoutMs?: number;
  /** With `shared`: how long one turn is kept while this process keeps working, before it lets others in; default 50 ms. */
  turnMs?: number;
  /** Bytes per segment of a pile created by this open (the largest value must fit in one); default the pile's 64 MiB. */
  segmentSize?: number;
  /** Cap on the pile's segment bytes; beyond it the cache evicts (expired entries first, then oldest). */
  maxMemory?: number;
  /** Check each entry's checksum when it is read (PILE_CORRUPT on damage); default false. */
  verifyOnRead?: boolean;
  /** Seconds between sweeps of expired entries; default 30; 0 = expired entries are only freed when met. */
  sweepIntervalSec?: number;
  /** Slots of the table when it is created; default the cache's (1024). */
  initialCapacity?: number;
  /** The table never grows beyond this many slots; default the cache's (2^31). */
  maxCapacity?: number;
}

/** The options of a {@link KeyvPile}, checked, with their defaults. */
export interface ResolvedKeyvPileOptions {
  dir: string;
  table: string;
  raw: boolean;
  shared: boolean;
  lockTimeoutMs: number;
  turnMs: number;
  segmentSize: number | undefined;
  maxMemory: number | undefined;
  verifyOnRead: boolean;
  sweepIntervalSec: number;
  initialCapacity: number | undefined;
  maxCapacity: number | undefined;
}

const KNOWN = new Set<string>([
  'dir',
  'table',
  'raw',
  'shared',
  'lockTimeoutMs',
  'turnMs',
  'segmentSize',
  'maxMemory',
  'verifyOnRead',
  'sweepIntervalSec',
  'initialCapacity',
  'maxCapacity',
]);

/** A PILE_INVALID_OPTION naming the option. */
export function invalidKeyvOption(name: string, message: string): PileError {
  return new PileError('PILE_INVALID_OPTION', `option ${name}: ${message}`);
}

function boolOption(o: Record<string, unknown>, name: string, fallback: boolean): boolean {
  const v = o[name];
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw invalidKeyvOption(name, `expected true or false, got ${String(v)}`);
  return v;
}

function numberOption(o: Record<string, unknown>, name: string, min: number, max: number, integer: boolean): number | undefined {
  const v = o[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw invalidKeyvOption(name, `expected ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got ${String(v)}`);
  }
  return v;
}

/**
 * Checks the options of a {@link KeyvPile}; the pile and cache check the ranges of their own options
 * (segmentSize, maxMemory, capacities) when they are opened, and name the option too.
 * @throws PILE_INVALID_OPTION naming the option: an unknown key, a missing or empty dir, a wrong type or range
 */
export function resolveKeyvPileOptions(options: KeyvPileOptions): ResolvedKeyvPileOptions {
  if (options === null || typeof options !== 'object') throw invalidKeyvOption('options', 'expected an object such as { dir }');
  const o = options as unknown as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) throw invalidKeyvOption(k, `not an option of KeyvPile (known: ${[...KNOWN].join(', ')})`);
  }
  if (typeof o.dir !== 'string' || o.dir === '') throw invalidKeyvOption('dir', 'expected the path of a directory (a non-empty string)');
  const table = o.table ?? 'keyv';
  if (typeof table !== 'string' || table === '' || table.length > 1024) {
    throw invalidKeyvOption('table', 'expected a non-empty string of at most 1024 characters');
  }
  const shared = boolOption(o, 'shared', false);
  for (const k of ['lockTimeoutMs', 'turnMs']) {
    if (!shared && o[k] !== undefined) throw invalidKeyvOption(k, 'applies only with shared: true');
  }
  return {
    dir: path.resolve(o.dir),
    table,
    raw: boolOption(o, 'raw', false),
    shared,
    lockTimeoutMs: numberOption(o, 'lockTimeoutMs', 0, 2 ** 31, false) ?? 10_000,
    turnMs: numberOption(o, 'turnMs', 1, 60_000, false) ?? 50,
    segmentSize: numberOption(o, 'segmentSize', 1, Number.MAX_SAFE_INTEGER, true),
    maxMemory: numberOption(o, 'maxMemory', 1, Number.MAX_SAFE_INTEGER, true),
    verifyOnRead: boolOption(o, 'verifyOnRead', false),
    sweepIntervalSec: numberOption(o, 'sweepIntervalSec', 0, 2 ** 31 / 1000, false) ?? 30,
    initialCapacity: numberOption(o, 'initialCapacity', 1, 2 ** 31, true),
    maxCapacity: numberOption(o, 'maxCapacity', 1, 2 ** 31, true),
  };
}
