import { PileError, SEQ_WORD, clearDeadMark, isPileError, type Pile, type PilePointer } from '@pile/core';

/**
 * The seqlock of a graph or a list, which lets a process that opened the pile read-only read it
 * while the one writer (another process) changes it (docs/concurrency.md, "Graphs and lists beside
 * a writer").
 *
 * It lives in a raw block of its own (tag 'PGSY', 32 bytes), named by the root
 * `graph:<name>:sync` or `list:<name>:sync`, so that structures made before need no layout change:
 * a writing open makes the block the first time it opens the structure. Its u32 element
 * {@link SEQ_WORD} (byte 20, the place of a segment's change sequence, so that the core's
 * beginChange / endChange / clearDeadMark / ReadRetry serve it unchanged) is odd while a write
 * operation of the structure is between its first and its last change of a raw block (begin/end of
 * the intent log, and repairs), even otherwise.
 */
export const TAG_SYNC = 0x59534750; // 'PGSY'
const SYNC_BYTES = 32;

/**
 * The seqlock words named by root `root` (mapped in place), made when missing by a writable open;
 * undefined for a read-only open of a structure no writer of this version opened yet.
 * Called by a writable open once it is the structure's one writer (after claimStructures): a mark
 * a writer that died left odd is moved on to even here, its repair being the structure's recovery.
 * @throws PILE_CORRUPT when the root names something else; PILE_OUT_OF_SPACE, PILE_CLOSED
 */
export function openSync(pile: Pile, root: string): Uint32Array | undefined {
  let ptr = pile.getRoot(root);
  if (ptr === undefined) {
    if (pile.readonly) return undefined;
    ptr = pile.allocRaw(SYNC_BYTES, TAG_SYNC);
    pile.setRoot(root, ptr);
  }
  let b: Buffer;
  try {
    b = pile.rawBuffer(ptr as PilePointer);
  } catch (err) {
    if (!isPileError(err, 'PILE_INVALID_POINTER') && !isPileError(err, 'PILE_STALE_POINTER')) throw err;
    throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${ptr}) does not name a sync block: ${err.message}`);
  }
  if (b.length !== SYNC_BYTES || pile.rawTag(ptr as PilePointer) !== TAG_SYNC) {
    throw new PileError('PILE_CORRUPT', `root '${root}' (pointer ${ptr}) does not name a sync block`);
  }
  const words = new Uint32Array(b.buffer, b.byteOffset, SEQ_WORD + 1);
  if (!pile.readonly) clearDeadMark(words);
  return words;
}
