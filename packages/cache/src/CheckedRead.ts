import { PileError, ReadRetry, isPileError, type PilePointer } from '@pile/core';
import { SEQ_WORD } from './CoreBindings';
import { E_CREATED, E_EXPIRES, E_VALUE_KIND, valueLength, valueOffset } from './EntryFormat';
import { FIND_AGAIN, SlotIndex } from './SlotIndex';
import { VERSION_WORD } from './TableSeqlock';
import { probeLimit } from './TableResize';
import type { TableState } from './TableState';
import type { TableHook } from './TableTypes';
import type { ValueCodec } from './ValueCodec';

/** A table's version before its first checked read: its index is read again from the catalog then. */
export const UNKNOWN_VERSION = -1;

/** What {@link readChecked} needs of a table besides its state (CacheTable). */
export interface CheckedTable extends TableState {
  readonly hook: TableHook | undefined;
  readonly values: ValueCodec<unknown>;
  idx: SlotIndex;
  /** The table version (TableSeqlock) `idx` was read at, or {@link UNKNOWN_VERSION}. */
  idxVersion: number;
  /** After a hit of the find: the entry (host.mem) was stored before the hook's epoch. */
  belowEpoch(hook: TableHook): boolean;
}

/** An attempt that met a writer's change: made again. */
const AGAIN = Symbol('again');

/**
 * A get (`wantValue`) or a has of the prepared key, by a process that reads a table another
 * process writes (docs/concurrency.md, "Cache tables beside a writer"): the value, `true` (a has
 * that found the key) or undefined (a miss). Every value returned is one a put stored for this
 * key, whole:
 * - the table's seqlock (TableSeqlock) is loaded before the probe and again after the value is
 *   decoded: a backward shift, resize or rehash of the index meanwhile makes the read again;
 * - an index older than the table version is read again from the cache catalog first (the new
 *   chunks may lie in segments this process maps then, as the core maps a segment a pointer names);
 * - the entry record is read through the core's checked raw read (rawSeek, then Pile.rawSettled):
 *   a record replaced or evicted meanwhile (deleted, perhaps reused) makes the read again, and so
 *   does a record already gone when it was located (its slot has changed since);
 * - the key stored in the entry is compared with the one asked for, so a slot that changed to
 *   another key between the probe and the read is never taken for this one.
 * While a resize or rehash is under way (the seqlock odd and the version moved) the answer is a
 * miss: the entries are between two indexes. Other changes are waited for (ReadRetry: a few
 * immediate attempts, then sleeps; PILE_LOCKED when the seqlock stays odd for 1 s).
 * @throws PILE_LOCKED when the writer died or stopped in the middle of a change of the index
 * @throws PILE_CORRUPT, PILE_SCHEMA_MISMATCH when a value read whole does not decode
 * @throws PILE_CLOSED when the writer dropped the table
 */
export function readChecked(t: CheckedTable, maxAge: number, wantValue: boolean): unknown {
  const w = t.seqWords;
  let retry: ReadRetry | undefined;
  for (;;) {
    // A plain load before, Atomics.load after: the order argument of the core's checked reads.
    const s = w[SEQ_WORD]!;
    const v = w[VERSION_WORD]!;
    if ((s & 1) === 0) {
      if (v === t.idxVersion || reloadIndex(t, s, v)) {
        const r = attempt(t, s, maxAge, wantValue);
        if (r !== AGAIN && Atomics.load(w, SEQ_WORD) === s) return r;
      }
    } else if (v !== t.idxVersion && t.idxVersion !== UNKNOWN_VERSION) return undefined;
    (retry ??= new ReadRetry()).pause(`a read of cache table '${t.meta.name}'`, w, s);
  }
}

/** One probe and read; AGAIN when it met a change (the caller checks the table's seqlock too). */
function attempt(t: CheckedTable, s: number, maxAge: number, wantValue: boolean): unknown {
  const host = t.host;
  const mem = host.mem;
  try {
    const hook = t.hook;
    if (hook !== undefined && !hook.serving) return undefined;
    const idx = t.idx;
    const i = idx.find(host.keys, mem, t.entryTag, probeLimit(t, idx.capacity), t.meta.name, true);
    if (i === FIND_AGAIN) return AGAIN;
    if (i < 0) return undefined;
    let value: unknown = true;
    const o = mem.off;
    const view = mem.view;
    // The expiry of the entry itself, not of the slot: the record is what the check covers.
    const exp = view.getFloat64(o + E_EXPIRES, true);
    const now = exp !== 0 || maxAge >= 0 ? host.clock() : 0;
    if ((hook !== undefined && hook.epoch > 0 && t.belowEpoch(hook)) || (exp !== 0 && exp <= now)) value = undefined;
    else if (maxAge >= 0 && now - view.getFloat64(o + E_CREATED, true) > maxAge * 1000) value = undefined;
    else if (wantValue) {
      const b = mem.buf;
      const voff = valueOffset(mem);
      value = t.values.read(b[o + E_VALUE_KIND]!, b, view, o + voff, valueLength(mem, voff));
    }
    return mem.settled() ? value : AGAIN;
  } catch (err) {
    // A record deleted before it was located: the writer changed its slot first, so probe again.
    if (isPileError(err, 'PILE_STALE_POINTER') || !mem.settled() || Atomics.load(t.seqWords, SEQ_WORD) !== s) return AGAIN;
    throw err;
  }
}

/**
 * Reads the table's index again from the catalog, for table version `v` loaded with the seqlock at
 * `s`; false when a resize ran meanwhile (the catalog read may be of another version).
 * @throws PILE_CLOSED when the table is no longer in the catalog (dropped by the writer)
 */
function reloadIndex(t: CheckedTable, s: number, v: number): boolean {
  t.idxVersion = UNKNOWN_VERSION;
  const pile = t.host.pile;
  let idx: SlotIndex | undefined;
  try {
    const stored = t.host.storedIndex(t.meta.id);
    if (stored !== undefined) idx = SlotIndex.open(pile, stored.capacity, stored.chunkSlots, stored.chunks as PilePointer[]);
  } catch (err) {
    // Chunks freed by a resize that ran after the catalog was read.
    if (Atomics.load(t.seqWords, SEQ_WORD) !== s) return false;
    throw err;
  }
  if (Atomics.load(t.seqWords, SEQ_WORD) !== s) return false;
  if (idx === undefined) throw new PileError('PILE_CLOSED', `cache table '${t.meta.name}' was dropped by the pile's writer`);
  t.idx = idx;
  t.meta.capacity = idx.capacity;
  t.meta.chunks = idx.blocks.slice();
  t.idxVersion = v;
  return true;
}
