declare const pointerBrand: unique symbol;

/**
 * A handle to a record in a pile: a safe integer that packs the segment index, the
 * block offset and a tag that is checked against the block's generation on every use.
 * Pointers stay valid across restarts of a mapped pile.
 */
export type PilePointer = number & { readonly [pointerBrand]: 'PilePointer' };

/** The pointer that points at nothing; `setRoot(name, null)` and absent links use it. */
export const NULL_POINTER = 0 as PilePointer;

/** True when `x` has the shape of a pointer (a non-negative safe integer); it says nothing of whether the record exists. */
export function isPilePointer(x: unknown): x is PilePointer {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
}
