import type { PilePointer } from '../records/PilePointer';
import type { CompiledSchema, FieldReader } from './SchemaCompiler';
import type { FieldAccess, TypedStore } from './TypedStore';
import { TypedView } from './TypedView';

/**
 * The {@link TypedView} of a pile whose reads check the change sequence (ReadState.checkReads: a
 * read-only open; docs/concurrency.md, "Checked reads"). A class of its own so that its get() and
 * field() are functions of their own: V8 keeps type feedback per function, and when the reads of
 * both kinds of pile went through TypedView's get() and field(), a read-only pile in the same
 * process made a writable pile's typed get inline the checked path and run out of TurboFan's
 * inlining budget before the decode and the pointer check (typed get 0.82 and field() 0.90 of the
 * same build without a read-only pile, docs/benchmarks.md).
 *
 * Its get() runs field()'s compiled code for the whole record (compileFieldAccess, the codec's
 * decode as the read): the pointer check, the change sequence before and after the decode and the
 * decode in one function, with the segment, offset and sequence in locals. Through
 * RecordStore.getTypedChecked, which took them from quickLocate through fields of the pile (two of
 * them pointer stores with a write barrier) and loaded them back, a checked mapped get ran 753
 * instructions of JavaScript against 515 this way (6fa42f2's unchecked get 587;
 * benchmarks/results/comparisons.md, the section on the mapped put and get in instructions).
 */
export class CheckedTypedView<T> extends TypedView<T> {
  /** get()'s code: field()'s compiled check and read, for the whole record. */
  private readonly whole: FieldAccess;

  /** @internal */
  constructor(pile: TypedStore, id: number, codec: CompiledSchema<T>, name: string) {
    super(pile, id, codec, name);
    this.whole = pile.typedFieldAccess(id, undefined, codec.decode as FieldReader, undefined);
  }

  /**
   * Decodes the whole record; a read that met a writer's change is made again.
   * @throws PILE_SCHEMA_MISMATCH when the record is not of this schema
   * @throws PILE_LOCKED when a writer stays in the middle of a change of the record's segment
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CORRUPT, PILE_CLOSED
   */
  override get(ptr: PilePointer): T {
    const a = this.whole;
    return a.code(ptr, a.segments, a.read, a.slow) as T;
  }

  /**
   * Reads one top-level field without decoding the others (compiled with the check for this
   * pile); a read that met a writer's change is made again.
   * @throws PILE_INVALID_OPTION when `key` is not a field of the schema
   * @throws PILE_SCHEMA_MISMATCH when the record is not of this schema
   * @throws PILE_LOCKED when a writer stays in the middle of a change of the record's segment
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CORRUPT, PILE_CLOSED
   */
  override field<K extends keyof T>(ptr: PilePointer, key: K): T[K] {
    if (key !== this.lastKey) this.selectField(key);
    const a = this.lastAccess!;
    return a.code(ptr, a.segments, a.read, a.slow) as T[K];
  }
}
