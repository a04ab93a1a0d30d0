/**
 * Byte layout of segments and blocks, shared by the allocator, the pile and the
 * verifier. `docs/format.md` describes the same layout in prose; change both together.
 */

/** Bumped on any incompatible change of the on-disk layout. */
export const FORMAT_VERSION = 1;

export const SEGMENT_MAGIC = 0x47455350; // "PSEG" little-endian
export const META_MAGIC = 0x4154454d; // "META" little-endian
export const SEGMENT_HEADER_SIZE = 64;
export const BLOCK_HEADER_SIZE = 16;
/** A free block holds two float64 links after its header. */
export const MIN_BLOCK_SIZE = 32;

// Block header words (u32 little-endian): [0] size in bytes, [1] word1, [2] payload length, [3] checksum.
export const GEN_BITS = 22;
export const GEN_MASK = (1 << GEN_BITS) - 1;
export const KIND_SHIFT = 22;
export const KIND_MASK = 0xf;
export const STATE_SHIFT = 26;
export const STATE_MASK = 0x3;
export const FLAG_SHIFT = 28;

export const STATE_FREE = 0;
export const STATE_USED = 1;
export const STATE_RESERVED = 2;

/** The block is the body of a linked record: reached through its head, never enumerated itself. */
export const FLAG_BODY = 1;
/** A raw block whose bytes are checksummed like any record (written once by putRaw, never mutated). */
export const FLAG_SEALED = 2;

export const KIND_FREE = 0;
export const KIND_BYTES = 1;
export const KIND_STRING = 2;
export const KIND_MSGPACK = 3;
export const KIND_TYPED = 4;
export const KIND_LINK = 5;
export const KIND_CATALOG = 6;
export const KIND_JOURNAL = 7;
export const KIND_RAW = 8;
export const KIND_BUFFER = 9;

/** Kind names as reported by `entries()`. */
export type RecordKind = 'bytes' | 'buffer' | 'string' | 'msgpack' | 'typed' | 'raw';

export const KIND_NAMES: Record<number, RecordKind | undefined> = {
  [KIND_BYTES]: 'bytes',
  [KIND_BUFFER]: 'buffer',
  [KIND_STRING]: 'string',
  [KIND_MSGPACK]: 'msgpack',
  [KIND_TYPED]: 'typed',
  [KIND_RAW]: 'raw',
};

/** Raw blocks keep an 8-byte prefix (u32 owner tag, u32 reserved) before the bytes a caller sees. */
export const RAW_PREFIX = 8;
/** Typed records start with the u16 schema id; the codec's bytes follow (it reads them through DataView, unaligned). */
export const TYPED_PREFIX = 2;

export function word1(gen: number, kind: number, state: number, flags: number): number {
  return ((gen & GEN_MASK) | (kind << KIND_SHIFT) | (state << STATE_SHIFT) | (flags << FLAG_SHIFT)) >>> 0;
}
export const genOf = (w: number): number => w & GEN_MASK;
export const kindOf = (w: number): number => (w >>> KIND_SHIFT) & KIND_MASK;
export const stateOf = (w: number): number => (w >>> STATE_SHIFT) & STATE_MASK;
export const flagsOf = (w: number): number => w >>> FLAG_SHIFT;
/** word1 as covered by the checksum: everything but the state bits, which change on commit and free. */
export const checkedWord1 = (w: number): number => (w & ~(STATE_MASK << STATE_SHIFT)) >>> 0;

export const align8 = (n: number): number => (n + 7) & ~7;

/** Block size needed for a payload of `length` bytes. */
export function blockSizeFor(length: number): number {
  const s = align8(BLOCK_HEADER_SIZE + length);
  return s < MIN_BLOCK_SIZE ? MIN_BLOCK_SIZE : s;
}
