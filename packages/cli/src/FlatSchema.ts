import * as fs from 'node:fs';
import { PileError } from '@pile/core';
import { z, type ZodType } from 'zod';

/** The field types a `--schema` file may name; a trailing `?` makes a field optional (null or missing). */
export const FLAT_TYPES = ['string', 'number', 'int', 'int32', 'boolean'] as const;

/**
 * A record shape: field name → a type name of {@link FLAT_TYPES} (a trailing `[]` makes it an
 * array of that type, a trailing `?` lets the field be null or missing: `string[]?`), a nested
 * shape (an object), or a one-element JSON array `[T]`: an array of T (a type name or a shape).
 */
export type FlatShape = Record<string, unknown>;

/** A shape at fault: PILE_INVALID_OPTION, the message naming the field path. */
function badShape(message: string): PileError {
  return new PileError('PILE_INVALID_OPTION', message);
}

/** The zod type of each flat type name. */
const FLAT_ZOD: Record<(typeof FLAT_TYPES)[number], () => ZodType> = {
  string: () => z.string(),
  number: () => z.number(),
  int: () => z.int(),
  int32: () => z.int32(),
  boolean: () => z.boolean(),
};

function fieldType(type: string, name: string): ZodType {
  if (Object.hasOwn(FLAT_ZOD, type)) return FLAT_ZOD[type as keyof typeof FLAT_ZOD]();
  throw badShape(
    `field '${name}': unknown type '${type}' (expected one of ${FLAT_TYPES.join(', ')}, optionally ending in '[]' and/or '?')`,
  );
}

function typeOf(spec: unknown, name: string): ZodType {
  if (typeof spec === 'string') {
    const optional = spec.endsWith('?');
    let base = optional ? spec.slice(0, -1) : spec;
    let depth = 0;
    while (base.endsWith('[]')) [base, depth] = [base.slice(0, -2), depth + 1];
    let t = fieldType(base, name);
    for (; depth > 0; depth--) t = z.array(t);
    return optional ? t.nullish() : t;
  }
  if (Array.isArray(spec)) {
    if (spec.length !== 1) throw badShape(`field '${name}': an array type is written as a one-element array [type]`);
    return z.array(typeOf(spec[0], `${name}[]`));
  }
  if (spec !== null && typeof spec === 'object') return objectOf(spec as Record<string, unknown>, `${name}.`);
  throw badShape(`field '${name}': expected a type name string, a nested shape or [type]`);
}

function objectOf(shape: Record<string, unknown>, prefix: string): ZodType {
  const entries = Object.entries(shape);
  if (entries.length === 0) throw badShape(prefix === '' ? 'the schema has no fields' : `field '${prefix.slice(0, -1)}' has no fields`);
  const fields: Record<string, ZodType> = {};
  for (const [name, spec] of entries) fields[name] = typeOf(spec, `${prefix}${name}`);
  return z.strictObject(fields);
}

/**
 * Checks a shape and builds the zod object it describes, fields in the shape's order (the order
 * is part of the stored layout).
 * @throws PileError PILE_INVALID_OPTION naming the field at fault (`field 'dims.w': unknown type 'float' ...`)
 */
export function zodOfShape(shape: unknown): ZodType<Record<string, unknown>> {
  if (shape === null || typeof shape !== 'object' || Array.isArray(shape)) throw badShape('expected a JSON object of field name to type');
  return objectOf(shape as Record<string, unknown>, '') as unknown as ZodType<Record<string, unknown>>;
}

/**
 * Reads a `--schema` file.
 * @throws PileError PILE_INVALID_OPTION naming the option and file (`--schema file F: ...`) when it can
 *   not be read, is not JSON or is not a valid shape (then the field at fault too)
 */
export function readShapeFile(file: string): FlatShape {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw badShape(`--schema file ${file} can not be read: ${(err as Error).message}`);
  }
  let shape: unknown;
  try {
    shape = JSON.parse(text);
  } catch (err) {
    throw badShape(`--schema file ${file} is not JSON: ${(err as Error).message}`);
  }
  try {
    zodOfShape(shape);
  } catch (err) {
    throw badShape(`--schema file ${file}: ${(err as Error).message}`);
  }
  return shape as FlatShape;
}
