import { crc32 } from 'node:zlib';
import {
  BLOCK_HEADER_SIZE,
  FLAG_SEALED,
  KIND_BUFFER,
  KIND_RAW,
  MIN_BLOCK_SIZE,
  STATE_SHIFT,
  blockSizeFor,
  checkedWord1,
  flagsOf,
  kindOf,
} from './BlockFormat';

/**
 * Record checksum. Small payloads (the common case) use Murmur3-32 over aligned words in
 * JavaScript: the native crc32 costs ~160 ns per call on this machine in call overhead
 * alone, ten times the whole Murmur pass over a 56-byte record. From 1 KiB up, the
 * native CRC32 wins and is used. The choice depends only on the length, which the
 * header stores, so a reader always knows which one to recompute.
 */
export const NATIVE_CHECKSUM_FROM = 1024;

/**
 * Murmur3's 32-bit finaliser: every input bit reaches every output bit. The checksums end with it,
 * and `@pile/cache` spreads its key hashes with it.
 */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Checksum of the block whose header starts at byte `off` of the segment: covers the size
 * word, word1 without state bits, the length and `length` payload bytes.
 * `u32` and `buf` view the same segment memory; `off` is 8-aligned.
 */
export function blockChecksum(buf: Buffer, u32: Uint32Array, off: number, size: number, w1: number, length: number): number {
  const seed = Math.imul(size ^ 0x9747b28c, 0x85ebca6b) ^ Math.imul(w1, 0xc2b2ae35) ^ length;
  const start = off + 16;
  if (length >= NATIVE_CHECKSUM_FROM) {
    return crc32(buf.subarray(start, start + length), seed >>> 0) >>> 0;
  }
  let h = seed | 0;
  let w = start >> 2;
  const wEnd = w + (length >> 2);
  for (; w < wEnd; w++) {
    let k = Math.imul(u32[w]!, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const tail = length & 3;
  if (tail !== 0) {
    const b = wEnd << 2;
    let k = buf[b]!;
    if (tail > 1) k |= buf[b + 1]! << 8;
    if (tail > 2) k |= buf[b + 2]! << 16;
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
  }
  // fmix32(h ^ length) written out: it keeps this function's bytecode over TurboFan's inlining
  // limit (460 bytes), as it was before fmix32 was shared. Small enough to inline, it was
  // inlined into the typed put in some compiles, whose budget (920 bytes in all) then no longer
  // covered the generated encode: the typed put ran its encode as a call (docs/benchmarks.md).
  h ^= length;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Checksum of a block header alone (size, word1 without state bits, length): what a mutable raw
 * block stores, whose bytes change in place and so can not be covered. It makes a damaged kind
 * or flag bit visible: a sealed raw or Buffer block turned into a mutable raw one by one flipped
 * bit no longer passes (its stored checksum covers its payload, not its header alone).
 */
export function headerChecksum(size: number, w1: number, length: number): number {
  return fmix32(Math.imul(size ^ 0x3c6ef372, 0x85ebca6b) ^ Math.imul(w1 ^ 0x5bd1e995, 0xc2b2ae35) ^ length);
}

/** Why the committed block at `off` (size already known sane) is damaged, or undefined when its kind, length and checksum hold. */
export function blockDamage(buf: Buffer, u32: Uint32Array, off: number): string | undefined {
  const h = off >>> 2;
  const size = u32[h]!;
  const w = u32[h + 1]!;
  const length = u32[h + 2]!;
  const kind = kindOf(w);
  if (kind === 0 || kind > KIND_BUFFER) return `unknown record kind ${kind}`;
  if (length > size - BLOCK_HEADER_SIZE) return `payload length ${length} exceeds block size ${size}`;
  if (kind === KIND_RAW && (flagsOf(w) & FLAG_SEALED) === 0) {
    return headerChecksum(size, checkedWord1(w), length) === u32[h + 3] ? undefined : 'header checksum mismatch';
  }
  return blockChecksum(buf, u32, off, size, checkedWord1(w), length) === u32[h + 3] ? undefined : 'checksum mismatch';
}

/** Payloads up to this length are tried by headerBitRepair (each try checksums the payload again). */
const REPAIR_LIMIT = 1 << 16;

/**
 * For a committed block whose checksum fails: the size and word1 it had, when that is certain
 * enough to free it by them; undefined otherwise. Tried in order: one bit of the size, word1 or
 * length flipped back makes the checksum hold (header damage, payloads up to 64 KiB); the computed
 * and stored checksums differ in one bit (the checksum word was hit); the header is as a put writes
 * it (its size is the one its length needs), so the damage is in the payload.
 * `limit` is the segment size.
 */
export function headerBitRepair(buf: Buffer, u32: Uint32Array, off: number, limit: number): { size: number; w1: number } | undefined {
  const h = off >>> 2;
  const stored = u32[h + 3]!;
  const words = [u32[h]!, u32[h + 1]!, u32[h + 2]!] as const;
  const sumOf = (size: number, w: number, length: number): number | undefined => {
    const kind = kindOf(w);
    if (size < MIN_BLOCK_SIZE || (size & 7) !== 0 || off + size > limit || length > size - BLOCK_HEADER_SIZE) return undefined;
    if (kind === 0 || kind > KIND_BUFFER) return undefined;
    return kind === KIND_RAW && (flagsOf(w) & FLAG_SEALED) === 0
      ? headerChecksum(size, checkedWord1(w), length)
      : blockChecksum(buf, u32, off, size, checkedWord1(w), length);
  };
  if (words[2] <= REPAIR_LIMIT) {
    for (let word = 0; word < 3; word++) {
      for (let bit = 0; bit < 32; bit++) {
        if (word === 1 && (bit === STATE_SHIFT || bit === STATE_SHIFT + 1)) continue; // not covered
        const t: [number, number, number] = [words[0], words[1], words[2]];
        t[word] = (t[word]! ^ (1 << bit)) >>> 0;
        if (t[2] > REPAIR_LIMIT) continue;
        if (sumOf(t[0], t[1], t[2]) === stored) return { size: t[0], w1: t[1] };
      }
    }
  }
  const sum = words[2] <= REPAIR_LIMIT ? sumOf(words[0], words[1], words[2]) : undefined;
  if (sum !== undefined) {
    const diff = (sum ^ stored) >>> 0;
    if ((diff & (diff - 1)) === 0) return { size: words[0], w1: words[1] };
  }
  if (kindOf(words[1]) !== 0 && kindOf(words[1]) <= KIND_BUFFER && words[0] === blockSizeFor(words[2]) && off + words[0] <= limit)
    return { size: words[0], w1: words[1] };
  return undefined;
}
