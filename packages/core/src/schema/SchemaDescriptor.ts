import { createHash } from 'node:crypto';

/**
 * A literal allowed by an `enum` field, in a JSON-safe form: bigints are kept as decimal strings
 * because JSON has no bigint, and `null`/`undefined` are tagged because JSON cannot hold `undefined`.
 */
export type SchemaLiteral =
  | { readonly type: 'string'; readonly value: string }
  | { readonly type: 'number'; readonly value: number }
  | { readonly type: 'boolean'; readonly value: boolean }
  | { readonly type: 'bigint'; readonly value: string }
  | { readonly type: 'null' }
  | { readonly type: 'undefined' };

/** A scalar whose bytes sit entirely in the fixed section of its parent. */
export type SchemaScalarKind = 'float64' | 'int32' | 'int64' | 'uint64' | 'boolean' | 'date';

// The composite kinds of a schema tree, one definition for the persisted descriptor (nodes
// SchemaTypeDescriptor, literals SchemaLiteral) and the code generator's layout (SchemaLayout's
// LayoutNode and LiteralValue). Interfaces, so that the node types can name themselves in them.

/** An enum: one of `values`. */
export interface SchemaEnumNode<L> {
  readonly kind: 'enum';
  readonly values: readonly L[];
}
/** A nullable and/or optional `of`. */
export interface SchemaMaybeNode<N> {
  readonly kind: 'maybe';
  readonly nullable: boolean;
  readonly optional: boolean;
  readonly of: N;
}
/** An array of `of`. */
export interface SchemaArrayNode<N> {
  readonly kind: 'array';
  readonly of: N;
}
/** An object: its fields in declaration order (the order is part of the layout). */
export interface SchemaObjectNode<N> {
  readonly kind: 'object';
  readonly fields: readonly SchemaField<N>[];
}
/** One named field of an object. */
export interface SchemaField<N> {
  readonly name: string;
  readonly type: N;
}
/** Any composite node over nodes N and enum literals L. */
export type SchemaCompositeNode<N, L> = SchemaEnumNode<L> | SchemaMaybeNode<N> | SchemaArrayNode<N> | SchemaObjectNode<N>;

/**
 * The layout of one value. It describes bytes, not validation: two zod schemas that differ only
 * in refinements (min length, regex, numeric bounds that keep the same storage width) share a descriptor.
 */
export type SchemaTypeDescriptor =
  | { readonly kind: SchemaScalarKind }
  | { readonly kind: 'string' }
  | { readonly kind: 'bytes' }
  /** Any size: int64 values as 8 bytes, larger ones as sign and magnitude (variable section). */
  | { readonly kind: 'bigint' }
  | SchemaEnumNode<SchemaLiteral>
  | SchemaMaybeNode<SchemaTypeDescriptor>
  | SchemaArrayNode<SchemaTypeDescriptor>
  | SchemaObjectNode<SchemaTypeDescriptor>;

/** One named field of an object, in declaration order (the order is part of the layout). */
export type SchemaFieldDescriptor = SchemaField<SchemaTypeDescriptor>;

/**
 * Plain JSON description of a typed record layout, persisted in the pile so that a later process can
 * check that its schema can still read the stored records (see {@link isCompatibleEvolution}).
 */
export interface SchemaDescriptor {
  readonly codec: 'pile-typed';
  readonly version: 1;
  /** The top-level object's fields; records store how many of them they were written with. */
  readonly fields: readonly SchemaFieldDescriptor[];
}

/** JSON with object keys sorted, so a descriptor that went through JSON.parse hashes the same as a fresh one. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj)
      .filter((k) => obj[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Stable hex SHA-256 of a descriptor: equal layouts give equal fingerprints across processes
 * and across a JSON round trip of the descriptor.
 */
export function schemaFingerprint(descriptor: SchemaDescriptor): string {
  return createHash('sha256').update(canonicalJson(descriptor)).digest('hex');
}

/**
 * True when two descriptors describe the same layout, so that their fingerprints are equal:
 * the check of a schema registered again, without hashing it.
 */
export function isSameLayout(a: SchemaDescriptor, b: SchemaDescriptor): boolean {
  // A stored descriptor is JSON.parse of one built as a fresh one is, so its keys come in the same
  // order and the native JSON.stringify tells the common case; the canonical form is the rest.
  return a === b || JSON.stringify(a) === JSON.stringify(b) || canonicalJson(a) === canonicalJson(b);
}

function isDescriptor(d: unknown): d is SchemaDescriptor {
  if (d === null || typeof d !== 'object') return false;
  const r = d as Record<string, unknown>;
  return r['codec'] === 'pile-typed' && r['version'] === 1 && Array.isArray(r['fields']);
}

/**
 * True when records written under `older` can be read by a codec compiled for `newer`: the layouts are
 * identical, or `newer` is `older` with optional (`.optional()`) fields appended at the end of the
 * top-level object. Renamed, reordered, retyped, removed or appended required fields give false, as
 * does anything that is not a descriptor (e.g. a damaged persisted copy). Never throws.
 */
export function isCompatibleEvolution(older: SchemaDescriptor, newer: SchemaDescriptor): boolean {
  if (!isDescriptor(older) || !isDescriptor(newer)) return false;
  if (newer.fields.length < older.fields.length) return false;
  for (let i = 0; i < older.fields.length; i++) {
    if (canonicalJson(older.fields[i]) !== canonicalJson(newer.fields[i])) return false;
  }
  for (let i = older.fields.length; i < newer.fields.length; i++) {
    const type = newer.fields[i]?.type;
    if (type === undefined || type.kind !== 'maybe' || !type.optional) return false;
  }
  return true;
}

/** A layout node as a short type expression: `int32`, `string[]`, `float64 | null (optional)`, `{ a, b }`. */
export function describeSchemaType(t: SchemaTypeDescriptor | undefined): string {
  if (t === undefined || t === null || typeof t !== 'object') return 'nothing';
  switch (t.kind) {
    case 'enum':
      return `enum(${t.values.map((v) => ('value' in v ? JSON.stringify(v.value) : v.type)).join(', ')})`;
    case 'maybe':
      return `${describeSchemaType(t.of)}${t.nullable ? ' | null' : ''}${t.optional ? ' (optional)' : ''}`;
    case 'array':
      return `${describeSchemaType(t.of)}[]`;
    case 'object':
      return `{ ${t.fields.map((f) => f.name).join(', ')} }`;
    default:
      return t.kind;
  }
}

function fieldPath(prefix: string, name: string): string {
  return prefix === '' ? name : `${prefix}.${name}`;
}

function typeDifference(path: string, stored: SchemaTypeDescriptor, given: SchemaTypeDescriptor): string | undefined {
  if (canonicalJson(stored) === canonicalJson(given)) return undefined;
  if (stored.kind === 'object' && given.kind === 'object') return fieldsDifference(path, stored.fields, given.fields, false);
  if (stored.kind === 'array' && given.kind === 'array') return typeDifference(`${path}[]`, stored.of, given.of);
  if (stored.kind === 'maybe' && given.kind === 'maybe' && stored.nullable === given.nullable && stored.optional === given.optional) {
    return typeDifference(path, stored.of, given.of);
  }
  return `field "${path}": stored ${describeSchemaType(stored)}, given ${describeSchemaType(given)}`;
}

function fieldsDifference(
  prefix: string,
  stored: readonly SchemaFieldDescriptor[],
  given: readonly SchemaFieldDescriptor[],
  top: boolean,
): string | undefined {
  for (let i = 0; i < Math.max(stored.length, given.length); i++) {
    const s = stored[i];
    const g = given[i];
    if (s === undefined) {
      // Optional fields appended to the top level are the one compatible change.
      if (top && g!.type.kind === 'maybe' && g!.type.optional) continue;
      const why = top ? ' (only optional fields may be appended)' : '';
      return `field "${fieldPath(prefix, g!.name)}": stored no such field, given ${describeSchemaType(g!.type)}${why}`;
    }
    if (g === undefined) return `field "${fieldPath(prefix, s.name)}": stored ${describeSchemaType(s.type)}, given no such field`;
    if (s.name !== g.name) {
      return `field ${i + 1}${prefix === '' ? '' : ` of "${prefix}"`}: stored "${s.name}" (${describeSchemaType(s.type)}), given "${g.name}" (${describeSchemaType(g.type)})`;
    }
    const d = typeDifference(fieldPath(prefix, s.name), s.type, g.type);
    if (d !== undefined) return d;
  }
  return undefined;
}

/**
 * The first difference that makes `given` unable to read records written under `stored`, as the
 * field path and each side's view of it (`field "address.zip": stored int32, given string`), in field
 * order; undefined when {@link isCompatibleEvolution} holds. Never throws.
 */
export function schemaDifference(stored: SchemaDescriptor, given: SchemaDescriptor): string | undefined {
  if (!isDescriptor(stored)) return 'the stored descriptor is not one this build reads';
  if (!isDescriptor(given)) return 'the given descriptor is not a pile-typed descriptor';
  return fieldsDifference('', stored.fields, given.fields, true);
}
