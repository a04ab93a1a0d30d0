import { PileError } from '@pile/core';
import type { CacheKey } from './KeyCodec';
import type { PileMemory } from './PileMemory';
import type { TableStats } from './TableTypes';

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
 * Writes an entry's fixed fields at byte 0 of `buf` (`view` over the same bytes); the caller
 * writes the key at {@link E_KEY} and the value at `E_KEY + align8(keyLength)`.
 */
export function writeEntryHead(
  buf: Buffer,
  view: DataView,
  seq: number,
  created: number,
  expiresAt: number,
  priority: number,
  hash: number,
  keyType: number,
  valueKind: number,
  keyLength: number,
  valueLength: number,
): void {
  view.setFloat64(E_SEQ, seq, true);
  view.setFloat64(E_CREATED, created, true);
  view.setFloat64(E_EXPIRES, expiresAt, true);
  view.setInt32(E_PRIORITY, priority, true);
  view.setUint32(E_HASH, hash, true);
  buf[E_KEY_TYPE] = keyType;
  buf[E_VALUE_KIND] = valueKind;
  view.setUint16(34, 0, true);
  view.setUint32(E_KEY_LEN, keyLength, true);
  view.setUint32(E_VALUE_LEN, valueLength, true);
  view.setUint32(44, 0, true);
}

/**
 * The stored key's byte length of the entry `mem` located, checked against the entry's record:
 * a damaged length word must not make a read return a neighbour's bytes.
 * @throws PILE_CORRUPT
 */
export function keyLength(mem: PileMemory): number {
  const klen = mem.view.getUint32(mem.off + E_KEY_LEN, true);
  if (klen > mem.len - E_KEY) throw damagedEntry(mem, `key length ${klen}`);
  return klen;
}

/** Where the value of the located entry starts, relative to the entry (key length checked). @throws PILE_CORRUPT */
export function valueOffset(mem: PileMemory): number {
  return E_KEY + align8(keyLength(mem));
}

/** The value's byte length of the located entry, checked against the entry's record. @throws PILE_CORRUPT */
export function valueLength(mem: PileMemory, voff: number): number {
  const vlen = mem.view.getUint32(mem.off + E_VALUE_LEN, true);
  if (vlen > mem.len - voff) throw damagedEntry(mem, `value length ${vlen}`);
  return vlen;
}

function damagedEntry(mem: PileMemory, what: string): PileError {
  return new PileError('PILE_CORRUPT', `cache entry at segment offset ${mem.off}: ${what} exceeds the entry's ${mem.len} bytes`);
}

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
export const H_VERSION = 0,
  H_COUNT = 1,
  H_TOMBS = 2,
  H_SEQ = 3;
/** Live entries that carry an expiry: when 0, a memory-pressure sweep is skipped. */
export const H_EXPIRING = 4;
export const H_STATS = 8;
export const STAT_NAMES = [
  'hits',
  'misses',
  'inserts',
  'replaces',
  'overwrites',
  'collisions',
  'removes',
  'expired',
  'evicted',
  'grows',
  'shrinks',
] as const;
/** Every counter of {@link STAT_NAMES} at 0. */
export function zeroStats(): TableStats {
  const s = {} as TableStats;
  for (const n of STAT_NAMES) s[n] = 0;
  return s;
}

/** Adds the counters of header `h` to `s` (a table's own, or the sum over a cache's tables). */
export function addStats(s: TableStats, h: Float64Array): void {
  STAT_NAMES.forEach((n, i) => {
    s[n] += h[H_STATS + i]!;
  });
}

/** Header word of each statistic, in STAT_NAMES order. */
export const S_HITS = H_STATS,
  S_MISSES = H_STATS + 1,
  S_INSERTS = H_STATS + 2,
  S_REPLACES = H_STATS + 3;
export const S_OVERWRITES = H_STATS + 4,
  S_COLLISIONS = H_STATS + 5,
  S_REMOVES = H_STATS + 6,
  S_EXPIRED = H_STATS + 7;
export const S_EVICTED = H_STATS + 8,
  S_GROWS = H_STATS + 9,
  S_SHRINKS = H_STATS + 10;
export const HEADER_WORDS = 32;
export const HEADER_VERSION = 1;

/** PILE_TOO_LARGE for an entry whose value or byte key does not fit in one segment of `room` bytes. */
export function entryTooLarge(key: CacheKey, vlen: number, room: number): PileError {
  return new PileError(
    'PILE_TOO_LARGE',
    `a cache entry with a ${key instanceof Uint8Array ? `${key.length}-byte key and ` : ''}${vlen}-byte value does not fit in a segment of ${room} bytes (segmentSize)`,
  );
}
