import { PileError } from '../PileError';
import type {
  SchemaArrayNode,
  SchemaCompositeNode,
  SchemaDescriptor,
  SchemaEnumNode,
  SchemaField,
  SchemaLiteral,
  SchemaMaybeNode,
  SchemaObjectNode,
  SchemaTypeDescriptor,
} from './SchemaDescriptor';

/** A JS value a zod literal / enum can hold. */
export type LiteralValue = string | number | boolean | bigint | null | undefined;

/**
 * The storage layout of a zod schema, as the code generator needs it. It carries a little more than the
 * persisted descriptor (int32 bounds for the range check, the bytes class to decode into), which is why
 * it is a separate type.
 */
export type LayoutNode =
  | { readonly kind: 'float64' | 'int64' | 'uint64' | 'bigint' | 'boolean' | 'string' | 'date' }
  | { readonly kind: 'int32'; readonly min: number; readonly max: number }
  | { readonly kind: 'bytes'; readonly buffer: boolean }
  | SchemaEnumNode<LiteralValue>
  | SchemaMaybeNode<LayoutNode>
  | SchemaArrayNode<LayoutNode>
  | SchemaObjectNode<LayoutNode>;

export type LayoutField = SchemaField<LayoutNode>;

/** Field counts are stored as u16 in every record header. */
export const MAX_FIELDS = 0xffff;

/** -2^31 is reserved in int32 slots to stand for -0, so int32 is only chosen when the bounds exclude it. */
const INT32_LAYOUT_MIN = -0x7fffffff;
const INT32_LAYOUT_MAX = 0x7fffffff;
const UINT64_MAX = (1n << 64n) - 1n;
const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);

/** Structural view of zod 4 internals; only the fields the analyser reads. */
interface ZodLike {
  readonly _zod: { readonly def: ZodDef; readonly bag?: Record<string, unknown>; readonly values?: ReadonlySet<unknown> };
}
interface ZodDef {
  readonly type: string;
  readonly [key: string]: unknown;
}

function isZod(s: unknown): s is ZodLike {
  return typeof s === 'object' && s !== null && '_zod' in s && typeof (s as ZodLike)._zod?.def?.type === 'string';
}

function refuse(path: string, what: string): never {
  throw new PileError('PILE_INVALID_OPTION', `${path}: ${what}`);
}

/** Every check attached to a schema: zod 4 puts format checks such as z.int32() on the schema def itself. */
function checkDefs(def: ZodDef): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  if (typeof def['check'] === 'string') out.push(def as Record<string, unknown>);
  const checks = def['checks'];
  if (Array.isArray(checks)) {
    // Check defs carry `check`, not `type`, so they are not full schemas in isZod's sense.
    for (const c of checks) {
      const cd = (c as { _zod?: { def?: unknown } } | null)?._zod?.def;
      if (cd !== null && typeof cd === 'object') out.push(cd as Record<string, unknown>);
    }
  }
  return out;
}

function numberLayout(def: ZodDef): LayoutNode {
  let isInt = false;
  let min = -Infinity;
  let max = Infinity;
  for (const c of checkDefs(def)) {
    switch (c['check']) {
      case 'number_format': {
        const f = c['format'];
        if (f === 'int32') [isInt, min, max] = [true, Math.max(min, -0x80000000), Math.min(max, 0x7fffffff)];
        else if (f === 'uint32') [isInt, min, max] = [true, Math.max(min, 0), Math.min(max, 0xffffffff)];
        else if (f === 'safeint') isInt = true;
        break;
      }
      case 'multiple_of':
        if (typeof c['value'] === 'number' && Number.isSafeInteger(c['value']) && c['value'] !== 0) isInt = true;
        break;
      case 'greater_than':
        if (typeof c['value'] === 'number') min = Math.max(min, c['inclusive'] === true ? c['value'] : nextUp(c['value']));
        break;
      case 'less_than':
        if (typeof c['value'] === 'number') max = Math.min(max, c['inclusive'] === true ? c['value'] : nextDown(c['value']));
        break;
      default:
        break;
    }
  }
  if (isInt) {
    // Integer bounds: an exclusive bound of 0 means >= 1 for an integer.
    const lo = Math.ceil(min);
    const hi = Math.floor(max);
    if (lo >= INT32_LAYOUT_MIN && hi <= INT32_LAYOUT_MAX) return { kind: 'int32', min: lo, max: hi };
  }
  // float64 holds every JS number exactly (ints up to 2^53, -0, NaN, infinities), so it is the safe default.
  return { kind: 'float64' };
}

/** Smallest integer strictly greater than v (only used for integer bounds, so float steps do not matter). */
function nextUp(v: number): number {
  return Number.isInteger(v) ? v + 1 : Math.ceil(v);
}
function nextDown(v: number): number {
  return Number.isInteger(v) ? v - 1 : Math.floor(v);
}

function bigintLayout(def: ZodDef): LayoutNode {
  let min: bigint | undefined;
  let max: bigint | undefined;
  let unsigned = false;
  for (const c of checkDefs(def)) {
    if (c['check'] === 'bigint_format' && c['format'] === 'uint64') unsigned = true;
    const v = c['value'];
    if (typeof v !== 'bigint') continue;
    if (c['check'] === 'greater_than') {
      const lo = c['inclusive'] === true ? v : v + 1n;
      if (min === undefined || lo > min) min = lo;
    } else if (c['check'] === 'less_than') {
      const hi = c['inclusive'] === true ? v : v - 1n;
      if (max === undefined || hi < max) max = hi;
    }
  }
  // uint64 only when the schema can hold values int64 cannot; otherwise int64 keeps negatives representable.
  if (unsigned || (min !== undefined && min >= 0n && max !== undefined && max > INT64_MAX && max <= UINT64_MAX)) {
    return { kind: 'uint64' };
  }
  // Bounds within int64: 8 fixed bytes. Otherwise z.bigint() is arbitrary precision, and so is its
  // layout ('bigint': int64 values in 8 bytes, larger ones by magnitude; see BigIntCodec).
  if (min !== undefined && max !== undefined && min >= INT64_MIN && max <= INT64_MAX) return { kind: 'int64' };
  return { kind: 'bigint' };
}

function literalList(values: readonly unknown[], path: string): LiteralValue[] {
  return values.map((v) => {
    if (typeof v === 'number' && !Number.isFinite(v)) refuse(path, `literal ${String(v)} is not supported`);
    if (
      v === null ||
      v === undefined ||
      typeof v === 'string' ||
      typeof v === 'number' ||
      typeof v === 'boolean' ||
      typeof v === 'bigint'
    ) {
      return v;
    }
    return refuse(path, `literal of type ${typeof v} is not supported`);
  });
}

function maybe(of: LayoutNode, nullable: boolean, optional: boolean): LayoutNode {
  if (of.kind === 'maybe') {
    return { kind: 'maybe', nullable: nullable || of.nullable, optional: optional || of.optional, of: of.of };
  }
  return { kind: 'maybe', nullable, optional, of };
}

function unionLayout(options: readonly unknown[], path: string, stack: Set<unknown>): LayoutNode {
  const literals: LiteralValue[] = [];
  const others: unknown[] = [];
  let hasNull = false;
  let hasUndefined = false;
  for (const opt of options) {
    if (!isZod(opt)) refuse(path, 'union option is not a zod schema');
    const t = opt._zod.def.type;
    if (t === 'literal') literals.push(...literalList(opt._zod.def['values'] as unknown[], path));
    else if (t === 'enum') literals.push(...enumValues(opt, path));
    else if (t === 'null') {
      hasNull = true;
      literals.push(null);
    } else if (t === 'undefined') {
      hasUndefined = true;
      literals.push(undefined);
    } else others.push(opt);
  }
  if (others.length === 0) return enumLayout(literals, path);
  const nonNullish = literals.filter((v) => v !== null && v !== undefined);
  if (others.length === 1 && nonNullish.length === 0) {
    // z.union([X, z.null()]) is how some code spells X.nullable(); store it the same way.
    return maybe(analyze(others[0], path, stack), hasNull, hasUndefined);
  }
  return refuse(path, 'z.union is only supported over literals, or as X | null | undefined');
}

function enumValues(s: ZodLike, path: string): LiteralValue[] {
  // `_zod.values` is zod's own list of accepted values (it drops the reverse mapping of numeric TS enums).
  const set = s._zod.values;
  if (set !== undefined) return literalList([...set], path);
  const entries = s._zod.def['entries'];
  return literalList(Object.values((entries ?? {}) as Record<string, unknown>), path);
}

function enumLayout(values: LiteralValue[], path: string): LayoutNode {
  const unique: LiteralValue[] = [];
  for (const v of values) if (!unique.includes(v)) unique.push(v);
  if (unique.length === 0) refuse(path, 'an enum with no values is not supported');
  if (unique.length > 0xffff) refuse(path, 'an enum with more than 65535 values is not supported');
  return { kind: 'enum', values: unique };
}

/**
 * Maps a zod schema to its storage layout, refusing what cannot be stored exactly.
 * @throws PileError PILE_INVALID_OPTION naming the schema path (`schema.tags[]: z.map is not supported`).
 */
export function analyze(schema: unknown, path: string, stack: Set<unknown>): LayoutNode {
  if (!isZod(schema)) refuse(path, 'not a zod 4 schema');
  if (stack.has(schema)) refuse(path, 'recursive schemas are not supported');
  stack.add(schema);
  try {
    return analyzeInner(schema, path, stack);
  } finally {
    stack.delete(schema);
  }
}

function analyzeInner(schema: ZodLike, path: string, stack: Set<unknown>): LayoutNode {
  const def = schema._zod.def;
  switch (def.type) {
    case 'number':
      return numberLayout(def);
    case 'nan':
      return { kind: 'float64' };
    case 'string':
    case 'template_literal':
      return { kind: 'string' };
    case 'boolean':
      return { kind: 'boolean' };
    case 'bigint':
      return bigintLayout(def);
    case 'date':
      return { kind: 'date' };
    case 'enum':
      return enumLayout(enumValues(schema, path), path);
    case 'literal':
      return enumLayout(literalList(def['values'] as unknown[], path), path);
    case 'null':
      return enumLayout([null], path);
    case 'union':
      return unionLayout(def['options'] as unknown[], path, stack);
    case 'optional':
      return maybe(analyze(def['innerType'], path, stack), false, true);
    case 'nullable':
      return maybe(analyze(def['innerType'], path, stack), true, false);
    case 'nonoptional': {
      const inner = analyze(def['innerType'], path, stack);
      if (inner.kind !== 'maybe') return inner;
      return inner.nullable ? { kind: 'maybe', nullable: true, optional: false, of: inner.of } : inner.of;
    }
    // The stored value is the parse *output*; these wrappers do not change its type.
    case 'default':
    case 'prefault':
    case 'readonly':
    case 'catch':
      return analyze(def['innerType'], path, stack);
    case 'lazy': {
      const getter = def['getter'];
      if (typeof getter !== 'function') refuse(path, 'z.lazy without a getter');
      return analyze((getter as () => unknown)(), path, stack);
    }
    case 'pipe': {
      const inner = def['in'];
      const out = def['out'];
      if (
        typeof def['transform'] === 'function' ||
        (isZod(out) && out._zod.def.type === 'transform') ||
        (isZod(inner) && inner._zod.def.type === 'transform')
      ) {
        refuse(path, 'transforms are not supported (the stored value must be the parsed value itself)');
      }
      return analyze(out, path, stack);
    }
    case 'array':
      return { kind: 'array', of: analyze(def['element'], `${path}[]`, stack) };
    case 'object':
      return objectLayout(def, path, stack);
    case 'custom': {
      const cls = schema._zod.bag?.['Class'];
      if (cls === Buffer) return { kind: 'bytes', buffer: true };
      if (cls === Uint8Array) return { kind: 'bytes', buffer: false };
      return refuse(path, 'z.custom is not supported (use z.instanceof(Uint8Array) or z.instanceof(Buffer) for bytes)');
    }
    default:
      return refuse(path, `z.${def.type} is not supported`);
  }
}

function objectLayout(def: ZodDef, path: string, stack: Set<unknown>): LayoutNode {
  const catchall = def['catchall'];
  if (catchall !== undefined && !(isZod(catchall) && catchall._zod.def.type === 'never')) {
    refuse(path, 'objects with a catchall (z.looseObject, .passthrough, .catchall) are not supported: unknown keys could not be stored');
  }
  const shape = (def['shape'] ?? {}) as Record<string, unknown>;
  const names = Object.keys(shape);
  if (names.length > MAX_FIELDS) refuse(path, `more than ${MAX_FIELDS} fields`);
  return {
    kind: 'object',
    fields: names.map((name) => ({ name, type: analyze(shape[name], `${path}.${name}`, stack) })),
  };
}

function describeLiteral(v: LiteralValue): SchemaLiteral {
  switch (typeof v) {
    case 'string':
      return { type: 'string', value: v };
    case 'number':
      return { type: 'number', value: v };
    case 'boolean':
      return { type: 'boolean', value: v };
    case 'bigint':
      return { type: 'bigint', value: v.toString() };
    case 'undefined':
      return { type: 'undefined' };
    default:
      return { type: 'null' };
  }
}

/**
 * A composite node with its children mapped by `child` and its enum literals by `literal`: the part
 * describeType and layoutOfType, inverses of each other, share.
 */
function mapComposite<A, B, LA, LB>(
  node: SchemaCompositeNode<A, LA>,
  child: (n: A) => B,
  literal: (l: LA) => LB,
): SchemaCompositeNode<B, LB> {
  switch (node.kind) {
    case 'enum':
      return { kind: 'enum', values: node.values.map(literal) };
    case 'maybe':
      return { kind: 'maybe', nullable: node.nullable, optional: node.optional, of: child(node.of) };
    case 'array':
      return { kind: 'array', of: child(node.of) };
    case 'object':
      return { kind: 'object', fields: node.fields.map((f) => ({ name: f.name, type: child(f.type) })) };
  }
}

function describeType(node: LayoutNode): SchemaTypeDescriptor {
  switch (node.kind) {
    case 'int32':
      return { kind: 'int32' };
    case 'bytes':
      return { kind: 'bytes' };
    case 'enum':
    case 'maybe':
    case 'array':
    case 'object':
      return mapComposite(node, describeType, describeLiteral);
    default:
      return { kind: node.kind };
  }
}

/** The value a stored enum literal stands for (a bigint is stored as its decimal string). */
export function literalOf(l: SchemaLiteral): LiteralValue {
  switch (l.type) {
    case 'bigint':
      return BigInt(l.value);
    case 'undefined':
      return undefined;
    case 'null':
      return null;
    default:
      return l.value;
  }
}

/**
 * The layout a stored descriptor describes (the inverse of describeType): what a reader without
 * the zod schema decodes with. int32 takes its whole range; bytes decode as Uint8Array.
 * @throws PileError PILE_CORRUPT for a kind this build does not know
 */
export function layoutOfType(t: SchemaTypeDescriptor): LayoutNode {
  switch (t.kind) {
    case 'int32':
      return { kind: 'int32', min: INT32_LAYOUT_MIN, max: INT32_LAYOUT_MAX };
    case 'bytes':
      return { kind: 'bytes', buffer: false };
    case 'enum':
    case 'maybe':
    case 'array':
    case 'object':
      return mapComposite(t, layoutOfType, literalOf);
    case 'float64':
    case 'int64':
    case 'uint64':
    case 'bigint':
    case 'boolean':
    case 'date':
    case 'string':
      return { kind: t.kind };
    default:
      throw new PileError(
        'PILE_CORRUPT',
        `stored schema descriptor has an unknown field kind ${JSON.stringify((t as { kind: unknown }).kind)}`,
      );
  }
}

/** The persisted, JSON-safe form of a top-level layout. */
export function describeLayout(root: LayoutNode & { kind: 'object' }): SchemaDescriptor {
  return {
    codec: 'pile-typed',
    version: 1,
    fields: root.fields.map((f) => ({ name: f.name, type: describeType(f.type) })),
  };
}

/** Bytes a value of this layout takes in its parent's fixed section. */
export function fixedSize(node: LayoutNode): number {
  switch (node.kind) {
    case 'boolean':
      return 1;
    case 'int32':
      return 4;
    case 'enum':
      return node.values.length <= 256 ? 1 : 2;
    case 'maybe':
      return 1 + fixedSize(node.of);
    case 'object':
      return node.fields.reduce((n, f) => n + fixedSize(f.type), 0);
    // float64, int64, uint64, date; string/bytes/bigint/array are (u32 offset, u32 length) pairs.
    default:
      return 8;
  }
}
