import { PileError, compileSchema, isPileError, refuseFunction, type CompiledSchema, type Pile } from '@pile/core';
import { encodeGuard, genericValueFault, illFormedString } from './CoreBindings';
import type { Packr } from 'msgpackr';
import { invalidOption } from './TableOptions';

export const VALUE_STRING = 1;
export const VALUE_BYTES = 2;
export const VALUE_BUFFER = 3;
export const VALUE_MSGPACK = 4;
export const VALUE_TYPED = 5;
/** Largest room a typed value is given from its bound; past it the value is measured exactly. */
export const TYPED_BOUND_LIMIT = 4096;

/**
 * Encodes a table's values inside its entry records. With a schema: the pile's compiled codec
 * (no per-record shape data, fields read at fixed offsets). Without: strings as UTF-8, byte
 * arrays as is, anything else as self-contained MessagePack (an entry never depends on another record).
 */
export class ValueCodec<V> {
  /** What {@link measure} decided for the value in progress. */
  kind = 0;
  private packed: Buffer | undefined;
  private value: unknown;
  private packrInstance: Packr | undefined;

  constructor(private readonly codec: CompiledSchema<V> | undefined) {}

  /** msgpackr is loaded by the first generic value: typed tables never pay for it at start-up. */
  private get packr(): Packr {
    if (this.packrInstance === undefined) {
      const { Packr: MsgPackr } = require('msgpackr') as typeof import('msgpackr');
      this.packrInstance = new MsgPackr({
        useRecords: false,
        moreTypes: true,
        writeFunction: refuseFunction('PILE_INVALID_VALUE'),
      } as never);
    }
    return this.packrInstance;
  }

  get typed(): boolean {
    return this.codec !== undefined;
  }

  /**
   * The room `value` needs as stored (the {@link write} gives its exact length); checks it against
   * the schema. A typed value's room is an upper bound (3 bytes per UTF-16 unit of its strings)
   * when that is at most {@link TYPED_BOUND_LIMIT}, and its exact byte length otherwise.
   * @throws PILE_SCHEMA_VIOLATION naming the path, for a typed table
   * @throws PILE_INVALID_VALUE naming the path of a part that would not read back as it was (a lone
   *   surrogate, a function, a boxed primitive, a Map in a generic value, -0, a cycle, ...)
   */
  measure(value: V): number {
    // The caller's code (getters, toJSON, zod) runs here and may read this cache: the state is set
    // after it returns. Writes from it are refused (encodeGuard).
    if (this.codec !== undefined) {
      let n: number;
      encodeGuard.depth++;
      try {
        // The bound spares the UTF-8 length scan of each string (a native call), and gives the
        // encode's utf8Write room for 3 bytes a unit, which V8 writes without checking the room
        // at each character (an exact room took 2.2x its instructions: benchmarks/compare/
        // utf8-write-capacity.cjs). A large value is measured exactly, so that its scratch is not
        // 3x its size and a bound past the segment never refuses a value that fits.
        n = this.codec.measureBound(value);
        if (n > TYPED_BOUND_LIMIT) n = this.codec.measure(value);
      } finally {
        encodeGuard.depth--;
      }
      this.set(VALUE_TYPED, value, undefined);
      return n;
    }
    if (typeof value === 'string') {
      const bad = illFormedString(value);
      if (bad !== undefined) throw new PileError('PILE_INVALID_VALUE', `value: ${bad}`);
      this.set(VALUE_STRING, value, undefined);
      return Buffer.byteLength(value, 'utf8');
    }
    if (value instanceof Uint8Array) {
      this.set(Buffer.isBuffer(value) ? VALUE_BUFFER : VALUE_BYTES, value, undefined);
      return value.length;
    }
    const packed = this.pack(value);
    this.set(VALUE_MSGPACK, value, packed);
    return packed.length;
  }

  /** MessagePack of a generic value; writes are refused while the caller's code runs in it. */
  private pack(value: unknown): Buffer {
    encodeGuard.depth++;
    try {
      // Entries are self-contained MessagePack without records, where a Map and a plain object
      // are one msgpack map: a Map is refused rather than read back as an object.
      const bad = genericValueFault(value, false);
      if (bad !== undefined) throw new PileError('PILE_INVALID_VALUE', bad);
      return this.packr.pack(value);
    } catch (err) {
      throw err instanceof PileError
        ? err
        : new PileError('PILE_INVALID_VALUE', `value: can not be encoded as MessagePack: ${(err as Error).message}`);
    } finally {
      encodeGuard.depth--;
    }
  }

  private set(kind: number, value: unknown, packed: Buffer | undefined): void {
    this.kind = kind;
    this.value = value;
    this.packed = packed;
  }

  /**
   * Writes the measured value at `buf[off..off + room)`, `room` being what {@link measure} gave;
   * returns its exact length.
   * @throws PILE_INVALID_VALUE when a typed value read again no longer fits `room` (nothing
   *   past `off + room` is written)
   */
  write(buf: Buffer, view: DataView, off: number, room: number): number {
    let len = room;
    switch (this.kind) {
      case VALUE_TYPED:
        // A second read of the value: checked again, written as read, and bounded by the room.
        encodeGuard.depth++;
        try {
          len = this.codec!.encodeMeasured(this.value as V, buf, view, off, off + room) - off;
        } finally {
          encodeGuard.depth--;
        }
        break;
      case VALUE_STRING:
        buf.write(this.value as string, off, room, 'utf8');
        break;
      case VALUE_BYTES:
      case VALUE_BUFFER:
        buf.set(this.value as Uint8Array, off);
        break;
      default:
        buf.set(this.packed!, off);
    }
    this.value = undefined;
    this.packed = undefined;
    return len;
  }

  /**
   * Decodes a stored value.
   * @throws PILE_CORRUPT when the bytes do not decode
   * @throws PILE_SCHEMA_MISMATCH when a typed value is read by a table without its schema
   */
  read(kind: number, buf: Buffer, view: DataView, off: number, len: number): V {
    switch (kind) {
      case VALUE_TYPED:
        if (this.codec === undefined) throw new PileError('PILE_SCHEMA_MISMATCH', 'a typed cache value is read without its schema');
        return this.codec.decode(buf, view, off, len);
      case VALUE_STRING:
        return buf.toString('utf8', off, off + len) as V;
      case VALUE_BYTES: {
        const out = new Uint8Array(len);
        out.set(buf.subarray(off, off + len));
        return out as V;
      }
      case VALUE_BUFFER:
        return Buffer.from(buf.subarray(off, off + len)) as V;
      case VALUE_MSGPACK:
        try {
          return this.packr.unpack(buf.subarray(off, off + len)) as V;
        } catch (err) {
          throw new PileError('PILE_CORRUPT', `cache value at offset ${off} does not decode: ${(err as Error).message}`);
        }
      default:
        throw new PileError('PILE_CORRUPT', `cache value at offset ${off} has unknown kind ${kind}`);
    }
  }
}

/**
 * Registers the values' schema of table `id` (`name`) with the pile, which persists it and refuses
 * an incompatible change, and compiles the table's codec.
 * @throws PILE_INVALID_OPTION when `schema` is not a zod schema
 * @throws PILE_SCHEMA_MISMATCH naming the table when the schema differs incompatibly from the stored one
 */
export function registerSchema<V>(pile: Pile, id: number, name: string, schema: unknown): CompiledSchema<V> {
  if (schema === null || typeof schema !== 'object' || typeof (schema as { safeParse?: unknown }).safeParse !== 'function') {
    throw invalidOption('schema', `table '${name}': expected a zod schema`);
  }
  try {
    pile.schema(`pile-cache:${id}`, schema as never);
  } catch (err) {
    // The pile names the schema by its internal name; the user knows the table.
    if (isPileError(err, 'PILE_SCHEMA_MISMATCH')) {
      throw new PileError(
        'PILE_SCHEMA_MISMATCH',
        `cache table '${name}': ${err.message.replace(/^schema 'pile-cache:\d+' does not match the one stored in the pile/, 'the schema given does not match the one the table was created with')}`,
      );
    }
    throw err;
  }
  return compileSchema(schema as never) as CompiledSchema<V>;
}
