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
  /** The table was found dropped: every later call throws PILE_CLOSED at once. */
  markDropped(): void;
}

/** An attempt that met a writer's change: made again. */
export const AGAIN = Symbol('again');

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
 * @throws PILE_CORRUPT, PILE_SCHEMA_MISMATCH when a value read whole does not decode, or the index
 *   names a freed record (staleOrDamaged)
 * @throws PILE_CLOSED when the writer dropped the table
 */
export function readChecked(t: CheckedTable, maxAge: number, wantValue: boolean): unknown {
  return underTableCheck(t, 'a read', wantValue ? getAttempt : hasAttempt, maxAge, true);
}

// Functions of the module, not closures: a get allocates nothing for its check.
const getAttempt = (t: CheckedTable, s: number, maxAge: number): unknown => attempt(t, s, maxAge, true);
const hasAttempt = (t: CheckedTable, s: number, maxAge: number): unknown => attempt(t, s, maxAge, false);

/**
 * Runs `once(t, s, arg)` (`s`: the table's seqlock, even, loaded before it) until an attempt returns
 * something else than {@link AGAIN} and the seqlock has not moved meanwhile; returns what it
 * returned. An index older than the table version is read again first. While a resize or rehash is
 * under way, `missDuringResize` answers undefined at once (a get's miss: the entries are between two
 * indexes), else it is waited for (an iteration step, a count). An error `once` throws while the
 * seqlock moved is not reported: the attempt is made again. Waits are the core's (ReadRetry); `what`
 * names the read in its error.
 * @throws PILE_LOCKED when the writer died or stopped in the middle of a change of the index
 * @throws PILE_CLOSED when the writer dropped the table; what `once` throws
 */
export function underTableCheck<R, A>(
  t: CheckedTable,
  what: string,
  once: (t: CheckedTable, s: number, arg: A) => R | typeof AGAIN,
  arg: A,
  missDuringResize = false,
): R {
  const w = t.seqWords;
  let retry: ReadRetry | undefined;
  for (;;) {
    // A plain load before, Atomics.load after: the order argument of the core's checked reads.
    const s = w[SEQ_WORD]!;
    const v = w[VERSION_WORD]!;
    if ((s & 1) === 0) {
      if (v === t.idxVersion || reloadIndex(t, s, v)) {
        let r: R | typeof AGAIN;
        try {
          r = once(t, s, arg);
        } catch (err) {
          // Read during a change of the index (chunks freed by a rehash read as garbage): not reported.
          if (Atomics.load(w, SEQ_WORD) === s) throw droppedOr(t, err);
          r = AGAIN;
        }
        if (r !== AGAIN && Atomics.load(w, SEQ_WORD) === s) return r;
      }
    } else if (missDuringResize && v !== t.idxVersion && t.idxVersion !== UNKNOWN_VERSION) return undefined as R;
    // The seqlock words lie in the header block, which a drop frees for reuse: what they hold then
    // means nothing, and the table made next under the name is mostly given the very same block, so
    // they are its seqlock and version. So every retry, not only the first, makes sure the table is
    // still there: a wait never outlasts the drop of its table. A read whose first retry came before
    // the drop used to go on: on the freed words (PILE_LOCKED after 1 s when they stayed odd), or,
    // once an attempt had found the table dropped while those words moved (that error is taken for
    // a change and the attempt made again, with the table's own words detached: zeros), comparing
    // the next table's seqlock with zero until the 10 s give-up.
    const dropped = droppedOr(t, undefined);
    if (dropped !== undefined) throw dropped;
    (retry ??= new ReadRetry(t.host.pile)).pause(`${what} of cache table '${t.meta.name}'`, w, s);
  }
}

/**
 * PILE_CLOSED when the writer dropped table `t` (its header block is no longer live and the
 * catalog does not name it; the table is marked dropped), else `err`. A read of a dropped table
 * meets its freed blocks, perhaps reused: whatever it made of them (a freed record, a record that
 * is not one of its entries, garbage) is reported as the drop, never as damage.
 */
function droppedOr<E>(t: CheckedTable, err: E): E | PileError {
  const pile = t.host.pile;
  if (pile.has(t.meta.header as PilePointer) || t.host.storedIndex(t.meta.id) !== undefined) return err;
  return foundDropped(t);
}

/** Marks table `t` dropped (the pile's writer dropped it) and gives the error of the read that found it so. */
export function foundDropped(t: CheckedTable): PileError {
  t.markDropped();
  return new PileError('PILE_CLOSED', `cache table '${t.meta.name}' was dropped by the pile's writer`);
}

/**
 * What a checked read makes of slot `i` naming record `p`, which it found freed
 * (PILE_STALE_POINTER `err`): {@link AGAIN} when a writer's change can explain it, else the error
 * to throw. A record freed while the slot still names it and the table's seqlock did not move is
 * not a change: the writer changes a slot (or shifts it, under the seqlock) before it frees the
 * record the slot named, so the index itself names a freed record. That is damage, reported at once
 * (PILE_CORRUPT naming the table, slot and pointer) rather than retried until the back-off gives
 * up, unless the catalog no longer names the table (dropped: PILE_CLOSED; a drop frees the records
 * while the index still names them).
 */
export function staleOrDamaged(t: CheckedTable, s: number, i: number, p: number, err: Error): typeof AGAIN | PileError {
  if (Atomics.load(t.seqWords, SEQ_WORD) !== s || t.idx.ptr(i) !== p) return AGAIN;
  if (t.host.storedIndex(t.meta.id) === undefined) {
    return foundDropped(t);
  }
  if (Atomics.load(t.seqWords, SEQ_WORD) !== s || t.idx.ptr(i) !== p) return AGAIN;
  return new PileError(
    'PILE_CORRUPT',
    `cache table '${t.meta.name}': slot ${i} of its index names record ${p}, which is not live (${err.message}); the index is damaged (the next writable open repairs it)`,
  );
}

/**
 * After a probe of the prepared key met a freed record: probes again (cold) to find the slot that
 * names a freed record, and judges it ({@link staleOrDamaged}); AGAIN when none does any more.
 */
function staleInProbe(t: CheckedTable, s: number): typeof AGAIN | PileError {
  const idx = t.idx;
  const mem = t.host.mem;
  const hash = t.host.keys.hash;
  const limit = probeLimit(t, idx.capacity);
  let i = idx.home(hash);
  for (let n = 0; n < limit; n++) {
    const p = idx.ptr(i);
    if (p === 0) break;
    if (p > 0 && idx.hash(i) === hash) {
      try {
        mem.locate(p);
      } catch (err) {
        if (!isPileError(err, 'PILE_STALE_POINTER')) return AGAIN;
        return staleOrDamaged(t, s, i, p, err);
      }
    }
    if (++i === idx.capacity) i = 0;
  }
  return AGAIN;
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
    // A record deleted before it was located: the writer changed its slot first, so probe again,
    // unless the slot still names it (a damaged index).
    if (isPileError(err, 'PILE_STALE_POINTER')) {
      const judged = staleInProbe(t, s);
      if (judged === AGAIN) return AGAIN;
      throw judged;
    }
    if (!mem.settled() || Atomics.load(t.seqWords, SEQ_WORD) !== s) return AGAIN;
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
    // Chunks freed by a resize that ran after the catalog was read (it moved the seqlock), or by a
    // drop (which does not): not damage.
    if (Atomics.load(t.seqWords, SEQ_WORD) !== s) return false;
    if (t.host.storedIndex(t.meta.id) === undefined) throw foundDropped(t);
    throw err;
  }
  if (Atomics.load(t.seqWords, SEQ_WORD) !== s) return false;
  if (idx === undefined) throw foundDropped(t);
  t.idx = idx;
  t.meta.capacity = idx.capacity;
  t.meta.chunks = idx.blocks.slice();
  t.idxVersion = v;
  return true;
}
