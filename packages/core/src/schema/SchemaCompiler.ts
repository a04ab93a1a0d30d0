import type { ZodType } from 'zod';
import { compileCached } from './CodeCache';
import { PileError } from '../PileError';
import { illFormedString } from '../records/ValueCheck';
import { bigintSize, readBigint, writeBigint } from './BigIntCodec';
import { generateDecodeCodec, generateFieldCodec, generateOldDecodeCodec, generateWriteCodec } from './CodecSources';
import type { GeneratedCodec, InlineRead } from './SchemaCodegen';
import { type SchemaDescriptor, isCompatibleEvolution, schemaFingerprint } from './SchemaDescriptor';
import { analyze, describeLayout, layoutOfType, type LayoutField } from './SchemaLayout';

export type { SchemaDescriptor, SchemaFieldDescriptor, SchemaLiteral, SchemaTypeDescriptor } from './SchemaDescriptor';
export { isCompatibleEvolution, schemaFingerprint };

/**
 * A record codec specialised for one zod object schema. Layout of a record (little endian, offsets
 * relative to the record start): `[u16 fieldCount][fixed section][variable section]`; each top-level field
 * has a slot at a compile-time offset in the fixed section (scalars inline, strings/bytes/arrays as a
 * u32 offset + u32 length into the variable section), which is what makes {@link CompiledSchema.field} O(1).
 *
 * Value mapping, per zod type:
 * - `z.number()`: float64, exact for every number (-0, NaN, ±Infinity, ±(2^53-1)). An integer schema whose
 *   bounds lie within ±(2^31-1) (`z.int32()`, `z.number().int().min(0).max(100)`) is stored as int32
 *   (-2^31 is reserved to keep -0 exact, so the full-range `z.int32()` and `z.uint32()` stay float64); such a
 *   field refuses non-integers and out-of-bounds values even without `validate`, as it could not store them.
 * - `z.bigint()`: int64 (uint64 for `z.uint64()` or bounds beyond int64); out-of-range values are refused.
 * - `z.date()`: float64 milliseconds; an Invalid Date round-trips as an Invalid Date.
 * - `z.string()`: UTF-8. Lone surrogates cannot be represented in UTF-8 and decode as U+FFFD.
 * - `z.enum`, `z.literal`, `z.null()`, unions of literals: the index of the value (1 byte, 2 above 256 values).
 * - `.optional()`, `.nullable()`, `.nullish()`, `z.union([X, z.null()])`: a presence byte before X.
 *   An absent optional object field decodes with its key left out (not set to `undefined`), so
 *   `decode(encode(v))` deep-equals `v` when `v` omits the key.
 * - `z.array(X)`, nested `z.object`: any depth. Nested objects are inlined in their parent's slot.
 * - bytes: `z.instanceof(Uint8Array)` or `z.instanceof(Buffer)` (zod records the class; a plain `z.custom`
 *   hides its predicate, so it is refused). Decoding returns a copy of that class, never a view of the pile.
 * - `.default()`, `.prefault()`, `.catch()`, `.readonly()`, `z.lazy` (non-recursive), `.pipe()` without
 *   transforms: stored as their output type. The value you pass is stored as is: defaults are not applied.
 *
 * Extra keys of a value are ignored, like zod's default `strip`.
 */
export interface CompiledSchema<T> {
  /** The layout, JSON-serialisable, to persist next to the records it describes. */
  readonly descriptor: SchemaDescriptor;
  /** Hex SHA-256 of the descriptor: same layout, same fingerprint, in any process. */
  readonly fingerprint: string;
  /**
   * Validates `value` against the shape and returns the exact byte count {@link encode} will write.
   * @throws PileError PILE_SCHEMA_VIOLATION naming the path (e.g. `items[3].name: expected string, got number`);
   *   with `validate: true` also for any zod issue (refinements, min/max...), with zod's path and message.
   * @throws PileError PILE_INVALID_VALUE naming the path of a string with a lone surrogate.
   */
  measure(value: T): number;
  /**
   * {@link measure}'s checks, returning an upper bound of the bytes {@link encode} writes instead of
   * the exact count: strings count 3 bytes per UTF-16 unit, which spares the UTF-8 length scan.
   * For writers that can give back what they did not use (the pile trims the block after encode).
   * @throws PileError PILE_SCHEMA_VIOLATION as {@link measure}.
   */
  measureBound(value: T): number;
  /**
   * Writes `value` at `buf[offset..end)` and returns the end offset; `end - offset` is what
   * {@link measure} or {@link measureBound} gave (or more). Every field is read once more and checked
   * as it is written, so a value that changed since it was measured (a getter, a proxy) is written as
   * read or refused, never past `end`. `view` must be a DataView over the same memory as `buf`
   * (`view.byteOffset === buf.byteOffset`).
   * @throws PileError PILE_SCHEMA_VIOLATION when the value read again no longer fits the shape;
   *   PILE_INVALID_VALUE when it no longer fits `end` (it changed since it was measured); bytes
   *   in `[offset, end)` may have been written.
   */
  encode(value: T, buf: Buffer, view: DataView, offset: number, end: number): number;
  /**
   * {@link encode} for a writer that has just passed the same `value` to {@link measure} or
   * {@link measureBound}: the check of the value itself (a non-array object), which cannot change
   * between the two reads, is not made again; every field is read and checked again as in encode.
   * Smaller than encode, so that a writer's hot path can inline it whole (the pile's and the
   * cache's typed writes call it).
   * @throws PileError PILE_SCHEMA_VIOLATION as {@link encode}; a value that was not measured first
   *   may fail with a TypeError instead (null) or name a field instead of the root.
   */
  encodeMeasured(value: T, buf: Buffer, view: DataView, offset: number, end: number): number;
  /**
   * Decodes the `length`-byte record at `buf[offset..]`, written by this schema or by an older compatible
   * one (see {@link isCompatibleEvolution}); fields the record lacks are left out of the result.
   * @throws PileError PILE_CORRUPT when a length or offset points outside the record or a tag is invalid.
   * @throws PileError PILE_SCHEMA_MISMATCH when the record lacks a required field (written by an incompatible schema).
   */
  decode(buf: Buffer, view: DataView, offset: number, length: number): T;
  /**
   * Reads one top-level field without decoding the others, in time independent of the number of fields.
   * Returns undefined for an optional field that an older record does not have.
   * @throws PileError PILE_INVALID_OPTION when `key` is not a field of the schema.
   * @throws PileError PILE_CORRUPT / PILE_SCHEMA_MISMATCH as {@link decode}.
   */
  field<K extends keyof T>(buf: Buffer, view: DataView, offset: number, length: number, key: K): T[K];
  /**
   * The reader that {@link field} uses for `key`, for callers that read the same field many times.
   * @throws PileError PILE_INVALID_OPTION when `key` is not a field of the schema.
   */
  reader(key: PropertyKey): FieldReader;
  /**
   * The read of `key` as inlinable source when it is a fixed-slot scalar (see {@link InlineRead}),
   * for code generated around the codec (the pile's compiled field access); undefined otherwise.
   */
  inlineRead(key: PropertyKey): InlineRead | undefined;
}

/** Options of {@link compileSchema}. */
export interface CompileSchemaOptions {
  /**
   * Also run `schema.safeParse(value)` in `measure`, so refinements, string formats and numeric bounds are
   * enforced; without it only the shape needed to store the value exactly is checked. Default false.
   */
  readonly validate?: boolean;
}

/** Reads one top-level field of a record whose codec bytes start at `offset`. */
export type FieldReader = (buf: Buffer, view: DataView, offset: number, length: number) => unknown;
type Reader = FieldReader;
interface GeneratedWriteModule {
  measure(value: unknown): number;
  measureBound(value: unknown): number;
  encode(value: unknown, buf: Buffer, view: DataView, offset: number, end: number): number;
  encodeMeasured(value: unknown, buf: Buffer, view: DataView, offset: number, end: number): number;
}
/** The write functions of a codec, made on first use (see build). */
type WriteHalf<T> = Pick<CompiledSchema<T>, 'measure' | 'measureBound' | 'encode' | 'encodeMeasured'>;

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'Date';
  if (v instanceof Uint8Array) return 'Uint8Array';
  return typeof v;
}

function showValue(v: unknown): string {
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (typeof v === 'boolean') return String(v);
  return typeName(v);
}

function fail(path: string, expected: string, value: unknown): never {
  throw new PileError('PILE_SCHEMA_VIOLATION', `${path}: expected ${expected}, got ${typeName(value)}`);
}

function failValue(path: string, expected: string, value: unknown): never {
  throw new PileError('PILE_SCHEMA_VIOLATION', `${path}: expected ${expected}, got ${showValue(value)}`);
}

function illFormed(path: string, value: string): never {
  throw new PileError('PILE_INVALID_VALUE', `${path}: ${illFormedString(value) ?? 'ill-formed string'}`);
}

function overflow(path: string, room: number): never {
  throw new PileError(
    'PILE_INVALID_VALUE',
    `${path}: the value changed while it was being stored and no longer fits the ${room} bytes measured for it; nothing is written`,
  );
}

/** True when the `n` bytes at `buf[start..]` are all ASCII (see SchemaCodegen's string case). */
function ascii(buf: Uint8Array, start: number, n: number): boolean {
  let high = 0;
  for (let i = start, e = start + n; i < e; i++) high |= buf[i]!;
  return high < 0x80;
}

/**
 * The checks of a string the generated encode wrote (`w` bytes into `room`; see SchemaCodegen's
 * string case): refused when ill-formed, or when the write was cut short of the string.
 */
function written(path: string, value: string, w: number, room: number, max: number): void {
  if (!(value as unknown as { isWellFormed(): boolean }).isWellFormed()) illFormed(path, value);
  if (w > room - 4 && Buffer.byteLength(value) !== w) overflow(path, max);
}

function corrupt(offset: number, length: number): never {
  throw new PileError('PILE_CORRUPT', `typed record at offset ${offset} (${length} bytes) has an offset, length or tag out of range`);
}

function mismatch(offset: number, fieldCount: number, name: string): never {
  throw new PileError(
    'PILE_SCHEMA_MISMATCH',
    `typed record at offset ${offset} has ${fieldCount} fields and lacks required field "${name}" (written by an incompatible schema)`,
  );
}

function copyU8(buf: Buffer, start: number, length: number): Uint8Array {
  const from = buf.byteOffset + start;
  return new Uint8Array(buf.buffer.slice(from, from + length));
}

function copyBuffer(buf: Buffer, start: number, length: number): Buffer {
  const from = buf.byteOffset + start;
  return Buffer.from(buf.buffer.slice(from, from + length));
}

function formatZodPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'symbol') out += `[${String(key)}]`;
    else out += out === '' ? key : `.${key}`;
  }
  return out === '' ? '(root)' : out;
}

/**
 * Compiles a codec for records of `schema`, generating specialised JavaScript once (with `new Function`)
 * so that per-record work is straight-line code. See {@link CompiledSchema} for the supported zod types.
 * @param schema a `z.object(...)` (strict objects are fine; loose/catchall objects are refused).
 * @throws PileError PILE_INVALID_OPTION when the schema (or a part of it, named by path such as
 *   `schema.tags[]: z.map is not supported`) cannot be stored: z.any/unknown, map, set, record, tuple,
 *   intersection, unions of non-literals, transforms, recursive z.lazy, plain z.custom, non-object top level.
 */
export function compileSchema<T>(schema: ZodType<T>, options?: CompileSchemaOptions): CompiledSchema<T> {
  // Codecs are stateless, so reopening piles with the same schema object reuses the generated code.
  const validate = options?.validate === true;
  let cached = cache.get(schema);
  if (cached === undefined) cache.set(schema, (cached = {}));
  const hit = validate ? cached.validated : cached.plain;
  if (hit !== undefined) return hit as CompiledSchema<T>;
  const codec = compile(schema, validate);
  if (validate) cached.validated = codec;
  else cached.plain = codec;
  return codec;
}

const cache = new WeakMap<object, { plain?: unknown; validated?: unknown }>();

function compile<T>(schema: ZodType<T>, validate: boolean): CompiledSchema<T> {
  const root = analyze(schema, 'schema', new Set());
  if (root.kind !== 'object') {
    throw new PileError('PILE_INVALID_OPTION', `schema: the top level must be a z.object, got ${root.kind}`);
  }
  return build(root.fields, describeLayout(root), validate ? schema : undefined);
}

/**
 * A codec for records stored under `descriptor`, made without their zod schema: for tools that
 * read piles they did not write (`pile dump`). It decodes the stored layout as is: integer
 * fields stored as int32 accept their whole range, byte arrays come back as Uint8Array, and no
 * zod default or refinement applies.
 * @throws PileError PILE_CORRUPT when the descriptor is not one this build wrote.
 */
export function compileDescriptor(descriptor: SchemaDescriptor): CompiledSchema<Record<string, unknown>> {
  if (
    descriptor === null ||
    typeof descriptor !== 'object' ||
    descriptor.codec !== 'pile-typed' ||
    descriptor.version !== 1 ||
    !Array.isArray(descriptor.fields)
  ) {
    throw new PileError('PILE_CORRUPT', 'stored schema descriptor is not a pile-typed version 1 layout');
  }
  return build(
    descriptor.fields.map((f) => ({ name: f.name, type: layoutOfType(f.type) })),
    descriptor,
    undefined,
  );
}

/** The parameters every generated codec module is compiled with, and their values (see {@link build}). */
const HELPER_NAMES = [
  'K',
  'fail',
  'failValue',
  'illFormed',
  'overflow',
  'written',
  'ascii',
  'corrupt',
  'mismatch',
  'byteLength',
  'copyU8',
  'copyBuffer',
  'bigSize',
  'bigWrite',
  'bigRead',
  'decodeOld',
] as const;

/**
 * Compiles one generated module (once per distinct source, see compileCached) and runs it with its
 * constants and the helpers; `decodeOld`: the decode of older records, for the decode module.
 */
function instantiate<M>(generated: GeneratedCodec, decodeOld?: Reader): M {
  const factory = compileCached<(...args: unknown[]) => M>(HELPER_NAMES, generated.source);
  return factory(
    generated.constants,
    fail,
    failValue,
    illFormed,
    overflow,
    written,
    ascii,
    corrupt,
    mismatch,
    Buffer.byteLength,
    copyU8,
    copyBuffer,
    bigintSize,
    writeBigint,
    readBigint,
    decodeOld,
  );
}

/**
 * A {@link CompiledSchema}: the functions in fields of the instance (the hot paths load them from
 * one map), the fingerprint a getter of the prototype, hashed on first read. An accessor in the
 * object literal the codec was before made the typed put's loads of its fields generic LoadIC
 * calls (about 160 instructions a put under callgrind).
 */
class Codec<T> implements CompiledSchema<T> {
  private hash: string | undefined;
  constructor(
    readonly descriptor: SchemaDescriptor,
    public measure: CompiledSchema<T>['measure'],
    public measureBound: CompiledSchema<T>['measureBound'],
    public encode: CompiledSchema<T>['encode'],
    public encodeMeasured: CompiledSchema<T>['encodeMeasured'],
    readonly decode: CompiledSchema<T>['decode'],
    readonly reader: (key: PropertyKey) => FieldReader,
    readonly inlineRead: (key: PropertyKey) => InlineRead | undefined,
  ) {}

  get fingerprint(): string {
    return (this.hash ??= schemaFingerprint(this.descriptor));
  }

  field<K extends keyof T>(buf: Buffer, view: DataView, offset: number, length: number, key: K): T[K] {
    return this.reader(key)(buf, view, offset, length) as T[K];
  }
}

/**
 * Generates the codec of a top-level layout; `validateWith`: also run that zod schema in measure.
 * Only the decode of a record with all the fields is generated and compiled here; the decode of
 * older records, the field reads, the write half (measure, encode) and the fingerprint (a
 * SHA-256, whose first use in a process costs about as much as the decode) each on first use,
 * so that a process reopening a pile reaches its first typed record without paying for what it
 * may never do. The functions made later start as stubs that make them and then put them in
 * their place on the codec, so a caller that kept a stub still works.
 */
function build<T>(fields: readonly LayoutField[], descriptor: SchemaDescriptor, validateWith: ZodType<T> | undefined): CompiledSchema<T> {
  let old: Reader | undefined;
  const decodeOld: Reader = (buf, view, offset, length) =>
    (old ??= instantiate<{ decodeOld: Reader }>(generateOldDecodeCodec(fields)).decodeOld)(buf, view, offset, length);
  // Generated once per schema: per-record work is then monomorphic straight-line code V8 can optimise.
  const gen = instantiate<{ decode: Reader }>(generateDecodeCodec(fields), decodeOld);

  let fieldReads: { readers: Map<PropertyKey, Reader>; inline: readonly (InlineRead | undefined)[] } | undefined;
  const fieldCode = (): NonNullable<typeof fieldReads> => {
    if (fieldReads === undefined) {
      const generated = generateFieldCodec(fields);
      const made = instantiate<{ readers: Reader[] }>(generated);
      const readers = new Map<PropertyKey, Reader>();
      fields.forEach((f, i) => {
        const r = made.readers[i];
        if (r !== undefined) readers.set(f.name, r);
      });
      fieldReads = { readers, inline: generated.inline };
    }
    return fieldReads;
  };

  const validated = (raw: (value: unknown) => number): ((value: T) => number) =>
    validateWith === undefined
      ? raw
      : (value: T): number => {
          const result = validateWith.safeParse(value);
          if (!result.success) {
            const issue = result.error.issues[0];
            const where = formatZodPath(issue?.path ?? []);
            throw new PileError('PILE_SCHEMA_VIOLATION', `${where}: ${issue?.message ?? 'invalid value'}`);
          }
          return raw(value);
        };

  let writer: WriteHalf<T> | undefined;
  const write = (): WriteHalf<T> => {
    if (writer === undefined) {
      const w = instantiate<GeneratedWriteModule>(generateWriteCodec(fields));
      writer = {
        measure: validated(w.measure),
        measureBound: validated(w.measureBound),
        encode: w.encode as CompiledSchema<T>['encode'],
        encodeMeasured: w.encodeMeasured as CompiledSchema<T>['encodeMeasured'],
      };
      Object.assign(codec, writer);
    }
    return writer;
  };
  const codec = new Codec<T>(
    descriptor,
    (value) => write().measure(value),
    (value) => write().measureBound(value),
    (value, buf, view, offset, end) => write().encode(value, buf, view, offset, end),
    (value, buf, view, offset, end) => write().encodeMeasured(value, buf, view, offset, end),
    gen.decode as CompiledSchema<T>['decode'],
    reader,
    (key) => {
      const i = fields.findIndex((f) => f.name === key);
      return i < 0 ? undefined : fieldCode().inline[i];
    },
  );
  return codec;
  function reader(key: PropertyKey): FieldReader {
    const read = fieldCode().readers.get(key);
    if (read === undefined) throw new PileError('PILE_INVALID_OPTION', `field ${JSON.stringify(String(key))} is not in the schema`);
    return read;
  }
}
