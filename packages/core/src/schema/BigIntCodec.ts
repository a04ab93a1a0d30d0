/**
 * The bytes of a typed `bigint` field of any size (z.bigint() without int64 bounds). A value in
 * the int64 range, the common case, takes 8 bytes of two's complement, read and written with one
 * DataView call and no conversion; a larger one takes a sign byte (0 positive, 1 negative) and its
 * magnitude, little endian, at least 9 bytes. The length, kept beside the offset in the field's
 * slot, tells the two apart.
 */
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Bytes `x` takes: 8 in the int64 range, else 1 + the bytes of its magnitude (at least 9). */
export function bigintSize(x: bigint): number {
  if (x >= INT64_MIN && x <= INT64_MAX) return 8;
  const m = x < 0n ? -x : x;
  return 1 + ((m.toString(16).length + 1) >> 1);
}

/** Writes `x` (of `n` = bigintSize(x) bytes) at `at`. */
export function writeBigint(buf: Uint8Array, view: DataView, at: number, x: bigint, n: number): void {
  if (n === 8) {
    view.setBigInt64(at, x, true);
    return;
  }
  let m = x < 0n ? -x : x;
  buf[at] = x < 0n ? 1 : 0;
  for (let i = 1; i < n; i++) {
    buf[at + i] = Number(m & 0xffn);
    m >>= 8n;
  }
}

/** Reads a bigint of `n` bytes at `at`; the caller has checked that n is 8 or at least 9 with a sign byte of 0 or 1. */
export function readBigint(buf: Uint8Array, view: DataView, at: number, n: number): bigint {
  if (n === 8) return view.getBigInt64(at, true);
  let m = 0n;
  for (let i = n - 1; i >= 1; i--) m = (m << 8n) | BigInt(buf[at + i]!);
  return buf[at] === 1 ? -m : m;
}
