import { PileError } from '../PileError';

/**
 * How deep this thread is inside the encoding of a value: measuring or encoding one runs the
 * caller's code (getters, proxies, toJSON, zod transforms and refinements). Such code may read a
 * pile or cache, but a write from it would run in the middle of the outer write: msgpackr's
 * packing state is one per thread, and the outer write holds a block, a tail position or a
 * scratch entry that the inner one would reuse. Every write of @pile/core and @pile/cache checks
 * `depth` and refuses with {@link reentrantError} while it is not 0. Exported for packages built
 * on the pile (@pile/cache keeps the same rule), not for applications.
 */
export const encodeGuard = { depth: 0 };

/** The error of a write made from code that runs while a value is being encoded (see {@link encodeGuard}). */
export function reentrantError(): PileError {
  return new PileError(
    'PILE_REENTRANT',
    'a write to a pile or cache from code that runs while a value is being stored (a getter, toJSON, a zod transform or refinement); read there, write after the outer call returns',
  );
}
