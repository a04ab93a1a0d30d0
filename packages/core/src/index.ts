export { openPile, Pile } from './Pile';
export type { PileOptions } from './PileOptions';
export type { PileStats, PileEntry, VerifyReport, CorruptRecord, RecoveryReport } from './Pile';
export { PileError, isPileError } from './PileError';
export type { PileErrorCode } from './PileError';
export { NULL_POINTER, isPilePointer } from './PilePointer';
export type { PilePointer } from './PilePointer';
export { TypedView } from './TypedView';
export type { SchemaOptions } from './TypedView';
export type { RecordKind } from './BlockFormat';
export { compileDescriptor, compileSchema, isCompatibleEvolution } from './SchemaCompiler';
export type { CompiledSchema, SchemaDescriptor } from './SchemaCompiler';
export type { InlineRead } from './SchemaCodegen';
export { encodeGuard, reentrantError } from './EncodeGuard';
export { genericValueFault, illFormedString, refuseFunction, unstorableValue } from './ValueCheck';
export { RAW_PREFIX } from './BlockFormat';
export { fmix32 } from './Checksum';
// For packages that change blocks in place that readers in other processes read without a lock
// (@pile/cache's table header): the seqlock of the segments' change sequence (docs/concurrency.md).
export { SEQ_WORD, beginChange, endChange, clearDeadMark, ReadRetry } from './ChangeSeq';
export { inReadSession, type SessionHolder } from './ReaderTable';
