import { PileError, literalOf, type Pile, type SchemaDescriptor } from '@pile/core';
import type { PileCache } from '@pile/cache';
import { z, type ZodType } from 'zod';

/** One node of a stored layout (the pile's SchemaTypeDescriptor), as far as this file reads it. */
type TypeNode = SchemaDescriptor['fields'][number]['type'];

const INT32_LAYOUT = 0x7fffffff; // the int32 layout keeps -2^31 for -0, so its bounds are ±(2^31 - 1)
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const UINT64_MAX = (1n << 64n) - 1n;

/**
 * A zod schema whose layout is `node`: the pile's schema compiler maps it back to the same node,
 * so a table opened with it reads (and would write) exactly what was stored. Every kind the
 * compiler stores: numbers (float64, int32), bigints (int64, uint64, any size), boolean, date,
 * string, bytes, enums of literals, optional / nullable, arrays and nested objects.
 * @throws PileError PILE_FORMAT_VERSION naming the field path for a kind this build does not know
 */
export function zodOfNode(node: TypeNode, path: string): ZodType {
  switch (node.kind) {
    case 'float64':
      return z.number();
    case 'int32':
      return z.int().min(-INT32_LAYOUT).max(INT32_LAYOUT);
    case 'int64':
      return z.bigint().min(INT64_MIN).max(INT64_MAX);
    case 'uint64':
      return z.bigint().min(0n).max(UINT64_MAX);
    case 'bigint':
      return z.bigint();
    case 'boolean':
      return z.boolean();
    case 'date':
      return z.date();
    case 'string':
      return z.string();
    case 'bytes':
      return z.instanceof(Uint8Array);
    case 'enum':
      return z.literal(node.values.map(literalOf) as [string, ...string[]]);
    case 'maybe': {
      const of = zodOfNode(node.of, path);
      if (node.nullable && node.optional) return of.nullish();
      return node.nullable ? of.nullable() : of.optional();
    }
    case 'array':
      return z.array(zodOfNode(node.of, `${path}[]`));
    case 'object':
      return objectOf(node.fields, path);
    default:
      throw new PileError(
        'PILE_FORMAT_VERSION',
        `${path}: the stored layout has a field of kind ${JSON.stringify((node as { kind: unknown }).kind)}, which this build does not know`,
      );
  }
}

function objectOf(fields: readonly { name: string; type: TypeNode }[], path: string): ZodType {
  const shape: Record<string, ZodType> = {};
  for (const f of fields) shape[f.name] = zodOfNode(f.type, `${path}.${f.name}`);
  return z.object(shape);
}

/**
 * The zod schema of a whole stored record layout (its top-level object); paths in errors start
 * with `root` (`value` by default: `value.dims.w`).
 * @throws PileError PILE_FORMAT_VERSION naming the field path for a kind this build does not know
 */
export function zodOfDescriptor(descriptor: SchemaDescriptor, root = 'value'): ZodType<Record<string, unknown>> {
  return objectOf(descriptor.fields, root) as ZodType<Record<string, unknown>>;
}

/**
 * The zod schema rebuilt from the layout the pile stores for a typed cache table's values
 * (`cache.tableInfo(table).schemaName` in `pile.schemas()`), or undefined for an untyped table.
 * @throws PileError PILE_CORRUPT naming the table when the pile holds no layout for its schema;
 *   PILE_FORMAT_VERSION naming the table and field path for a kind this build does not know
 */
export function storedTableSchema(pile: Pile, cache: PileCache, table: string): ZodType<unknown> | undefined {
  const schemaName = cache.tableInfo(table)?.schemaName;
  if (schemaName === undefined) return undefined;
  const stored = pile.schemas().find((s) => s.name === schemaName);
  if (stored === undefined) {
    throw new PileError(
      'PILE_CORRUPT',
      `cache table '${table}' stores typed values, but the pile holds no layout for its schema '${schemaName}'`,
    );
  }
  return zodOfDescriptor(stored.descriptor, `table '${table}': value`) as ZodType<unknown>;
}
