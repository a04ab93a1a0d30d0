import type { CacheKey } from '@pile/cache';

/**
 * One invalidated key as it travels in the stream: `<op><version base36>:<table length base36>:<table><key type><key>`.
 * An entry is `g <origin>` followed by one `k <packed>` pair per key (duplicate field names are
 * allowed in stream entries), so a burst of local writes costs one XADD and the origin once.
 * No values travel: a host that needs the value loads it.
 */
export type Op = 'p' | 'd' | 'e';

/** Decoded form of one packed key (reused by the decoder: read it before the next decode). */
export interface WireKey {
  op: Op;
  version: number;
  table: string;
  key: CacheKey;
  /** The key's text as packed (type + text): a stable identity for maps of in-flight loads. */
  id: string;
}

/** `<type><text>`: s string, u string with lone surrogates (UTF-16 units in hex), n number, b bigint (hex), x bytes (base64). */
export function keyId(key: CacheKey): string {
  switch (typeof key) {
    case 'string':
      return (key as unknown as { isWellFormed(): boolean }).isWellFormed() ? `s${key}` : `u${Buffer.from(key, 'utf16le').toString('hex')}`;
    case 'number':
      return `n${Object.is(key, -0) ? '0' : String(key)}`;
    case 'bigint':
      return `b${key.toString(16)}`;
    default:
      return `x${Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('base64')}`;
  }
}

function keyOf(id: string): CacheKey {
  const text = id.slice(1);
  switch (id.charCodeAt(0)) {
    case 0x73:
      return text;
    case 0x75:
      return Buffer.from(text, 'hex').toString('utf16le');
    case 0x6e:
      return Number(text);
    case 0x62:
      return text.startsWith('-') ? -BigInt(`0x${text.slice(1)}`) : BigInt(`0x${text}`);
    case 0x78:
      return new Uint8Array(Buffer.from(text, 'base64'));
    default:
      throw new Error(`unknown key type '${id[0]}'`);
  }
}

/** Packs one invalidated key. */
export function packKey(op: Op, version: number, table: string, id: string): string {
  return `${op}${version.toString(36)}:${table.length.toString(36)}:${table}${id}`;
}

/** Unpacks a key packed by {@link packKey}; undefined when it is not one (an entry from something else). */
export function unpackKey(packed: string): WireKey | undefined {
  const op = packed[0];
  if (op !== 'p' && op !== 'd' && op !== 'e') return undefined;
  const c1 = packed.indexOf(':', 1);
  const c2 = c1 < 0 ? -1 : packed.indexOf(':', c1 + 1);
  if (c2 < 0) return undefined;
  const version = parseInt(packed.slice(1, c1), 36);
  const tlen = parseInt(packed.slice(c1 + 1, c2), 36);
  if (!Number.isSafeInteger(version) || !Number.isSafeInteger(tlen) || c2 + 1 + tlen >= packed.length) return undefined;
  const table = packed.slice(c2 + 1, c2 + 1 + tlen);
  const id = packed.slice(c2 + 1 + tlen);
  let key: CacheKey;
  try {
    key = keyOf(id);
  } catch {
    return undefined;
  }
  return { op, version, table, key, id };
}
