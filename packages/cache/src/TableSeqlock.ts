import { PileError, type Pile, type PilePointer } from '@pile/core';
import { SEQ_WORD, beginChange, endChange } from './CoreBindings';

/**
 * The seqlock and the version of a table, which let a process that opened the pile read-only read
 * the table while the one writer changes it (docs/concurrency.md, "Cache tables beside a writer").
 *
 * Both live in f64 word 5 of the table's header block (bytes 40..47), which tables made before
 * left zero (no format change): the u32 at byte 40 is the seqlock, odd while the writer makes a
 * change a reader could see half made (a backward shift of the index, a resize or rehash, the
 * recovery of the index); the u32 at byte 44 is the table version, moved on at the start of every
 * resize, rehash or recovery (a reader whose index is older re-reads the chunk list from the cache
 * catalog).
 * A put into a free slot or over the key's own slot, and a tombstone, are single stores that a
 * reader sees whole: they are not marked, so a put costs what it did.
 *
 * The words are read and written through a Uint32Array that starts {@link SEQ_WORD} words before
 * byte 40, so that the seqlock is its element SEQ_WORD, as a segment's change sequence is, and
 * the core's seqlock (beginChange, endChange, clearDeadMark, ReadRetry) serves it unchanged. The
 * elements below SEQ_WORD overlap other header words and are never used.
 */
export const HEADER_SEQ_BYTE = 40;
/** Element of the {@link seqWordsOf} array holding the table version. */
export const VERSION_WORD = SEQ_WORD + 1;

/**
 * The seqlock words of the header block `header` (mapped in place: for a read-only pile a
 * read-only mapping, which this process only loads from).
 * @throws PILE_CORRUPT when the block is not readable
 */
export function seqWordsOf(pile: Pile, header: number, table: string): Uint32Array {
  let b: Buffer;
  try {
    b = pile.rawBuffer(header as PilePointer);
  } catch (err) {
    throw new PileError('PILE_CORRUPT', `cache table '${table}': header block ${header} is not readable: ${(err as Error).message}`);
  }
  return new Uint32Array(b.buffer, b.byteOffset + HEADER_SEQ_BYTE - 4 * SEQ_WORD, SEQ_WORD + 2);
}

/** What a table holds when it has no header (dropped): words nobody else sees. */
export function detachedSeqWords(): Uint32Array {
  return new Uint32Array(SEQ_WORD + 2);
}

/**
 * Runs `change` (a change of the index a reader could see half made) with the seqlock odd;
 * `newIndex` moves the table version on first (a resize or rehash: readers re-read the chunk list).
 */
export function underSeqlock<R>(words: Uint32Array, newIndex: boolean, change: () => R): R {
  const began = beginChange(words);
  if (newIndex) words[VERSION_WORD] = (words[VERSION_WORD]! + 1) >>> 0;
  try {
    return change();
  } finally {
    endChange(words, began);
  }
}
