import type { Allocator } from './Allocator';
import { KIND_FREE, STATE_RESERVED, flagsOf, genCheck, genOf, sizeCheck, stateOf, word1 } from '../storage/BlockFormat';
import { beginChange, endChange } from '../concurrency/ChangeSeq';
import { COORD } from '../concurrency/CoordFile';
import { NO_READER, type ReaderTable } from '../concurrency/ReaderTable';
import type { Segment } from '../storage/Segment';

// Deferred reuse (docs/concurrency.md, "Deferred reuse"): a block freed while a
// read session of any open is live is retired instead, onto a list in pile.coord, and handed to the
// free lists once every live session began after it was retired (LMDB's oldest-reader rule).

/** The flag of a retired block: RESERVED, kind free, freed by a writer but perhaps still read by a session. */
export const FLAG_RETIRED = 4;
/** In a retired block's payload: f64 epoch of the free at +16, f64 next retired block (older) at +24. */
const AT_EPOCH = 16;
const AT_NEXT = 24;
/** Retires between two reclaims inside a turn: a writer that frees many blocks (a full cache evicting) gets them back while it writes. */
const RECLAIM_EVERY = 64;
/** A list longer than this is taken for damage (a cycle) and cut: blocks past it stay allocated. */
const MAX_WALK = 1 << 26;
/**
 * How long a writer that has no room waits for the read sessions that pin retired blocks to end
 * before it gives their pin up (makeRoom). Well under ChangeSeq's STUCK_MS: the writer may wait
 * with a segment's change mark odd, and readers of that segment wait for it meanwhile.
 */
export const PIN_WAIT_MS = 100;
/** Between two looks at the reader table while makeRoom waits. */
const PIN_POLL_MS = 1;
const nap = new Int32Array(new SharedArrayBuffer(4));

/** Whether word 1 `w` is a retired block's. */
export function isRetired(w: number): boolean {
  return stateOf(w) === STATE_RESERVED && (flagsOf(w) & FLAG_RETIRED) !== 0;
}

/**
 * The retired blocks of a pile with pile.coord: a list newest first, so that epochs never grow
 * along it, threaded through the blocks (payload words 2 and 3 as f64) from RETIRED_HEAD. Only the
 * holder of the writer turn changes it.
 */
export class RetiredList {
  private readonly head: Float64Array;
  private sinceReclaim = 0;
  /** Sessions begun before this epoch were waited for by makeRoom in vain (PIN_WAIT_MS): not again. */
  private waitedBelow = 0;

  constructor(
    private readonly alloc: Allocator,
    private readonly readers: ReaderTable,
    coordF64: Float64Array,
  ) {
    this.head = new Float64Array(coordF64.buffer, COORD.RETIRED_HEAD, 1);
    // From now on (the open's recovery is done) walks keep retired blocks: the list names them.
    alloc.keepRetired = true;
  }

  /**
   * Retires the block at `addr` (segment words `u32`, offset `off`) instead of freeing it when a
   * session is open: false (nothing done) when none is, and the caller frees it. The caller counted
   * the record out and holds a change of the segment.
   */
  retire(seg: Segment, off: number, addr: number): boolean {
    // A locked instruction: the writer's side of the fence (ReaderTable). A session begun after it
    // reads what this writer changed before it.
    if (!this.readers.anySession()) return false;
    const u32 = seg.u32;
    const h = off >>> 2;
    const size = u32[h]!;
    const gen = genOf(u32[h + 1]!);
    this.alloc.touch(seg.index, off);
    const undo = this.alloc.undo;
    undo.words(u32, seg.index, off, 4); // the header and the two payload words the list takes
    undo.retiredHead();
    seg.f64[(off + AT_EPOCH) >>> 3] = this.readers.epoch;
    seg.f64[(off + AT_NEXT) >>> 3] = this.head[0]!;
    // A whole RESERVED block before the list names it: every block on the list is retired, and a
    // kill before the head names it leaves it allocated, never a list naming a live record.
    u32[h + 2] = sizeCheck(size);
    u32[h + 3] = genCheck(gen);
    u32[h + 1] = word1(gen, KIND_FREE, STATE_RESERVED, FLAG_RETIRED);
    this.head[0] = addr;
    if (++this.sinceReclaim >= RECLAIM_EVERY) this.reclaim();
    return true;
  }

  /**
   * Forgets the list, for a recovery that frees its blocks (a kept pile.coord whose rows could not
   * be trusted): walks stop keeping retired blocks, and live sessions are told their pin is gone.
   */
  drop(): void {
    this.head[0] = 0;
    this.alloc.keepRetired = false;
    this.readers.breakPins();
  }

  /** Whether blocks are retired now. */
  get pending(): boolean {
    return this.head[0] !== 0;
  }

  /**
   * Frees the retired blocks that no live session may read: those retired before the epoch of the
   * oldest live session (all of them with `all`, for the last writer's close). Moves the epoch on
   * first, so that frees from now on are not older than a session beginning now. For the holder.
   */
  reclaim(all = false): boolean {
    this.sinceReclaim = 0;
    if (this.head[0] === 0) return false;
    this.readers.advance();
    const oldest = this.readers.oldest();
    // Pins of live sessions given up (a writer without room, the last writer's close): they are told first.
    if (all && oldest !== NO_READER) this.readers.breakPins();
    return this.freeBefore(all ? NO_READER : oldest);
  }

  /**
   * The writer has no room (the pile may not grow: maxMemory, the segment count, a full disk): hands
   * retired blocks back. Those no live session pins at once; else it waits up to PIN_WAIT_MS for the
   * sessions that pin them all to end (sessions begun since pin nothing retired before), and then gives
   * the pin up: every retired block is freed and the sessions are told (ReaderTable.broken). Not
   * waited for when this open is in a session itself (it would wait for itself). LMDB fails the
   * write instead (MDB_MAP_FULL): a cache evicting under maxMemory must not (docs/concurrency.md,
   * "Deferred reuse"). False when nothing was retired. For the holder of the writer turn.
   */
  makeRoom(): boolean {
    if (this.head[0] === 0) return false;
    if (this.reclaim()) return true;
    // reclaim() moved the epoch on: every session live now began before `start`.
    const start = this.readers.epoch;
    // A session that a wait before already outlasted is not waited for again: a session makes the
    // writer wait PIN_WAIT_MS at most over its whole life, however often the writer runs out of room.
    const deadline = this.readers.depth === 0 && !(this.readers.oldest() < this.waitedBelow) ? performance.now() + PIN_WAIT_MS : 0;
    // Until the list is empty, not just shorter: so one allocation waits at most once.
    while (performance.now() < deadline) {
      Atomics.wait(nap, 0, 0, PIN_POLL_MS);
      this.reclaim();
      if (this.head[0] === 0) return true;
    }
    if (deadline !== 0) this.waitedBelow = start;
    return this.reclaim(true);
  }

  /** Frees the retired blocks retired before epoch `oldest`; whether it freed any. */
  private freeBefore(oldest: number): boolean {
    const segSize = this.alloc.segmentSize;
    let prev: Segment | undefined;
    let prevOff = 0;
    let addr = this.head[0]!;
    for (let n = 0; addr !== 0 && n < MAX_WALK; n++) {
      const seg = this.retired(addr);
      if (seg === undefined) {
        // Damage: the rest stays allocated (a leak until an unclean open), never freed blindly.
        this.cut(prev, prevOff);
        return false;
      }
      const off = addr - seg.index * segSize;
      if (seg.f64[(off + AT_EPOCH) >>> 3]! < oldest) {
        this.cut(prev, prevOff);
        this.freeFrom(addr, segSize);
        return true;
      }
      prev = seg;
      prevOff = off;
      addr = seg.f64[(off + AT_NEXT) >>> 3]!;
    }
    return false;
  }

  /** Ends the list after the block at `off` of `prev` (none: empties it). */
  private cut(prev: Segment | undefined, off: number): void {
    if (prev === undefined) {
      this.alloc.undo.retiredHead();
      this.head[0] = 0;
    } else {
      this.alloc.undo.word(prev.u32, prev.index, off + AT_NEXT);
      prev.f64[(off + AT_NEXT) >>> 3] = 0;
    }
  }

  /** Frees the retired blocks from `addr` on (cut off the list already: a kill meanwhile leaves the rest allocated). */
  private freeFrom(addr: number, segSize: number): void {
    for (let n = 0; addr !== 0 && n < MAX_WALK; n++) {
      const seg = this.retired(addr);
      if (seg === undefined) return;
      const off = addr - seg.index * segSize;
      const next = seg.f64[(off + AT_NEXT) >>> 3]!;
      const began = beginChange(seg.u32);
      try {
        this.alloc.free(addr);
      } finally {
        endChange(seg.u32, began);
      }
      addr = next;
    }
  }

  /** The segment of the retired block at `addr`; undefined for an address that names none (damage). */
  private retired(addr: number): Segment | undefined {
    const segSize = this.alloc.segmentSize;
    const segIdx = Math.floor(addr / segSize);
    const seg = this.alloc.segments[segIdx];
    const off = addr - segIdx * segSize;
    if (seg === undefined || !Number.isInteger(addr) || off % 8 !== 0 || off < 64 || off + 32 > segSize) return undefined;
    const s = seg.use();
    return isRetired(s.u32[(off >>> 2) + 1]!) ? s : undefined;
  }
}
