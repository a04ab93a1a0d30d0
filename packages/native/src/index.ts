export { native } from './NativeBinding';
export type { Futex, MappedRange, Mapping, MutexResult, NativeBinding, OfdHolder, SharedMapping, SharedMutex } from './NativeBinding';
