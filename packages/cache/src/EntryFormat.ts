/**
 * Byte layout of a cache entry: one sealed raw record per entry (pile.putRaw), little endian,
 * offsets from the start of the record's bytes (8-aligned). docs/cache.md describes the same.
 *
 * ```
 *  0 f64 seq         table-wide, increasing: a newer record of a key has a larger seq
 *  8 f64 createdAt   ms since the epoch (by the cache clock); rejuvenate writes a new record
 * 16 f64 expiresAt   ms; 0 = never
 * 24 i32 priority
 * 28 u32 hash        of the key (KeyCodec), so a rehash or recovery never re-reads the key
 * 32 u8  key type    1 string (WTF-8), 2 number (f64), 3 bigint (hex text), 4 bytes
 * 33 u8  value kind  1 string, 2 Uint8Array, 3 Buffer, 4 MessagePack, 5 typed (schema codec)
 * 34 u16 0
 * 36 u32 key length
 * 40 u32 value length
 * 44 u32 0
 * 48     key bytes, zero padding to 8, value bytes
 * ```
 */
export const E_SEQ = 0;
export const E_CREATED = 8;
export const E_EXPIRES = 16;
export const E_PRIORITY = 24;
export const E_HASH = 28;
export const E_KEY_TYPE = 32;
export const E_VALUE_KIND = 33;
export const E_KEY_LEN = 36;
export const E_VALUE_LEN = 40;
export const E_KEY = 48;

export const align8 = (n: number): number => (n + 7) & ~7;

/**
 * Owner tags of the cache's raw blocks: 0xCA in the top byte, the block kind in the next
 * four bits, the table id (< 2^20) in the low twenty. Recovery finds the cache's blocks by them.
 */
export const TAG_MARK = 0xca;
export const TAG_ENTRY = 1;
export const TAG_CHUNK = 2;
export const TAG_HEADER = 3;
export const MAX_TABLE_ID = (1 << 20) - 1;

export function tagOf(kind: number, tableId: number): number {
  return ((TAG_MARK << 24) | (kind << 20) | tableId) >>> 0;
}

/**
 * A table's header: one mutable raw block of f64 counters, updated in place on every operation
 * (no journal): count, tombstones, next seq and the statistics.
 */
export const H_VERSION = 0;
export const H_COUNT = 1;
export const H_TOMBS = 2;
export const H_SEQ = 3;
/** Live entries that carry an expiry: when 0, a memory-pressure sweep is skipped. */
export const H_EXPIRING = 4;
export const H_STATS = 8;
export const STAT_NAMES = ['hits', 'misses', 'inserts', 'replaces', 'overwrites', 'collisions', 'removes', 'expired', 'evicted', 'grows', 'shrinks'] as const;
export const HEADER_WORDS = 32;
export const HEADER_VERSION = 1;
