import { isPileError, type Pile, type PilePointer } from '@pile/core';

/** pile.has for a word read from a raw block that a crash may have left holding anything. */
export function safeHas(pile: Pile, ptr: number): boolean {
  try {
    return pile.has(ptr as PilePointer);
  } catch (err) {
    if (isPileError(err, 'PILE_INVALID_POINTER')) return false;
    throw err;
  }
}

/** pile.delete that ignores a word that is no pointer at all (recovery frees what it can). */
export function safeDelete(pile: Pile, ptr: number): void {
  try {
    pile.delete(ptr as PilePointer);
  } catch (err) {
    if (!isPileError(err, 'PILE_INVALID_POINTER')) throw err;
  }
}
