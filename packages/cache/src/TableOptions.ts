import { PileError } from '@pile/core';
import type { ZodType } from 'zod';

/** How a table treats a put that finds no free slot. */
export type CollisionMode = 'speculative' | 'durable';

/** Options of {@link PileCache.table}. Capacity and expiry options may change when a table is reopened; the mode and schema may not. */
export interface TableOptions<V = unknown> {
  /**
   * 'durable' (default): works like a Map, nothing is ever dropped for lack of a slot (only the
   * memory limit evicts). 'speculative', the explicit choice of a lossy cache: a put probes at most
   * 32 slots; when all are taken it overwrites the lowest-priority one whose priority is not higher
   * than its own ('overwritten'), else it stores nothing ('collision').
   */
  collisionMode?: CollisionMode;
  /** Values are checked against this zod object schema and stored with the pile's compiled codec. */
  schema?: ZodType<V>;
  /** Slots of a new table; default minCapacity. */
  initialCapacity?: number;
  /** The table never shrinks below this; default 1024 (or initialCapacity when smaller). */
  minCapacity?: number;
  /** The table never grows beyond this; default 2^31. */
  maxCapacity?: number;
  /** Capacity multiplier when the load factor passes loadFactorHigh; default 2. */
  growthFactor?: number;
  /** Capacity multiplier when the load factor falls below loadFactorLow; default 0.5. */
  shrinkFactor?: number;
  /** Shrink below this load factor; default 0.15. Must be below loadFactorHigh × shrinkFactor. */
  loadFactorLow?: number;
  /** Grow above this load factor; default 0.75. */
  loadFactorHigh?: number;
  /** Maximum age of an entry put without maxAgeSec/expiresAt; 0 (default) = no expiry. */
  defaultMaxAgeSec?: number;
}

/** The persisted, validated options of a table. */
export interface ResolvedTableOptions {
  collisionMode: CollisionMode;
  minCapacity: number;
  maxCapacity: number;
  growthFactor: number;
  shrinkFactor: number;
  loadFactorLow: number;
  loadFactorHigh: number;
  defaultMaxAgeSec: number;
}

export const MIN_CAPACITY = 16;
export const MAX_CAPACITY = 2 ** 31;
const DEFAULT_MIN_CAPACITY = 1024;

const KNOWN = new Set([
  'collisionMode',
  'schema',
  'initialCapacity',
  'minCapacity',
  'maxCapacity',
  'growthFactor',
  'shrinkFactor',
  'loadFactorLow',
  'loadFactorHigh',
  'defaultMaxAgeSec',
]);

export function invalidOption(name: string, message: string): PileError {
  return new PileError('PILE_INVALID_OPTION', `option ${name}: ${message}`);
}

function capacityOption(name: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < MIN_CAPACITY || v > MAX_CAPACITY) {
    throw invalidOption(name, `expected an integer from ${MIN_CAPACITY} to ${MAX_CAPACITY}, got ${String(v)}`);
  }
  return v;
}

function ratioOption(name: string, v: unknown, def: number, lo: number, hi: number, loOpen: boolean, hiOpen: boolean): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isFinite(v) || (loOpen ? v <= lo : v < lo) || (hiOpen ? v >= hi : v > hi)) {
    throw invalidOption(name, `expected a number in ${loOpen ? '(' : '['}${lo}, ${hi}${hiOpen ? ')' : ']'}, got ${String(v)}`);
  }
  return v;
}

/**
 * Validates table options; `stored` (a reopened table's options) fills what is not given.
 * @throws PILE_INVALID_OPTION naming the option
 */
export function resolveTableOptions(
  options: TableOptions<unknown>,
  stored?: ResolvedTableOptions,
): { resolved: ResolvedTableOptions; initialCapacity: number } {
  if (options === null || typeof options !== 'object') throw invalidOption('options', 'expected an object');
  for (const k of Object.keys(options)) if (!KNOWN.has(k)) throw invalidOption(k, 'unknown table option');
  const mode = options.collisionMode ?? stored?.collisionMode ?? 'durable';
  if (mode !== 'speculative' && mode !== 'durable')
    throw invalidOption('collisionMode', `expected 'speculative' or 'durable', got ${String(mode)}`);
  if (stored !== undefined && mode !== stored.collisionMode) {
    throw invalidOption('collisionMode', `the table was created '${stored.collisionMode}'; it can not be reopened '${mode}'`);
  }
  const initial = capacityOption('initialCapacity', options.initialCapacity);
  const minCapacity =
    capacityOption('minCapacity', options.minCapacity) ??
    stored?.minCapacity ??
    Math.min(DEFAULT_MIN_CAPACITY, initial ?? DEFAULT_MIN_CAPACITY);
  const maxCapacity = capacityOption('maxCapacity', options.maxCapacity) ?? stored?.maxCapacity ?? MAX_CAPACITY;
  if (minCapacity > maxCapacity) throw invalidOption('minCapacity', `${minCapacity} is above maxCapacity ${maxCapacity}`);
  const initialCapacity = initial ?? minCapacity;
  if (initialCapacity < minCapacity || initialCapacity > maxCapacity) {
    throw invalidOption('initialCapacity', `${initialCapacity} is outside minCapacity..maxCapacity (${minCapacity}..${maxCapacity})`);
  }
  const growthFactor = ratioOption('growthFactor', options.growthFactor, stored?.growthFactor ?? 2, 1, 16, true, false);
  const shrinkFactor = ratioOption('shrinkFactor', options.shrinkFactor, stored?.shrinkFactor ?? 0.5, 0, 1, true, true);
  const loadFactorHigh = ratioOption('loadFactorHigh', options.loadFactorHigh, stored?.loadFactorHigh ?? 0.75, 0.05, 1, false, false);
  const loadFactorLow = ratioOption('loadFactorLow', options.loadFactorLow, stored?.loadFactorLow ?? 0.15, 0, 1, false, true);
  if (loadFactorLow >= loadFactorHigh * shrinkFactor) {
    throw invalidOption(
      'loadFactorLow',
      `${loadFactorLow} must be below loadFactorHigh × shrinkFactor (${loadFactorHigh * shrinkFactor}), or a shrink would be followed by a grow`,
    );
  }
  const age = options.defaultMaxAgeSec ?? stored?.defaultMaxAgeSec ?? 0;
  if (typeof age !== 'number' || !Number.isFinite(age) || age < 0)
    throw invalidOption('defaultMaxAgeSec', `expected a number of seconds >= 0, got ${String(age)}`);
  return {
    resolved: {
      collisionMode: mode,
      minCapacity,
      maxCapacity,
      growthFactor,
      shrinkFactor,
      loadFactorLow,
      loadFactorHigh,
      defaultMaxAgeSec: age,
    },
    initialCapacity,
  };
}

/**
 * Checks the options object of a put or get (`what`): an object whose keys are among `a`, `b`, `c`
 * (a typo such as `ttl` would otherwise be ignored). A for-in over the object's own keys: no array
 * is allocated, and the common call without options never gets here.
 * @throws PILE_INVALID_OPTION naming the unknown key
 */
export function checkOptionKeys(opts: object, what: string, a: string, b: string, c: string): void {
  if (opts === null || typeof opts !== 'object') throw invalidOption(`${what} options`, 'expected an object');
  for (const k in opts) {
    if (k !== a && k !== b && k !== c)
      throw invalidOption(k, `unknown ${what} option (expected ${[a, b, c].filter((n) => n !== '').join(', ')})`);
  }
}

/** A put's priority, checked: an int32. @throws PILE_INVALID_OPTION */
export function priorityOption(v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < -0x80000000 || v > 0x7fffffff) {
    throw invalidOption('priority', `expected an int32, got ${String(v)}`);
  }
  return v;
}

/** A put's or get's maxAgeSec, checked: seconds >= 0, finite for a put (a get's may be Infinity). @throws PILE_INVALID_OPTION */
export function maxAgeOption(v: unknown, finite: boolean): number {
  if (typeof v !== 'number' || (finite ? !Number.isFinite(v) : Number.isNaN(v)) || v < 0) {
    throw invalidOption('maxAgeSec', `expected a number of seconds >= 0, got ${String(v)}`);
  }
  return v;
}

/** A put's expiresAt, checked, in ms since the epoch: a Date or a number > 0. @throws PILE_INVALID_OPTION */
export function expiresAtOption(v: unknown): number {
  const e = v instanceof Date ? v.getTime() : v;
  if (typeof e !== 'number' || !Number.isFinite(e) || e <= 0) {
    throw invalidOption('expiresAt', `expected a Date or ms since the epoch, got ${String(v)}`);
  }
  return e;
}
