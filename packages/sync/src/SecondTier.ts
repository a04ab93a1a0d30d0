import type { Redis } from 'ioredis';
import { Packr } from 'msgpackr';
import { refuseFunction } from '@pile/core';

/**
 * How long (ms, Redis clock) a tombstone lives, and the longest a fill may take between its read of
 * the L2 record and its store. Every expiry set on an L2 record is at least this long, so a record
 * touched after a fill's read still exists when the fill stores: a fill can never miss an
 * invalidation because the record that carried it expired. A load slower than this is not stored in L2.
 */
export const L2_WINDOW_MS = 60_000;

// An L2 record is a hash: g = id of the last stream entry that invalidated the key ('' when none is
// known), d = the value (MessagePack), e = when d expires (Redis ms; absent: never).

/** The publish of a batch of invalidations and the tombstones of their L2 records, in one step. */
const PUBLISH = `
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], ARGV[2], unpack(ARGV, 4))
for i = 2, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('HSET', KEYS[i], 'g', id)
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
return id`;

/** Reads an L2 record: { g, has value ('1'/'0'), value, Redis now ms, ms left of the value ('' = no expiry) }. */
const READ = `
local r = redis.call('HMGET', KEYS[1], 'g', 'd', 'e')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local g = r[1] or ''
if not r[2] then return { g, '0', '', tostring(now), '' } end
if r[3] then
  local left = tonumber(r[3]) - now
  if left <= 0 then return { g, '0', '', tostring(now), '' } end
  return { g, '1', r[2], tostring(now), tostring(left) }
end
return { g, '1', r[2], tostring(now), '' }`;

/**
 * Stores a loaded value if no invalidation of the key entered the stream since the read (g unchanged),
 * no value is there yet (the first fill after an invalidation wins: a host that saw a value never
 * sees an older one in its place), and the load took less than the window.
 * ARGV: expected g, value, Redis ms of the read, ttl ms (0 = none), window ms.
 * Returns 1 stored, 0 invalidated meanwhile, 2 a value was there, -1 too slow.
 */
const FILL = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[5])
if now - tonumber(ARGV[3]) >= window then return -1 end
local cur = redis.call('HMGET', KEYS[1], 'g', 'd')
if (cur[1] or '') ~= ARGV[1] then return 0 end
if cur[2] then return 2 end
redis.call('HSET', KEYS[1], 'g', ARGV[1], 'd', ARGV[2])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('HSET', KEYS[1], 'e', now + ttl)
  local want = math.max(ttl, window)
  local left = redis.call('PTTL', KEYS[1])
  if left < want then redis.call('PEXPIRE', KEYS[1], want) end
else
  redis.call('HDEL', KEYS[1], 'e')
  redis.call('PERSIST', KEYS[1])
end
return 1`;

/** What a read of the L2 record found: the generation to store a load under, and the value if any. */
export interface L2Read {
  /** Id of the last stream entry that invalidated the key, '' when none. */
  g: string;
  /** Redis time of the read (ms). */
  at: number;
  /** The encoded value, when L2 holds one. */
  bytes: Buffer | undefined;
  /** Ms left before the value expires; undefined: no expiry. */
  leftMs: number | undefined;
}

interface L2Commands {
  pileSyncPublish(numKeys: number, ...args: (string | number)[]): Promise<string>;
  pileSyncReadBuffer(key: string): Promise<Buffer[]>;
  pileSyncFill(key: string, g: string, value: Buffer, at: number, ttl: number, window: number): Promise<number>;
}

/**
 * The second tier of @pile/sync: values kept in Redis beside the invalidation log. Every
 * invalidation published to the stream replaces the key's L2 record by a tombstone in the same
 * script, so a value in L2 is always as new as every invalidation already in the stream.
 */
export class SecondTier {
  private readonly packr = new Packr({
    useRecords: false,
    moreTypes: true,
    writeFunction: refuseFunction('PILE_SCHEMA_VIOLATION'),
  } as never);

  constructor(private readonly stream: string) {}

  /** Adds the scripts to a connection. */
  define(conn: Redis): void {
    conn.defineCommand('pileSyncPublish', { lua: PUBLISH });
    conn.defineCommand('pileSyncRead', { numberOfKeys: 1, lua: READ });
    conn.defineCommand('pileSyncFill', { numberOfKeys: 1, lua: FILL });
  }

  /** The Redis key of a table's key (`id` from keyId): unambiguous whatever the table name holds. */
  keyOf(table: string, id: string): string {
    return `${this.stream}:l2:${table.length.toString(36)}:${table}${id}`;
  }

  /** XADD of `fields` with the tombstones of `l2Keys`, atomically; the entry's id. */
  publish(conn: Redis, maxLen: number, id: string, fields: string[], l2Keys: string[]): Promise<string> {
    return (conn as unknown as L2Commands).pileSyncPublish(1 + l2Keys.length, this.stream, ...l2Keys, maxLen, id, L2_WINDOW_MS, ...fields);
  }

  async read(conn: Redis, key: string): Promise<L2Read> {
    const r = await (conn as unknown as L2Commands).pileSyncReadBuffer(key);
    const has = r[1]!.toString() === '1';
    const left = r[4]!.toString();
    return {
      g: r[0]!.toString(),
      at: Number(r[3]!.toString()),
      bytes: has ? r[2] : undefined,
      leftMs: has && left !== '' ? Number(left) : undefined,
    };
  }

  /** Stores an encoded load read at `read`; see FILL for the result. */
  fill(conn: Redis, key: string, read: L2Read, bytes: Buffer, ttlMs: number): Promise<number> {
    return (conn as unknown as L2Commands).pileSyncFill(key, read.g, bytes, read.at, Math.max(0, Math.ceil(ttlMs)), L2_WINDOW_MS);
  }

  encode(value: unknown): Buffer {
    return this.packr.pack(value);
  }

  decode(bytes: Buffer): unknown {
    return this.packr.unpack(bytes);
  }
}
