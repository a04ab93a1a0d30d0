import type { Allocator } from '../alloc/Allocator';
import {
  GEN_BITS,
  GEN_MASK,
  KIND_FREE,
  MIN_BLOCK_SIZE,
  STATE_DAMAGED,
  STATE_FREE,
  STATE_RESERVED,
  STATE_SHIFT,
  STATE_USED,
  genCheck,
  genOf,
  kindOf,
  sizeCheck,
  stateOf,
} from './BlockFormat';
import { blockDamage } from './Checksum';
import type { Segment } from './Segment';

// How far a block's header may be trusted when its own check words do not hold (a crash between two
// stores of a header, or damage): the sizes and generations that recovery, the allocator's walks and
// compact() go by. None of it is on a put, get or delete path.

/** How many damaged blocks in a row a size may be confirmed across (see confirms). */
const CONFIRM_DEPTH = 8;
/** The bits above the generation of a generation check word (~gen with gen < 2^22): all ones. */
const CHECK_HIGH = 0xffffffff >>> GEN_BITS;

/** `x` has exactly one bit set. */
const oneBit = (x: number): boolean => x !== 0 && (x & (x - 1)) === 0;

/**
 * A header that can be trusted to start a block: a free or reserved one whose size check
 * holds, or a committed one whose checksum holds (or that is being freed: its size check
 * holds). Used to confirm a size that a block's own header can not.
 */
function headerHolds(alloc: Allocator, seg: Segment, off: number): boolean {
  const u32 = seg.u32;
  const h = off >>> 2;
  const size = u32[h]!;
  if (!alloc.saneSize(off, size)) return false;
  const state = stateOf(u32[h + 1]!);
  if (state === STATE_FREE) return u32[h + 2] === sizeCheck(size);
  if (state !== STATE_USED && state !== STATE_RESERVED) return false;
  return u32[h + 2] === sizeCheck(size) || blockDamage(seg.buf, u32, off) === undefined;
}

/**
 * The size of the free or reserved block at `off` that may be merged or carved: its size word
 * when the size check holds, or, for a reserved block being committed, when its checksum does.
 * Otherwise (a crash between two stores of a header, or damage) the smaller of its size word and
 * the size its check word names that ends at a trusted header or at the segment's end, with no
 * trusted header inside; -1 when there is none: the block is damaged and must not be touched.
 */
export function trustedFreeSize(alloc: Allocator, seg: Segment, off: number): number {
  const u32 = seg.u32;
  const h = off >>> 2;
  const size = u32[h]!;
  if (stateOf(u32[h + 1]!) === STATE_DAMAGED) return -1;
  if (alloc.saneSize(off, size)) {
    if (u32[h + 2] === sizeCheck(size)) return size;
    if (stateOf(u32[h + 1]!) !== STATE_FREE && blockDamage(seg.buf, u32, off) === undefined) return size;
  }
  return confirmedSize(alloc, seg, off, size, sizeCheck(u32[h + 2]!));
}

/** Of two candidate sizes of the block at `off`, the smaller one its surroundings confirm (see trustedFreeSize); -1 if neither. */
export function confirmedSize(alloc: Allocator, seg: Segment, off: number, a: number, b: number): number {
  const lo = a < b ? a : b;
  const hi = a < b ? b : a;
  if (confirms(alloc, seg, off, lo)) return lo;
  if (hi !== lo && confirms(alloc, seg, off, hi)) return hi;
  return -1;
}

/**
 * The block at `off` may be taken to end at `off + size`: that is the segment's end or a header
 * that holds, or a header whose own size leads on, through at most CONFIRM_DEPTH more blocks, to
 * one of those (neighbours damaged too); and no header that holds lies inside.
 */
function confirms(alloc: Allocator, seg: Segment, off: number, size: number, depth = 0): boolean {
  if (!alloc.saneSize(off, size)) return false;
  const end = off + size;
  for (let p = off + MIN_BLOCK_SIZE; p + MIN_BLOCK_SIZE <= end; p += 8) if (headerHolds(alloc, seg, p)) return false;
  if (end === alloc.segmentSize || headerHolds(alloc, seg, end)) return true;
  return depth < CONFIRM_DEPTH && confirms(alloc, seg, end, seg.u32[end >>> 2]!, depth + 1);
}

/**
 * The generation of the block at `off` to keep when it is merged or its segment released: never
 * lower than any generation the offset had, and never raised by a word that is not a generation.
 *
 * Word 3 of a free block, and of a reserved one without a record kind, is only ever a generation
 * check (every writer stores it before word1): the larger of word1's generation and the one it
 * names, so that a crash between the two stores (a carve, a merge) or a damaged word1 never lowers it.
 *
 * A block with a record kind (reserved by a commit in progress, used, damaged) has its checksum
 * there from the commit's second store on. Read as a check word, a checksum names a random
 * generation: a writer killed between the checksum and the state store would make the offset's
 * next block take that random generation + 1, far up (wrapping the tag early) or, near 2^22,
 * around to 0. Its word1 carries the generation the block was cut with (a commit never changes
 * it), so that is the one, unless word 3 is the check word of a generation one bit away (the
 * commit's first store done, then one bit of either word damaged): then the larger of the two.
 * A checksum passes that test with a chance of 22 in 2^32, and then raises by one bit only.
 */
export function trustedGen(alloc: Allocator, seg: Segment, off: number): number {
  const u32 = seg.u32;
  const h = off >>> 2;
  const w = u32[h + 1]!;
  const g = genOf(w);
  const w3 = u32[h + 3]!;
  if (w3 === genCheck(g)) return g;
  const c = genCheck(w3) & GEN_MASK;
  const state = stateOf(w);
  if (state === STATE_FREE || (state === STATE_RESERVED && kindOf(w) === KIND_FREE)) return c > g ? c : g;
  if (w3 >>> GEN_BITS !== CHECK_HIGH || !oneBit(c ^ g)) return g;
  if (alloc.saneSize(off, u32[h]!) && blockDamage(seg.buf, u32, off) === undefined) return g;
  return c > g ? c : g;
}

/** Marks the block at `off` damaged (see STATE_DAMAGED): one store of its state bits. Nothing trusts it from then on. */
export function quarantine(seg: Segment, off: number): void {
  const h = (off >>> 2) + 1;
  seg.u32[h] = ((seg.u32[h]! & ~(3 << STATE_SHIFT)) | (STATE_DAMAGED << STATE_SHIFT)) >>> 0;
}
