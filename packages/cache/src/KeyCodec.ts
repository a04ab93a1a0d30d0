import { PileError } from '@pile/core';
import { fmix32 } from './CoreBindings';

/** A key of a cache table. Equal keys of different types are different keys. */
export type CacheKey = string | number | bigint | Uint8Array;

export const KEY_STRING = 1;
export const KEY_NUMBER = 2;
export const KEY_BIGINT = 3;
export const KEY_BYTES = 4;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
// Each hash ends with murmur3's finaliser (fmix32): it spreads FNV's weak low bits over the whole
// word, as the index takes the high bits.

function hashBytes(type: number, b: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET ^ type;
  for (let i = start; i < end; i++) h = Math.imul(h ^ b[i]!, FNV_PRIME);
  return fmix32(h);
}

// Strings are stored as WTF-8 (UTF-8 that also encodes lone surrogates as three bytes), so that
// two different JS strings never share key bytes: plain UTF-8 would map every lone surrogate to U+FFFD.

export function wtf8Write(s: string, b: Uint8Array, off: number): number {
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) b[off++] = c;
    else if (c < 0x800) {
      b[off++] = 0xc0 | (c >>> 6);
      b[off++] = 0x80 | (c & 0x3f);
    } else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
      b[off++] = 0xf0 | (c >>> 18);
      b[off++] = 0x80 | ((c >>> 12) & 0x3f);
      b[off++] = 0x80 | ((c >>> 6) & 0x3f);
      b[off++] = 0x80 | (c & 0x3f);
    } else {
      b[off++] = 0xe0 | (c >>> 12);
      b[off++] = 0x80 | ((c >>> 6) & 0x3f);
      b[off++] = 0x80 | (c & 0x3f);
    }
  }
  return off;
}

export function wtf8Read(b: Uint8Array, start: number, end: number): string {
  const units: number[] = [];
  let out = '';
  let i = start;
  while (i < end) {
    const c = b[i]!;
    if (c < 0x80) {
      units.push(c);
      i += 1;
    } else if (c < 0xe0) {
      units.push(((c & 0x1f) << 6) | (b[i + 1]! & 0x3f));
      i += 2;
    } else if (c < 0xf0) {
      units.push(((c & 0x0f) << 12) | ((b[i + 1]! & 0x3f) << 6) | (b[i + 2]! & 0x3f));
      i += 3;
    } else {
      const cp = (((c & 0x07) << 18) | ((b[i + 1]! & 0x3f) << 12) | ((b[i + 2]! & 0x3f) << 6) | (b[i + 3]! & 0x3f)) - 0x10000;
      units.push(0xd800 + (cp >>> 10), 0xdc00 + (cp & 0x3ff));
      i += 4;
    }
    if (units.length >= 4096) {
      out += String.fromCharCode(...units);
      units.length = 0;
    }
  }
  return out + String.fromCharCode(...units);
}

/** True when the WTF-8 bytes `b[off..off+len)` spell exactly `s`; compares in place, decodes nothing. */
export function stringEquals(s: string, b: Uint8Array, off: number, len: number): boolean {
  const end = off + len;
  let j = off;
  const n = s.length;
  if (len < n || len > n * 3) return false;
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      if (j >= end || b[j] !== c) return false;
      j++;
    } else if (c < 0x800) {
      if (j + 2 > end || b[j] !== (0xc0 | (c >>> 6)) || b[j + 1] !== (0x80 | (c & 0x3f))) return false;
      j += 2;
    } else if (c >= 0xd800 && c < 0xdc00 && i + 1 < n && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
      if (
        j + 4 > end ||
        b[j] !== (0xf0 | (c >>> 18)) ||
        b[j + 1] !== (0x80 | ((c >>> 12) & 0x3f)) ||
        b[j + 2] !== (0x80 | ((c >>> 6) & 0x3f)) ||
        b[j + 3] !== (0x80 | (c & 0x3f))
      )
        return false;
      j += 4;
    } else {
      if (j + 3 > end || b[j] !== (0xe0 | (c >>> 12)) || b[j + 1] !== (0x80 | ((c >>> 6) & 0x3f)) || b[j + 2] !== (0x80 | (c & 0x3f)))
        return false;
      j += 3;
    }
  }
  return j === end;
}

/**
 * Turns a key into its type, hash and (except for strings, which are compared in place) its bytes.
 * One instance per cache: it is scratch state for the call in progress, not stored anywhere.
 */
export class KeyCodec {
  type = 0;
  hash = 0;
  /** The string key, when type is KEY_STRING. */
  str = '';
  /** WTF-8 length of `str`, set with it. */
  private strLength = 0;
  /** Key bytes for the other types (valid up to `len`). */
  bytes: Buffer = Buffer.alloc(64);
  len = 0;
  /** Counts prepare() calls: a put sees whether its value's code read the cache (and so replaced the prepared key). */
  epoch = 0;
  private readonly f64 = new Float64Array(1);
  private readonly f64bytes = new Uint8Array(this.f64.buffer);

  /**
   * @throws PILE_INVALID_OPTION when `key` is not a string, number, bigint or Uint8Array
   */
  prepare(key: CacheKey): void {
    this.epoch++;
    if (typeof key === 'string') {
      this.type = KEY_STRING;
      this.str = key;
      // The hash (over the UTF-16 code units: no encoding on the lookup path) and the stored
      // WTF-8 length in one pass over the key: a put needs both, and a second loop over the key
      // cost a cache put about 4 % of its instructions (docs/benchmarks.md).
      let h = FNV_OFFSET ^ KEY_STRING;
      const units = key.length;
      let n = units;
      for (let i = 0; i < units; i++) {
        const c = key.charCodeAt(i);
        h = Math.imul(h ^ c, FNV_PRIME);
        if (c < 0x80) continue;
        if (c < 0x800) n += 1;
        else if (c >= 0xd800 && c < 0xdc00 && i + 1 < units && (key.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
          // A surrogate pair: two units, four bytes.
          h = Math.imul(h ^ key.charCodeAt(++i), FNV_PRIME);
          n += 2;
        } else n += 2;
      }
      this.hash = fmix32(h);
      this.strLength = n;
      return;
    }
    if (typeof key === 'number') {
      this.type = KEY_NUMBER;
      // Map semantics: -0 is 0 and every NaN is one key.
      this.f64[0] = key === 0 ? 0 : Number.isNaN(key) ? NaN : key;
      this.bytes.set(this.f64bytes, 0);
      this.len = 8;
    } else if (typeof key === 'bigint') {
      this.type = KEY_BIGINT;
      const text = key < 0n ? '-' + (-key).toString(16) : key.toString(16);
      this.room(text.length);
      this.len = this.bytes.write(text, 0, 'latin1');
    } else if (key instanceof Uint8Array) {
      this.type = KEY_BYTES;
      this.room(key.length);
      this.bytes.set(key, 0);
      this.len = key.length;
    } else {
      throw new PileError(
        'PILE_INVALID_OPTION',
        `key: expected a string, number, bigint or Uint8Array, got ${key === null ? 'null' : typeof key}`,
      );
    }
    this.hash = hashBytes(this.type, this.bytes, 0, this.len);
  }

  /** Byte length of the prepared key as stored. */
  storedLength(): number {
    return this.type === KEY_STRING ? this.strLength : this.len;
  }

  /** Writes the prepared key at `b[off..]`; returns the end offset. */
  write(b: Buffer, off: number): number {
    if (this.type === KEY_STRING) return wtf8Write(this.str, b, off);
    this.bytes.copy(b, off, 0, this.len);
    return off + this.len;
  }

  /** True when the stored key `b[off..off+len)` of type `type` is the prepared key. */
  equals(type: number, b: Buffer, off: number, len: number): boolean {
    if (type !== this.type) return false;
    if (type === KEY_STRING) return stringEquals(this.str, b, off, len);
    if (len !== this.len) return false;
    if (len <= 16) {
      const k = this.bytes;
      for (let i = 0; i < len; i++) if (b[off + i] !== k[i]) return false;
      return true;
    }
    return b.compare(this.bytes, 0, len, off, off + len) === 0;
  }

  private room(n: number): void {
    if (this.bytes.length < n) this.bytes = Buffer.alloc(Math.max(n, this.bytes.length * 2));
  }
}

/**
 * Decodes a stored key back into the value it was put with.
 * @throws PILE_CORRUPT when the key type is unknown
 */
/** How `prepare` writes a bigint key: sign, then lower-case hex digits. */
const BIGINT_HEX = /^-?[0-9a-f]+$/;

export function decodeKey(type: number, b: Buffer, off: number, len: number): CacheKey {
  switch (type) {
    case KEY_STRING:
      return wtf8Read(b, off, off + len);
    case KEY_NUMBER:
      // A damaged type or length word must give PILE_CORRUPT, not a RangeError or another key.
      if (len !== 8) throw new PileError('PILE_CORRUPT', `cache entry has a number key of ${len} bytes (8 expected)`);
      return b.readDoubleLE(off);
    case KEY_BIGINT: {
      const text = b.toString('latin1', off, off + len);
      if (!BIGINT_HEX.test(text))
        throw new PileError('PILE_CORRUPT', `cache entry has a bigint key that is not hexadecimal (${JSON.stringify(text.slice(0, 40))})`);
      return text.startsWith('-') ? -BigInt('0x' + text.slice(1)) : BigInt('0x' + text);
    }
    case KEY_BYTES: {
      const out = new Uint8Array(len);
      out.set(b.subarray(off, off + len));
      return out;
    }
    default:
      throw new PileError('PILE_CORRUPT', `cache entry has unknown key type ${type}`);
  }
}
