import type { CompiledSchema } from './SchemaCompiler';
import type { FieldAccess, TypedStore } from './TypedStore';
import type { PilePointer } from '../records/PilePointer';

/** lastKey before the first field(): a key no caller can pass, so even `undefined` is looked up (and refused). */
const NO_KEY: unique symbol = Symbol('no field read yet');

/** Options of {@link Pile.schema}. */
export interface SchemaOptions {
  /** Also run the zod schema's refinements (min, max, regex, refine ...) on every put and set. */
  validate?: boolean;
}

/**
 * Records of one zod schema, encoded by code compiled once for that shape.
 * Obtained from {@link Pile.schema}; valid while its pile is open. The view of a pile whose reads
 * check the change sequence (a read-only open) is a CheckedTypedView.
 */
export class TypedView<T> {
  /** field()'s compiled accessors by key; loops read the same field over and over, so the last one is kept apart. */
  private readonly access = new Map<PropertyKey, FieldAccess>();
  protected lastKey: PropertyKey | undefined = NO_KEY;
  protected lastAccess: FieldAccess | undefined;

  /** @internal */
  constructor(
    protected readonly pile: TypedStore,
    /** The schema's id in this pile, stored in each record's header. */
    readonly id: number,
    protected readonly codec: CompiledSchema<T>,
    /** The name the schema is registered under. */
    readonly name: string,
  ) {}

  /**
   * Stores a value of the schema.
   * @throws PILE_SCHEMA_VIOLATION naming the path of the first mismatch; nothing is written
   * @throws PILE_INVALID_VALUE naming the path of a string with a lone surrogate, or of a value that
   *   changed while it was stored (a getter or proxy); nothing is written
   * @throws PILE_TOO_LARGE, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  put(value: T): PilePointer {
    return this.pile.putTyped(this.id, this.codec as CompiledSchema<unknown>, value);
  }

  /**
   * Decodes the whole record.
   * @throws PILE_SCHEMA_MISMATCH when the record is not of this schema
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CORRUPT, PILE_CLOSED
   */
  get(ptr: PilePointer): T {
    return this.pile.getTyped(ptr, this.id, this.codec as CompiledSchema<unknown>) as T;
  }

  /**
   * Reads one top-level field without decoding the others, through code compiled for this
   * field and pile on its first read.
   * @throws PILE_INVALID_OPTION when `key` is not a field of the schema
   * @throws PILE_SCHEMA_MISMATCH when the record is not of this schema
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CORRUPT, PILE_CLOSED
   */
  field<K extends keyof T>(ptr: PilePointer, key: K): T[K] {
    if (key !== this.lastKey) this.selectField(key);
    const a = this.lastAccess!;
    return a.code(ptr, a.segments, a.read, a.slow) as T[K];
  }

  protected selectField(key: PropertyKey): void {
    let access = this.access.get(key);
    if (access === undefined) {
      access = this.pile.typedFieldAccess(this.id, String(key), this.codec.reader(key), this.codec.inlineRead(key));
      this.access.set(key, access);
    }
    this.lastAccess = access;
    this.lastKey = key;
  }

  /**
   * Replaces the record's value in place (or through a link when it grew); the pointer stays valid.
   * @throws PILE_SCHEMA_VIOLATION naming the path; nothing is written
   * @throws PILE_INVALID_VALUE as {@link put}; nothing is written
   * @throws PILE_SCHEMA_MISMATCH when the record is not of this schema
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_TOO_LARGE, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  set(ptr: PilePointer, value: T): void {
    this.pile.setTyped(ptr, this.id, this.codec as CompiledSchema<unknown>, value);
  }
}
