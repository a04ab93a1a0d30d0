import * as fs from 'node:fs';
import { z, type ZodType } from 'zod';
import { CliError, EXIT_FAILED } from './CliError';

/** The field types a `--schema` file may name; a trailing `?` makes a field optional (null or missing). */
export const FLAT_TYPES = ['string', 'number', 'int', 'int32', 'boolean'] as const;

/** A flat record shape: field name → one of {@link FLAT_TYPES}, optionally with a trailing `?`. */
export type FlatShape = Record<string, string>;

function fieldType(type: string): ZodType {
  switch (type) {
    case 'string':
      return z.string();
    case 'number':
      return z.number();
    case 'int':
      return z.int();
    case 'int32':
      return z.int32();
    case 'boolean':
      return z.boolean();
    default:
      throw new Error(`unknown type '${type}' (expected one of ${FLAT_TYPES.join(', ')}, optionally ending in '?')`);
  }
}

/**
 * Checks a flat shape and builds the zod object it describes, fields in the shape's order
 * (the order is part of the stored layout).
 * @throws Error naming the field at fault
 */
export function zodOfShape(shape: unknown): ZodType<Record<string, unknown>> {
  if (shape === null || typeof shape !== 'object' || Array.isArray(shape)) throw new Error('expected a JSON object of field name to type');
  const fields: Record<string, ZodType> = {};
  const entries = Object.entries(shape as Record<string, unknown>);
  if (entries.length === 0) throw new Error('the schema has no fields');
  for (const [name, type] of entries) {
    if (typeof type !== 'string') throw new Error(`field '${name}': expected a type name string`);
    const optional = type.endsWith('?');
    try {
      const t = fieldType(optional ? type.slice(0, -1) : type);
      fields[name] = optional ? t.nullish() : t;
    } catch (err) {
      throw new Error(`field '${name}': ${(err as Error).message}`);
    }
  }
  return z.strictObject(fields) as unknown as ZodType<Record<string, unknown>>;
}

/**
 * Reads a `--schema` file.
 * @throws CliError naming the file when it can not be read, is not JSON or is not a valid shape
 */
export function readShapeFile(file: string): FlatShape {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`can not read schema file ${file}: ${(err as Error).message}`, EXIT_FAILED);
  }
  let shape: unknown;
  try {
    shape = JSON.parse(text);
  } catch (err) {
    throw new CliError(`schema file ${file} is not JSON: ${(err as Error).message}`, EXIT_FAILED);
  }
  try {
    zodOfShape(shape);
  } catch (err) {
    throw new CliError(`schema file ${file}: ${(err as Error).message}`, EXIT_FAILED);
  }
  return shape as FlatShape;
}
