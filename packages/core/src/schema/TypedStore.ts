import type { PilePointer } from '../records/PilePointer';
import type { FieldAccessCode } from '../records/PointerCheck';
import type { InlineRead } from './SchemaCodegen';
import type { CompiledSchema, FieldReader } from './SchemaCompiler';
import type { Segment } from '../storage/Segment';

/**
 * What TypedView.field calls: shared code, and the pile, reader and general path it is called with.
 * Not exported from the package, but not stripped from the declarations either, because TypedView's protected members
 * (which CheckedTypedView uses) name it, so its declaration must reach the published .d.ts.
 */
export interface FieldAccess {
  readonly code: FieldAccessCode;
  readonly segments: readonly Segment[];
  readonly read: FieldReader;
  readonly slow: (ptr: number) => unknown;
}

/**
 * What a TypedView needs of its pile: the typed record paths. An interface, so that TypedView
 * does not import Pile (which makes TypedViews). Pile implements it; its methods are the hot
 * typed paths, kept in the one concrete class. Not exported from the package (see FieldAccess).
 */
export interface TypedStore {
  putTyped(id: number, codec: CompiledSchema<unknown>, value: unknown): PilePointer;
  setTyped(ptr: PilePointer, id: number, codec: CompiledSchema<unknown>, value: unknown): void;
  getTyped(ptr: PilePointer, id: number, codec: CompiledSchema<unknown>): unknown;
  typedFieldAccess(id: number, name: string | undefined, read: FieldReader, inline: InlineRead | undefined): FieldAccess;
}
