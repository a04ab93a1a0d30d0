import { native, type Futex, type SharedMapping, type SharedMutex } from '@pile/native';
import { COORD, LIFE, OWNER_WORD } from './CoordLayout';
import { PileError } from '../PileError';

// The lock of the writer turn (docs/concurrency.md, "The writer turn"): a word of
// pile.coord that names the thread holding the turn, taken and released with Atomics when nobody
// waits, and a robust mutex per open that says whether that thread still lives.
//
// The word (OWNER) is 0 when free; else the holder's open (its slot, 1-based, in bits 0-10, and the
// slot's claim generation in bits 11-30) and bit 31 when a thread sleeps for it (a futex wait on the
// word). A take is one compareExchange 0 -> id; a release one compareExchange id -> 0, with a futex
// wake only when the waiter bit was set. No native call in either when nobody waits: the robust
// pthread mutex it replaces cost a Node-API call each way (about 0.15 us a pair from JavaScript).
//
// A holder's death can no longer be learnt from the lock itself, so each read-write open locks a
// robust mutex of its own (its liveness mutex, LIVES + 64 * slot) for as long as it is open: the
// kernel marks it OWNER_DEAD when the thread ends without unlocking it (SIGKILL, a terminated worker
// thread), whatever pid it had or a new process gets. A waiter that finds the word held checks that
// mutex at each wake and every few ms (FIRST_CHECK_MS): when it can take it, the holder is gone,
// and the waiter takes the word over and repairs (MUTEX.OWNER_DEAD, as the mutex reported before).
// The generation keeps a waiter from taking a new open of the same slot for the dead holder that
// named it.

const { OWNER, LIVES, LIVES_STAMP } = COORD;
const { SIZE: LIFE_SIZE, GEN: LIFE_GEN, STAMP: LIFE_STAMP } = LIFE;
const { WAITER, ID_BITS, ID_MASK, GEN_MASK } = OWNER_WORD;
/**
 * How often a sleeping waiter looks whether the holder still lives (a death wakes nobody): every
 * FIRST_CHECK_MS for the first FAST_FOR_MS of its wait, then every CHECK_MS. Each look costs a
 * timed-out futex wait and a trylock, 20-50 us of CPU here: every 1 ms that is 3 % of a CPU, too
 * much for a waiter behind a holder that is stopped or in a long batch, every 10 ms about 1 %. A
 * holder killed in a short write is found within about a millisecond (after the kernel ended it)
 * instead of 5 on average and up to 10 (the bar: 100 ms from the kill to the next write).
 */
const FIRST_CHECK_MS = 1;
const FAST_FOR_MS = 100;
const CHECK_MS = 10;

export const LOCKED = native.MUTEX.LOCKED;
export const OWNER_DEAD = native.MUTEX.OWNER_DEAD;
export const BUSY = native.MUTEX.BUSY;
export type TakeResult = typeof LOCKED | typeof OWNER_DEAD;

/** The ids this thread holds, per pile.coord (device:inode): a take of one of them would never end. */
const mine = new Map<string, Set<number>>();

/**
 * The writer turn's lock of one read-write open of pile.coord (see the comment at the top).
 */
export class TurnLock {
  private readonly u32: Uint32Array;
  /** This open's id in the word (no waiter bit); 0 until claim(). */
  private me = 0;
  private life: SharedMutex | undefined;
  private readonly futex: Futex;
  /** Other opens' liveness mutexes, made when a waiter first checks them. */
  private readonly others = new Map<number, SharedMutex>();

  constructor(
    private readonly mapping: SharedMapping,
    private readonly file: string,
    /** The file's device and inode: the same file under every path. */
    private readonly key: string,
  ) {
    this.u32 = new Uint32Array(mapping.buffer);
    this.futex = new native.Futex(mapping, OWNER, file);
  }

  /** A new layout, or a file kept from dead processes: a free word, and every slot's liveness mutex made afresh at its next claim. Only with no writer live. */
  static layOut(u32: Uint32Array): void {
    Atomics.store(u32, OWNER >>> 2, 0);
    u32[LIVES_STAMP >>> 2] = ((u32[LIVES_STAMP >>> 2]! + 1) >>> 0 || 1) >>> 0;
  }

  /**
   * Makes this open the owner of reader-table slot `slot`'s liveness mutex for as long as it is
   * open (the caller holds the slot's byte lock: no live open owns it).
   * @throws Error from the mutex (with `code`, `syscall`, `path`, `offset`)
   */
  claim(slot: number): void {
    const u32 = this.u32;
    const base = (LIVES + slot * LIFE_SIZE) >>> 2;
    const life = new native.SharedMutex(this.mapping, LIVES + slot * LIFE_SIZE, this.file);
    try {
      const stamp = u32[LIVES_STAMP >>> 2]!;
      // Not yet made in this layout: nobody can be checking it (no word names this slot's new generation yet).
      if (u32[base + (LIFE_STAMP >>> 2)] !== stamp) {
        life.init();
        u32[base + (LIFE_STAMP >>> 2)] = stamp;
      }
      // A waiter may hold it for an instant while it checks a dead open of this slot: lock() waits that out.
      if (life.lock() === OWNER_DEAD) life.consistent();
    } catch (err) {
      life.close();
      throw err;
    }
    const gen = ((u32[base + (LIFE_GEN >>> 2)]! + 1) & GEN_MASK) >>> 0;
    u32[base + (LIFE_GEN >>> 2)] = gen;
    this.life = life;
    this.me = ((gen << ID_BITS) | (slot + 1)) >>> 0;
    let ids = mine.get(this.key);
    if (ids === undefined) mine.set(this.key, (ids = new Set()));
    ids.add(this.me);
  }

  /** Takes the word if it is free: LOCKED, or BUSY (a dead holder is left to take()). */
  tryTake(): number {
    return Atomics.compareExchange(this.u32, OWNER >>> 2, 0, this.me) === 0 ? LOCKED : BUSY;
  }

  /**
   * Takes the word, sleeping while another live thread holds it: LOCKED, or OWNER_DEAD when it was
   * taken over from a holder that died (the caller repairs).
   * @throws PILE_LOCKED when this thread holds it through another open of the file (it would wait for ever)
   */
  take(): TakeResult {
    const u32 = this.u32;
    const at = OWNER >>> 2;
    // Once it has slept, a taker keeps the waiter bit set: others may sleep still, and its release wakes one.
    let waited = 0;
    let since = -1;
    for (;;) {
      let v = Atomics.load(u32, at);
      if (v === 0) {
        if (Atomics.compareExchange(u32, at, 0, this.me | waited) === 0) return LOCKED;
        continue;
      }
      if (this.gone(v)) {
        if (Atomics.compareExchange(u32, at, v, (this.me | (v & WAITER) | waited) >>> 0) === v) return OWNER_DEAD;
        continue;
      }
      if ((v & WAITER) === 0) {
        if (Atomics.compareExchange(u32, at, v, (v | WAITER) >>> 0) !== v) continue;
        v = (v | WAITER) >>> 0;
      }
      const now = performance.now();
      if (since < 0) since = now;
      this.futex.wait(v, now - since < FAST_FOR_MS ? FIRST_CHECK_MS : CHECK_MS);
      waited = WAITER;
    }
  }

  /** Releases the word if this open holds it, waking a sleeper when one set the waiter bit. */
  release(): void {
    const v = Atomics.compareExchange(this.u32, OWNER >>> 2, this.me, 0);
    if (v === this.me || (v & ~WAITER) >>> 0 !== this.me) return;
    Atomics.store(this.u32, OWNER >>> 2, 0);
    this.futex.wake(1);
  }

  /**
   * Whether the word names a holder that is gone (a reader's question: a change that holder left
   * open will not end until the next writer repairs it). False when free or held by this thread.
   */
  holderGone(): boolean {
    const v = Atomics.load(this.u32, OWNER >>> 2);
    return v !== 0 && mine.get(this.key)?.has((v & ~WAITER) >>> 0) !== true && this.gone(v);
  }

  /** Whether this open holds the word. */
  get held(): boolean {
    return this.me !== 0 && (Atomics.load(this.u32, OWNER >>> 2) & ~WAITER) >>> 0 === this.me;
  }

  /**
   * Whether the open named by word `v` is closed or its thread dead: its slot was claimed again
   * since (another generation), or its liveness mutex can be taken.
   */
  private gone(v: number): boolean {
    const id = (v & ~WAITER) >>> 0;
    if (mine.get(this.key)?.has(id) === true) {
      throw new PileError(
        'PILE_LOCKED',
        `can not take the writer turn of ${this.file} (word at offset ${OWNER}): this thread holds it through another pile object of the same directory`,
      );
    }
    const slot = (id & ID_MASK) - 1;
    const base = (LIVES + slot * LIFE_SIZE) >>> 2;
    if ((Atomics.load(this.u32, base + (LIFE_GEN >>> 2)) & GEN_MASK) !== id >>> ID_BITS) return true;
    let m = this.others.get(slot);
    if (m === undefined) this.others.set(slot, (m = new native.SharedMutex(this.mapping, LIVES + slot * LIFE_SIZE, this.file)));
    const r = m.tryLock();
    if (r === BUSY) return false;
    if (r === OWNER_DEAD) m.consistent();
    m.unlock();
    return true;
  }

  /** Lets go of the liveness mutex (after the turn was released or given up) and unmaps. Idempotent. */
  close(): void {
    if (this.me !== 0) {
      mine.get(this.key)?.delete(this.me);
      if (mine.get(this.key)?.size === 0) mine.delete(this.key);
      this.me = 0;
    }
    if (this.life !== undefined) {
      try {
        this.life.unlock();
        this.life.close();
      } catch {
        /* not held by this thread: it stays mapped until the thread ends (SharedMutex) */
      }
      this.life = undefined;
    }
    for (const m of this.others.values()) m.close();
    this.others.clear();
    this.futex.close();
  }
}
