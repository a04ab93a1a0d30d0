export { openPile, Pile } from './Pile';
export type { PileOptions } from './PileOptions';
export type { PileStats, PileEntry, VerifyReport, CorruptRecord, RecoveryReport } from './Pile';
export { PileError, isPileError } from './PileError';
export type { PileErrorCode } from './PileError';
export { NULL_POINTER, isPilePointer } from './records/PilePointer';
export type { PilePointer } from './records/PilePointer';
export { TypedView } from './schema/TypedView';
export type { SchemaOptions } from './schema/TypedView';
export type { RecordKind } from './storage/BlockFormat';
export { compileDescriptor, compileSchema, isCompatibleEvolution } from './schema/SchemaCompiler';
export { literalOf } from './schema/SchemaLayout';
export type { CompiledSchema, SchemaDescriptor } from './schema/SchemaCompiler';
export type { InlineRead } from './schema/SchemaCodegen';
export { encodeGuard, reentrantError } from './records/EncodeGuard';
export { genericValueFault, illFormedString, refuseFunction, unstorableValue } from './records/ValueCheck';
export { RAW_PREFIX } from './storage/BlockFormat';
export { fmix32 } from './storage/Checksum';
// For packages that change blocks in place that readers in other processes read without a lock
// (@pile/cache's table header): the seqlock of the segments' change sequence (docs/concurrency.md).
export { SEQ_WORD, beginChange, endChange, clearDeadMark, ReadRetry } from './concurrency/ChangeSeq';
export { inReadSession, type SessionHolder } from './concurrency/ReaderTable';
