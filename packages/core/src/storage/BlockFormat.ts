/**
 * Byte layout of segments and blocks, shared by the allocator, the pile and the
 * verifier. `docs/format.md` describes the same layout in prose; change both together.
 *
 * Constants are declared locally and exported by name at the end: compiled to CommonJS, a
 * reference to an `export const` inside this module becomes a property load from `exports`,
 * which makes the helpers below (word1, blockSizeFor ...) too large for TurboFan to inline into
 * the put path.
 */

/**
 * Bumped on any incompatible change of the on-disk layout. 3 added the checkpoint and the dirty
 * marks to pile.meta: a build of format 2 would neither mark nor checkpoint, so it must not write a
 * pile that this build recovers from a checkpoint. A pile of format 2 has the same blocks and no
 * checkpoint: it is read as it is, and its meta file says 3 from its first writable open on. 4 made
 * the free lists and counters per segment (segment rows, saved by the checkpoint): a pile of format 2
 * or 3 opens by one scan of every segment, which makes them, and says 4 from then on.
 */
const FORMAT_VERSION = 4;
/** The oldest format this build reads (see FORMAT_VERSION). */
const OLDEST_FORMAT_VERSION = 2;

const SEGMENT_MAGIC = 0x47455350; // "PSEG" little-endian
const META_MAGIC = 0x4154454d; // "META" little-endian
const SEGMENT_HEADER_SIZE = 64;
const BLOCK_HEADER_SIZE = 16;
/** A free block holds two float64 links after its header. */
const MIN_BLOCK_SIZE = 32;

// Block header words (u32 little-endian): [0] size in bytes, [1] word1, [2] payload length, [3] checksum.
const GEN_BITS = 22;
const GEN_MASK = (1 << GEN_BITS) - 1;
const KIND_SHIFT = 22;
const KIND_MASK = 0xf;
const STATE_SHIFT = 26;
const STATE_MASK = 0x3;
const FLAG_SHIFT = 28;

const STATE_FREE = 0;
const STATE_USED = 1;
const STATE_RESERVED = 2;
/**
 * A block recovery found damaged whose size nothing confirms: it is neither freed nor read, and
 * every walk of its segment stops there, so that no live record after it is ever taken for free space.
 */
const STATE_DAMAGED = 3;

/** The block is the body of a linked record: reached through its head, never enumerated itself. */
const FLAG_BODY = 1;
/** A raw block whose bytes are checksummed like any record (written once by putRaw, never mutated). */
const FLAG_SEALED = 2;

const KIND_FREE = 0;
const KIND_BYTES = 1;
const KIND_STRING = 2;
const KIND_MSGPACK = 3;
const KIND_TYPED = 4;
const KIND_LINK = 5;
const KIND_CATALOG = 6;
const KIND_JOURNAL = 7;
const KIND_RAW = 8;
const KIND_BUFFER = 9;

/** Kind names as reported by `entries()`. */
export type RecordKind = 'bytes' | 'buffer' | 'string' | 'msgpack' | 'typed' | 'raw';

const KIND_NAMES: Record<number, RecordKind | undefined> = {
  [KIND_BYTES]: 'bytes',
  [KIND_BUFFER]: 'buffer',
  [KIND_STRING]: 'string',
  [KIND_MSGPACK]: 'msgpack',
  [KIND_TYPED]: 'typed',
  [KIND_RAW]: 'raw',
};

/** Raw blocks keep an 8-byte prefix (u32 owner tag, u32 reserved) before the bytes a caller sees. */
const RAW_PREFIX = 8;
/** Typed records start with the u16 schema id; the codec's bytes follow (it reads them through DataView, unaligned). */
const TYPED_PREFIX = 2;

export function word1(gen: number, kind: number, state: number, flags: number): number {
  return ((gen & GEN_MASK) | (kind << KIND_SHIFT) | (state << STATE_SHIFT) | (flags << FLAG_SHIFT)) >>> 0;
}
const genOf = (w: number): number => w & GEN_MASK;
const kindOf = (w: number): number => (w >>> KIND_SHIFT) & KIND_MASK;
const stateOf = (w: number): number => (w >>> STATE_SHIFT) & STATE_MASK;
const flagsOf = (w: number): number => w >>> FLAG_SHIFT;
/** word1 as covered by the checksum: everything but the state bits, which change on commit and free. */
const checkedWord1 = (w: number): number => (w & ~(STATE_MASK << STATE_SHIFT)) >>> 0;

/**
 * Check words of a free or reserved (allocated, not yet committed) block, which has no checksum:
 * word2 holds the complement of the size and word3 the complement of the generation. A damaged
 * size word would make a put carve, or a free merge, over the blocks after it; a damaged
 * generation would give a later block a deleted record's tag. Committing a record replaces both
 * words with its length and checksum.
 */
const sizeCheck = (size: number): number => ~size >>> 0;
const genCheck = (gen: number): number => ~gen >>> 0;

const align8 = (n: number): number => (n + 7) & ~7;

/** Block size needed for a payload of `length` bytes. */
export function blockSizeFor(length: number): number {
  // align8 works in 32 bits: a length near 2^31 would wrap to a small or negative size and pass
  // the allocator's too-large check. No segment holds 2^30 bytes of payload, so any exact size will do.
  if (length > 0x3fffffe0) return BLOCK_HEADER_SIZE + length;
  const s = align8(BLOCK_HEADER_SIZE + length);
  return s < MIN_BLOCK_SIZE ? MIN_BLOCK_SIZE : s;
}

export {
  FORMAT_VERSION,
  OLDEST_FORMAT_VERSION,
  SEGMENT_MAGIC,
  META_MAGIC,
  SEGMENT_HEADER_SIZE,
  BLOCK_HEADER_SIZE,
  MIN_BLOCK_SIZE,
  GEN_BITS,
  GEN_MASK,
  KIND_SHIFT,
  KIND_MASK,
  STATE_SHIFT,
  STATE_MASK,
  FLAG_SHIFT,
  STATE_FREE,
  STATE_USED,
  STATE_RESERVED,
  STATE_DAMAGED,
  FLAG_BODY,
  FLAG_SEALED,
  KIND_FREE,
  KIND_BYTES,
  KIND_STRING,
  KIND_MSGPACK,
  KIND_TYPED,
  KIND_LINK,
  KIND_CATALOG,
  KIND_JOURNAL,
  KIND_RAW,
  KIND_BUFFER,
  KIND_NAMES,
  RAW_PREFIX,
  TYPED_PREFIX,
  genOf,
  kindOf,
  stateOf,
  flagsOf,
  checkedWord1,
  sizeCheck,
  genCheck,
  align8,
};
