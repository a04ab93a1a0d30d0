import { PileError } from '../PileError';

/**
 * Checks for values that the pile's encodings would change without a word: Pile refuses them
 * rather than give back something else (docs/guide.md, "What round-trips").
 */

/** String.prototype.isWellFormed: every Node the packages support (>= 20.19) has it; ES2022's lib does not. */
interface WellFormed {
  isWellFormed: () => boolean;
}

/**
 * Index of the first lone surrogate of `s` (a UTF-16 unit D800-DFFF without its pair), or -1.
 * UTF-8 has no encoding for one: it would be stored as U+FFFD.
 */
export function loneSurrogateAt(s: string): number {
  // V8 answers a one-byte string at once and scans two-byte strings natively.
  if ((s as unknown as WellFormed).isWellFormed()) return -1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
    }
    return i;
  }
  return -1;
}

/** Why `s` can not be stored as UTF-8 unchanged, or undefined when it can. */
export function illFormedString(s: string): string | undefined {
  const at = loneSurrogateAt(s);
  return at < 0
    ? undefined
    : `a string with a lone surrogate (U+${s.charCodeAt(at).toString(16).toUpperCase()} at index ${at}) can not be stored as UTF-8 unchanged; it would read back as U+FFFD`;
}

/**
 * Why a generic (MessagePack) value would not read back as it was put, judged at its top level,
 * or undefined. Functions anywhere in a value are refused by the packer itself (see
 * {@link refuseFunction}).
 */
export function unstorableValue(value: unknown): string | undefined {
  if (value instanceof String || value instanceof Number || value instanceof Boolean) {
    return `a boxed ${value.constructor.name} object would read back as a plain object; store its primitive (value.valueOf())`;
  }
  return undefined;
}

const TYPED_ARRAY_PROTOS: ReadonlySet<unknown> = new Set(
  [
    Int8Array,
    Uint8Array,
    Uint8ClampedArray,
    Int16Array,
    Uint16Array,
    Int32Array,
    Uint32Array,
    Float32Array,
    Float64Array,
    BigInt64Array,
    BigUint64Array,
    DataView,
    Buffer,
  ].map((c) => c.prototype),
);

/** Prototypes msgpackr (with moreTypes) gives back as they were, contents included. */
const LEAF_PROTOS: ReadonlySet<unknown> = new Set([Date.prototype, RegExp.prototype, ArrayBuffer.prototype, ...TYPED_ARRAY_PROTOS]);

/**
 * Why a generic value would not read back exactly as it was put, with the path of the first
 * part at fault (`value.items[2].name: ...`), or undefined. One walk over the value, done before
 * msgpackr packs it; nothing is allocated unless a fault is found. `maps` says whether a Map
 * reads back as a Map (the pile's codec) or as a plain object (a cache's, which is refused).
 * A cyclic value throws RangeError (the caller reports it as unencodable, as msgpackr would).
 */
export function genericValueFault(value: unknown, maps: boolean): string | undefined {
  // Almost every value passes: a boolean walk with no strings to build clears it, and only a value
  // it can not clear (one at fault, or a Map, Set, Date, typed array...) takes the full walk that
  // says why. The full walk alone had cost 800 to 1,650 instructions of a generic put (callgrind:
  // benchmarks/compare/count-instructions.sh, docs/benchmarks.md "instructions per operation").
  if (plainStorable(value)) return undefined;
  const f = walk(value, maps);
  return f === undefined ? undefined : `value${f}`;
}

/**
 * True when `v` is made only of well-formed strings, numbers other than -0, booleans, null,
 * undefined, bigints, plain objects and dense plain arrays: all of which read back exactly. False
 * says only "look closer", never "refuse".
 */
function plainStorable(v: unknown): boolean {
  switch (typeof v) {
    case 'string':
      return (v as unknown as WellFormed).isWellFormed();
    case 'number':
      return v !== 0 || 1 / v > 0;
    case 'object':
      return v === null || plainObjectStorable(v);
    case 'function':
    case 'symbol':
      return false;
    default:
      return true;
  }
}

// The members' own checks are written out in the loops: a call per member was most of the walk.
function plainObjectStorable(o: object): boolean {
  const proto: unknown = Object.getPrototypeOf(o);
  if (proto === Object.prototype) {
    for (const k in o) {
      const e = (o as Record<string, unknown>)[k];
      if (typeof e === 'string') {
        if (!(e as unknown as WellFormed).isWellFormed()) return false;
      } else if (typeof e === 'number') {
        if (e === 0 && 1 / e < 0) return false;
      } else if (typeof e === 'object' || typeof e === 'function' || typeof e === 'symbol') {
        if (!plainStorable(e)) return false;
      }
      if (k === '__proto__') return false;
    }
    return true;
  }
  if (proto !== Array.prototype) return false;
  const a = o as unknown[];
  for (let i = 0; i < a.length; i++) {
    const e = a[i];
    if (typeof e === 'string') {
      if (!(e as unknown as WellFormed).isWellFormed()) return false;
    } else if (typeof e === 'number') {
      if (e === 0 && 1 / e < 0) return false;
    } else if (e === undefined ? !(i in a) : !plainStorable(e)) return false;
  }
  return true;
}

function walk(v: unknown, maps: boolean): string | undefined {
  switch (typeof v) {
    case 'string': {
      const bad = illFormedString(v);
      return bad === undefined ? undefined : `: ${bad}`;
    }
    case 'number':
      return v === 0 && 1 / v < 0
        ? ': -0 would read back as 0 (MessagePack integers have no sign of zero); store 0, or use a typed schema'
        : undefined;
    case 'object':
      return v === null ? undefined : walkObject(v, maps);
    case 'function':
      return `: a function${v.name !== '' ? ` (${v.name})` : ''} can not be stored: it would read back as undefined`;
    case 'symbol':
      return ': a symbol can not be stored';
    default:
      return undefined;
  }
}

function walkObject(o: object, maps: boolean): string | undefined {
  const proto: unknown = Object.getPrototypeOf(o);
  if (proto === Object.prototype || proto === null) {
    for (const k in o) {
      if (k === '__proto__')
        return '.__proto__: an own property named __proto__ would read back renamed (msgpackr guards against prototype pollution)';
      const f = walk((o as Record<string, unknown>)[k], maps);
      if (f !== undefined) return `${keyPath(k)}${f}`;
    }
    return undefined;
  }
  if (proto === Array.prototype) {
    const a = o as unknown[];
    for (let i = 0; i < a.length; i++) {
      const e = a[i];
      if (e === undefined && !(i in a))
        return `[${i}]: a sparse array (a hole at index ${i}) would read back with undefined there; fill the holes`;
      const f = walk(e, maps);
      if (f !== undefined) return `[${i}]${f}`;
    }
    return undefined;
  }
  if (proto === Map.prototype) {
    if (!maps) return ': a Map would read back as a plain object in a cache value; store Object.fromEntries(map) or an array of entries';
    let i = 0;
    for (const [k, e] of o as Map<unknown, unknown>) {
      const f = walk(k, maps) ?? walk(e, maps);
      if (f !== undefined) return `<entry ${i}>${f}`;
      i++;
    }
    return undefined;
  }
  if (proto === Set.prototype) {
    let i = 0;
    for (const e of o as Set<unknown>) {
      const f = walk(e, maps);
      if (f !== undefined) return `<element ${i}>${f}`;
      i++;
    }
    return undefined;
  }
  if (LEAF_PROTOS.has(proto)) return undefined;
  const boxed = unstorableValue(o);
  if (boxed !== undefined) return `: ${boxed}`;
  const name = (o as { constructor?: { name?: unknown } }).constructor?.name;
  return `: an instance of ${typeof name === 'string' && name !== '' ? name : 'a class'} would read back as a plain object (its prototype, methods and non-enumerable state lost); store a plain object or use a typed schema`;
}

function keyPath(k: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
}

/** msgpackr's writeFunction: a function would be stored as undefined, so it is refused. */
export function refuseFunction(code: 'PILE_INVALID_VALUE' | 'PILE_SCHEMA_VIOLATION'): (fn: unknown) => never {
  return (fn: unknown) => {
    const name = typeof fn === 'function' && fn.name !== '' ? ` (${fn.name})` : '';
    throw new PileError(code, `value: a function${name} can not be stored: it would read back as undefined`);
  };
}
