import { PileError, type Pile, type PilePointer } from '@pile/core';
import { H_VERSION, HEADER_VERSION, HEADER_WORDS, TAG_CHUNK, TAG_HEADER, tagOf } from './EntryFormat';
import { SLOT_BYTES, SlotIndex, chunkSlotsFor } from './SlotIndex';
import type { TableMeta, TableState } from './TableState';

// The blocks a table owns in the pile, from creation to drop: one header block, the chunks of its
// index and one record per entry (docs/cache.md, "Layout").

/**
 * The header block and the index of a new table `id` of `capacity` slots (nothing stays
 * allocated when this throws).
 * @throws PILE_OUT_OF_SPACE, PILE_TOO_LARGE
 */
export function allocTableBlocks(pile: Pile, id: number, capacity: number): { header: PilePointer; idx: SlotIndex } {
  const header = pile.allocRaw(HEADER_WORDS * 8, tagOf(TAG_HEADER, id));
  try {
    return { header, idx: SlotIndex.create(pile, capacity, chunkSlotsFor(pile.segmentSize), tagOf(TAG_CHUNK, id)) };
  } catch (err) {
    pile.delete(header);
    throw err;
  }
}

/**
 * The header block of `meta` as f64 words, mapped in place (on the heap for a read-only pile, whose
 * mapping can not be written: this process's hits and misses are counted there).
 * @throws PILE_CORRUPT when the block is not readable or not a header's size
 */
export function headerWords(pile: Pile, meta: TableMeta, readonly: boolean): Float64Array {
  let b: Buffer;
  try {
    b = pile.rawBuffer(meta.header as PilePointer);
  } catch (err) {
    throw new PileError(
      'PILE_CORRUPT',
      `cache table '${meta.name}': header block ${meta.header} is not readable: ${(err as Error).message}`,
    );
  }
  if (b.length !== HEADER_WORDS * 8)
    throw new PileError('PILE_CORRUPT', `cache table '${meta.name}': header block ${meta.header} holds ${b.length} bytes`);
  const h = new Float64Array(b.buffer, b.byteOffset, HEADER_WORDS);
  return readonly ? Float64Array.from(h) : h;
}

/**
 * {@link headerWords} of an existing table, its format version checked.
 * @throws PILE_CORRUPT, PILE_FORMAT_VERSION when the header was written by a newer format
 */
export function existingHeader(pile: Pile, meta: TableMeta, readonly: boolean): Float64Array {
  const h = headerWords(pile, meta, readonly);
  if (h[H_VERSION] !== HEADER_VERSION) {
    throw new PileError(
      h[H_VERSION]! > HEADER_VERSION ? 'PILE_FORMAT_VERSION' : 'PILE_CORRUPT',
      `cache table '${meta.name}': header version ${h[H_VERSION]}`,
    );
  }
  return h;
}

/** Pile bytes of the table: index, header and the payload of each entry record. O(capacity). */
export function tableBytes(t: TableState): number {
  const idx = t.idx;
  const pile = t.host.pile;
  let n = idx.capacity * SLOT_BYTES + HEADER_WORDS * 8;
  for (let i = 0; i < idx.capacity; i++) if (idx.ptr(i) > 0) n += pile.sizeOf(idx.ptr(i) as PilePointer);
  return n;
}

/** Frees every entry, the index and the header of a dropped table (the catalog no longer names it). */
export function freeTableBlocks(t: TableState): void {
  const pile = t.host.pile;
  const idx = t.idx;
  for (let i = 0; i < idx.capacity; i++) if (idx.ptr(i) > 0) pile.delete(idx.ptr(i) as PilePointer);
  idx.free(pile);
  pile.delete(t.meta.header as PilePointer);
}
