import * as core from '@pile/core';

// @pile/core's CommonJS index re-exports through getters, and TypeScript first assigns each name
// `void 0`, so defining the getters turns its exports object into a dictionary: every
// `core.name` inside a hot function is then a generic property load plus a getter call, not an
// inlined field load (about 5 % of a cache put's instructions; measure with
// benchmarks/compare/count-instructions.sh). The functions and objects the put and get paths use
// are read from it once, here, into plain data properties of this module.

/** @internal */
export const fmix32 = core.fmix32;
/** @internal */
export const encodeGuard = core.encodeGuard;
/** @internal */
export const illFormedString = core.illFormedString;
/** @internal */
export const genericValueFault = core.genericValueFault;
/** @internal */
export const beginChange = core.beginChange;
/** @internal */
export const endChange = core.endChange;
/** @internal */
export const RAW_PREFIX = core.RAW_PREFIX;
/** @internal */
export const SEQ_WORD = core.SEQ_WORD;
