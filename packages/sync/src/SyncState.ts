import { PileError, type Pile, type PilePointer } from '@pile/core';
import type { CacheTable, PileCache } from '@pile/cache';

/** Root naming the sync catalog (JSON text) in the pile. */
export const SYNC_ROOT = 'pile-sync';
/** Tables @pile/sync keeps in the cache for itself; never synced. */
export const SYNC_TABLE_PREFIX = 'pile-sync/';
const OUTBOX_TABLE = `${SYNC_TABLE_PREFIX}outbox`;
const VERSIONS_PREFIX = `${SYNC_TABLE_PREFIX}versions/`;
/** Raw block owner tag: 'S' 'Y' in the top bytes, away from the cache's 0xCA tags. */
const STATE_TAG = 0x5359_0001;
const STATE_VERSION = 1;

// Words of the state block (f64), updated in place: they survive a SIGKILL with the mapped files.
const W_VERSION = 0;
const W_LAST_MS = 1;
const W_LAST_SEQ = 2;
const W_CLOCK = 3;
const W_OUT_HEAD = 4;
const W_OUT_TAIL = 5;
const W_GAPS = 6;
const W_APPLIED = 7;
const W_PUBLISHED = 8;
const W_SKIPPED_NEWER = 9;
const WORDS = 16;

/** Each version counts this many per ms of wall clock: room for 1024 writes per ms per host. */
const TICKS_PER_MS = 1024;

interface Catalog {
  v: number;
  origin: string;
  state: number;
  /** Per table: sequence number below which entries are absent (set when a gap was found). */
  epochs: Record<string, number>;
  /** Value of the stream's identity key when this host last followed it; absent before the first time. */
  identity?: string;
}

/**
 * What @pile/sync keeps in the pile: the last applied stream id, the hybrid logical clock, the
 * outbox of local changes not yet published, the per-key versions and the table epochs.
 */
export class SyncState {
  readonly origin: string;
  private readonly words: Float64Array;
  private readonly catalog: Catalog;
  private readonly catalogPtr: PilePointer;
  readonly outbox: CacheTable<string>;
  private readonly versionTables = new Map<string, CacheTable<Uint8Array>>();
  private readonly vbuf = new Uint8Array(8);
  private readonly vview = new DataView(this.vbuf.buffer);

  constructor(
    private readonly cache: PileCache,
    private readonly pile: Pile,
    origin: string | undefined,
    private readonly clock: () => number,
  ) {
    const ptr = pile.getRoot(SYNC_ROOT);
    if (ptr === undefined) {
      const state = pile.allocRaw(WORDS * 8, STATE_TAG);
      const words = this.mapWords(state);
      words.fill(0);
      words[W_VERSION] = STATE_VERSION;
      this.catalog = { v: STATE_VERSION, origin: origin ?? randomOrigin(), state, epochs: {} };
      this.catalogPtr = pile.put(JSON.stringify(this.catalog));
      pile.setRoot(SYNC_ROOT, this.catalogPtr);
      this.words = words;
    } else {
      const text = pile.get<unknown>(ptr);
      let c: Catalog | undefined;
      try {
        c = typeof text === 'string' ? (JSON.parse(text) as Catalog) : undefined;
      } catch {
        c = undefined;
      }
      if (c === undefined || typeof c.origin !== 'string' || typeof c.state !== 'number') {
        throw new PileError('PILE_CORRUPT', `sync catalog (root '${SYNC_ROOT}', pointer ${ptr}) is not a sync catalog record`);
      }
      if (c.v > STATE_VERSION)
        throw new PileError('PILE_FORMAT_VERSION', `sync catalog version ${c.v} is newer than this build reads (${STATE_VERSION})`);
      this.catalog = c;
      this.catalogPtr = ptr;
      this.words = this.mapWords(c.state);
      if (origin !== undefined && origin !== c.origin) {
        c.origin = origin;
        this.save();
      }
    }
    this.origin = this.catalog.origin;
    this.outbox = cache.table<string>(OUTBOX_TABLE, { collisionMode: 'durable' });
  }

  private mapWords(ptr: number): Float64Array {
    const b = this.pile.rawBuffer(ptr as PilePointer);
    if (b.length !== WORDS * 8)
      throw new PileError('PILE_CORRUPT', `sync state block ${ptr} holds ${b.length} bytes, expected ${WORDS * 8}`);
    return new Float64Array(b.buffer, b.byteOffset, WORDS);
  }

  private save(): void {
    this.pile.set(this.catalogPtr, JSON.stringify(this.catalog));
  }

  // ------------------------------------------------------------------ stream position

  /**
   * Position in the stream: the ms part every id of the stream carries (its identity epoch) and the
   * sequence number of the last entry applied (-1: none of this epoch yet).
   */
  get lastMs(): number {
    return this.words[W_LAST_MS]!;
  }

  get lastSeq(): number {
    return this.words[W_LAST_SEQ]!;
  }

  /** The id to XREAD after. */
  get readAfter(): string {
    const ms = this.words[W_LAST_MS]!;
    const seq = this.words[W_LAST_SEQ]!;
    return seq >= 0 ? `${ms}-${seq}` : ms > 0 ? `${ms - 1}-18446744073709551615` : '0-0';
  }

  /** Records entry `seq` of the current epoch as applied (in place in the mapped state block). */
  setLastSeq(seq: number): void {
    this.words[W_LAST_SEQ] = seq;
  }

  // ------------------------------------------------------------------ hybrid logical clock

  /**
   * A version greater than every version this host issued or observed, close to wall-clock time
   * (ms × 1024 + a counter), so versions from different hosts order roughly by real time.
   */
  nextVersion(): number {
    const w = this.words;
    const v = Math.max(Math.floor(this.clock()) * TICKS_PER_MS, w[W_CLOCK]! + 1);
    w[W_CLOCK] = v;
    return v;
  }

  /** Merges a version seen from another host into the clock. */
  observe(version: number): void {
    if (version > this.words[W_CLOCK]!) this.words[W_CLOCK] = version;
  }

  // ------------------------------------------------------------------ per-key versions

  private versionsOf(table: string): CacheTable<Uint8Array> {
    let t = this.versionTables.get(table);
    if (t === undefined) {
      // Speculative on purpose: a lost version only makes the next remote change drop the value (a miss).
      t = this.cache.table<Uint8Array>(`${VERSIONS_PREFIX}${table}`, { collisionMode: 'speculative' });
      this.versionTables.set(table, t);
    }
    return t;
  }

  /** Version of the value this host holds for key (0 when unknown: any remote change drops it). */
  versionOf(table: string, key: Parameters<CacheTable['get']>[0]): number {
    const v = this.versionsOf(table).get(key);
    return v === undefined || v.length !== 8 ? 0 : new DataView(v.buffer, v.byteOffset, 8).getFloat64(0, true);
  }

  setVersion(table: string, key: Parameters<CacheTable['get']>[0], version: number): void {
    if (version === 0) {
      this.versionsOf(table).delete(key);
      return;
    }
    this.vview.setFloat64(0, version, true);
    this.versionsOf(table).put(key, this.vbuf);
  }

  // ------------------------------------------------------------------ outbox

  /** Appends a packed key to the outbox (in the pile: a crash before it is published loses nothing). */
  enqueue(packed: string): void {
    const w = this.words;
    const n = w[W_OUT_TAIL]!;
    this.outbox.put(n, packed);
    w[W_OUT_TAIL] = n + 1;
  }

  get outboxHead(): number {
    return this.words[W_OUT_HEAD]!;
  }

  get outboxTail(): number {
    return this.words[W_OUT_TAIL]!;
  }

  /** Up to `max` packed keys from the head of the outbox, in order. */
  peek(max: number): string[] {
    const out: string[] = [];
    const tail = this.words[W_OUT_TAIL]!;
    for (let n = this.words[W_OUT_HEAD]!; n < tail && out.length < max; n++) {
      const v = this.outbox.get(n);
      if (v !== undefined) out.push(v);
      else out.push('');
    }
    return out;
  }

  /** Drops the first `n` keys of the outbox once they are in the stream. */
  published(n: number): void {
    const w = this.words;
    const head = w[W_OUT_HEAD]!;
    for (let i = 0; i < n; i++) this.outbox.delete(head + i);
    w[W_OUT_HEAD] = head + n;
    w[W_PUBLISHED]! += n;
  }

  // ------------------------------------------------------------------ epochs and counters

  epochOf(table: string): number {
    return this.catalog.epochs[table] ?? 0;
  }

  /** The stream identity this host followed last (undefined before it ever followed). */
  get identity(): string | undefined {
    return this.catalog.identity;
  }

  /** After a gap or the first attach: entries stored before are absent; the log is followed from (ms, seq). */
  restart(epochs: Record<string, number>, identity: string, ms: number, seq: number): void {
    Object.assign(this.catalog.epochs, epochs);
    this.catalog.identity = identity;
    this.save();
    this.words[W_LAST_SEQ] = seq;
    this.words[W_LAST_MS] = ms;
  }

  countGap(): void {
    this.words[W_GAPS]!++;
  }

  countApplied(): void {
    this.words[W_APPLIED]!++;
  }

  countKeptNewer(): void {
    this.words[W_SKIPPED_NEWER]!++;
  }

  get counters(): { gaps: number; applied: number; published: number; keptNewer: number } {
    const w = this.words;
    return { gaps: w[W_GAPS]!, applied: w[W_APPLIED]!, published: w[W_PUBLISHED]!, keptNewer: w[W_SKIPPED_NEWER]! };
  }
}

function randomOrigin(): string {
  // 8 base36 characters (~41 bits): unique enough among the hosts of one stream.
  let s = '';
  for (let i = 0; i < 8; i++) s += Math.floor(Math.random() * 36).toString(36);
  return s;
}
