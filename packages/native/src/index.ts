export { native } from './NativeBinding';
export type { Mapping, NativeBinding } from './NativeBinding';
