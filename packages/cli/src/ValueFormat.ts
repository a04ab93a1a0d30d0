import { inspect } from 'node:util';

/** Bytes printed in full before a hex dump is cut short. */
export const HEX_LIMIT = 256;

/** Hex of up to {@link HEX_LIMIT} bytes, with `… (N bytes)` when cut. */
export function hexOf(bytes: Uint8Array, limit = HEX_LIMIT): string {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length <= limit) return b.toString('hex');
  return `${b.subarray(0, limit).toString('hex')}… (${b.length} bytes)`;
}

/**
 * A JSON.stringify replacer that keeps every value printable: bigint as a decimal string,
 * bytes as `{ "hex": ... }`, Map and Set as arrays.
 */
export function jsonReplacer(this: unknown, _key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Uint8Array) return { hex: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex') };
  // Buffer#toJSON runs before the replacer sees the value.
  if (
    value !== null &&
    typeof value === 'object' &&
    (value as { type?: unknown }).type === 'Buffer' &&
    Array.isArray((value as { data?: unknown }).data)
  ) {
    return { hex: Buffer.from((value as { data: number[] }).data).toString('hex') };
  }
  if (value instanceof Map) return [...value.entries()];
  if (value instanceof Set) return [...value.values()];
  return value;
}

/** One line of text for a decoded value: strings quoted, bytes as hex, objects inline. */
export function textOf(value: unknown): string {
  if (value instanceof Uint8Array) return `hex ${hexOf(value)}`;
  return inspect(value, { depth: 6, breakLength: Infinity, maxArrayLength: 50, maxStringLength: 500, compact: true });
}
