import type { PilePointer } from './PilePointer';
import type { CompiledSchema } from './SchemaCompiler';
import { TypedView } from './TypedView';

/**
 * The {@link TypedView} of a pile whose reads check the change sequence (ReadState.checkReads: a
 * read-only open; docs/concurrency.md, "Checked reads"). A class of its own so that its get() and
 * field() are functions of their own: V8 keeps type feedback per function, and when the reads of
 * both kinds of pile went through TypedView's get() and field(), a read-only pile in the same
 * process made a writable pile's typed get inline the checked path (RecordStore.getTypedChecked)
 * and run out of TurboFan's inlining budget before the decode and the pointer check (typed get
 * 0.82 and field() 0.90 of the same build without a read-only pile, docs/benchmarks.md).
 */
export class CheckedTypedView<T> extends TypedView<T> {
  /**
   * Decodes the whole record; a read that met a writer's change is made again.
   * @throws PILE_SCHEMA_MISMATCH when the record is not of this schema
   * @throws PILE_LOCKED when a writer stays in the middle of a change of the record's segment
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CORRUPT, PILE_CLOSED
   */
  override get(ptr: PilePointer): T {
    return this.pile.getTypedChecked(ptr, this.id, this.codec as CompiledSchema<unknown>) as T;
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
