import { COORD, type CoordFile } from './CoordFile';
import { PileError } from '../PileError';
import type { PileOptions } from '../PileOptions';
import { BUSY, OWNER_DEAD, type TurnLock } from './TurnLock';
const SEQ = COORD.WRITE_SEQ >>> 2;
const VALID = COORD.STATE_VALID >>> 2;
const WAITERS = COORD.WAITERS >>> 2;
const TURN = COORD.TURN >>> 2;
const REPAIR_FROM = COORD.REPAIR_FROM >>> 2;
const FULL_REPAIR = COORD.FULL_REPAIR >>> 2;

/** What the turn brings up to date, publishes and repairs: the pile (see SharedState). */
export interface TurnHost {
  /** Brings what this process caches in JS up to the state published in pile.coord. */
  refresh(): void;
  /** Publishes this process's state to pile.coord (the write sequence is the turn's). */
  publish(): void;
  /** Brings the pile back from the files after a holder died, as an unclean open does; publishes. */
  repair(): void;
  /** Whether this process made a change since its last publish that others must learn at once: a segment, a catalog change. */
  changed(): boolean;
  /** This thread's writes from now on stamp the segments they touch with `turn` (COORD.TURN). */
  turn(turn: number): void;
  /** The writes so far are complete: what a repair takes as it is, beside the rows, is stored (the tail); then turn(`turn`). */
  completed(turn: number): void;
}

/** Sleeper of the hand-over wait: nobody wakes it, Atomics.wait just times out. */
const NAP = new Int32Array(new SharedArrayBuffer(4));
/** How long a thread that handed the turn over lets the waiters take it before it competes again. */
const HAND_OVER_MS = 2;

/**
 * The turns taken in this event-loop turn, released together at its end by one microtask
 * (releaseTurnsTaken): it runs once the code that took the turn has returned to the event loop (and
 * the promise jobs queued before it), before the loop polls again. A list kept by index and one
 * callback scheduled at most once per event-loop turn: no callback per pile, and no Set whose
 * delete shrinks its table (a runtime call) each time a turn is released. A turn held is always
 * listed here until it is released (or left held inside a write, which no microtask interrupts),
 * so the exit hook finds it here too. A microtask costs less than the Immediate used before (no
 * Immediate object, no check phase), and the turn is held for less long. (It once failed
 * deferred-reuse.test.ts: the test wrote a line telling a reader process to end its session, and
 * the release, a microtask later, sometimes found the session already ended and freed the blocks
 * before the test's next put, which then took the front of them; a timing assumption of the test,
 * no fault of the reuse: the blocks were freed after the session ended.)
 */
const taken: (WriterTurn | undefined)[] = [];
let takenCount = 0;
let endScheduled = false;
let exitHooked = false;
/**
 * What schedules the release: a job of a promise already settled costs less than queueMicrotask,
 * which wraps each callback in an AsyncResource and a bound function. releaseTurnsTaken never
 * throws, so the promise then() makes is never rejected.
 */
const settled = Promise.resolve();

function releaseTurnsTaken(): void {
  endScheduled = false;
  const n = takenCount;
  takenCount = 0;
  for (let i = 0; i < n; i++) {
    const turn = taken[i]!;
    taken[i] = undefined;
    turn.listed = false;
    if (turn.depth !== 0 || !turn.held) continue;
    try {
      turn.release();
    } catch {
      // pile.meta or pile.coord could not be written: the mutex is unlocked all the same (see
      // release()); the next write's release reports the error.
    }
  }
}

function releaseAtExit(): void {
  for (let i = 0; i < takenCount; i++) {
    const turn = taken[i]!;
    try {
      if (turn.depth === 0) turn.release();
    } catch {
      // Left held: the next holder finds it OWNER_DEAD and repairs.
    }
  }
}

/**
 * The writer turn: one thread of one process writes at a time, any may take the turn
 * (docs/concurrency.md, "The writer turn").
 *
 * Taking it locks the writer mutex of pile.coord (sleeping in the kernel while another holds it,
 * counted in the waiter word meanwhile), repairs what a dead holder left, and refreshes this
 * process's view when another process wrote since (the write sequence moved). A thread then holds
 * it across its writes, so that an uncontended write costs a flag test and one atomic load instead
 * of a lock, a catch-up check, a publish and an unlock: the turn is released (its state published,
 * the sequence moved on, the mutex unlocked) at the end of the write during which another thread
 * was found waiting, at the end of a write that others must learn of at once (a new segment, a
 * catalog change), at the end of the event-loop turn in which it was taken (a microtask), and at
 * close or exit. Nested enters (a batch, a write inside a write) hold it once.
 */
export class WriterTurn {
  /** Enters not yet left (writes running, batches). */
  depth = 0;
  /**
   * The depth at which a write that leaves is complete, with nothing of it left half done: 0, or 1
   * inside the outermost batch (TurnStore.batch). A write inside a write leaves above it.
   */
  base = 0;
  /** This thread holds the mutex: while a write runs, and between writes until release(). */
  held = false;
  /** The write sequence as this process last saw or made it. */
  private seen: number;
  /** Listed for the release at the end of this event-loop turn (releaseTurnsTaken). */
  listed = false;
  /** The last release was for a waiter: the next take lets it go first (see lock()). */
  private handedOver = false;
  private readonly u32: Uint32Array;
  private readonly lockWord: TurnLock;
  /**
   * The first opener's recovery from a pile.coord kept as the last process of this boot left it
   * (HolderRepair.repairTouched, set by shareState): false where its rows can not be trusted.
   */
  recoverKept: (onProgress: PileOptions['onProgress']) => boolean = () => false;
  constructor(
    private readonly coord: CoordFile,
    private readonly host: TurnHost,
  ) {
    this.u32 = coord.u32;
    this.lockWord = coord.turnLock!;
    // A joining opener catches up at its first enter, whatever the sequence says.
    this.seen = -1;
  }

  /**
   * Enters the turn for a write: takes the mutex unless this thread holds it already.
   * @throws PILE_LOCKED when the mutex can not be taken (ENOTRECOVERABLE, or this thread holds it
   *   through another pile object), naming the file; what repair() or refresh() throws
   */
  enter(): void {
    if (this.depth++ !== 0 || this.held) return;
    let r: number;
    try {
      r = this.lock();
    } catch (err) {
      this.depth = 0;
      throw lockError(this.coord.file, err);
    }
    this.taken(r);
  }

  /** enter() for a timer: false (nothing held) when another thread holds the turn now. */
  tryEnter(): boolean {
    if (this.depth !== 0 || this.held) {
      this.depth++;
      return true;
    }
    let r: number;
    try {
      r = this.lockWord.tryTake();
    } catch {
      return false;
    }
    if (r === BUSY) return false;
    this.depth = 1;
    this.taken(r);
    return true;
  }

  /**
   * Leaves a write or batch. The outermost leave releases the turn when another thread waits for
   * it or this process made a change the others must learn of at once; otherwise this thread goes
   * on holding it until the end of the event-loop turn (or the next such leave).
   */
  leave(): void {
    if (--this.depth === this.base) this.completed();
    if (this.depth !== 0) return;
    if (Atomics.load(this.u32, WAITERS) !== 0) {
      this.release();
      this.handedOver = true;
    } else if (this.host.changed()) this.release();
  }

  /**
   * Publishes this process's state, moves the write sequence on and unlocks, if this thread holds
   * the turn and no write of it runs.
   * @throws what publishing throws (the mutex is unlocked all the same)
   */
  release(): void {
    if (!this.held || this.depth !== 0) return;
    this.held = false;
    const u32 = this.u32;
    try {
      this.host.publish();
      // Only the holder writes STATE_VALID: 0 only after a repair that this release publishes.
      if (u32[VALID] !== 1) Atomics.store(u32, VALID, 1);
      this.seen = Atomics.add(u32, SEQ, 1) + 1;
    } finally {
      this.lockWord.release();
    }
  }

  /**
   * Brings this process's view (roots, schemas, segments) up to what another process published,
   * without writing: for reads of roots and of segments made since. Nothing to do while this
   * thread holds the turn (nobody else wrote since it took it) or nothing moved.
   */
  view(): void {
    if (this.depth !== 0 || this.held || Atomics.load(this.u32, SEQ) === this.seen) return;
    this.enter();
    this.depth = 0;
    if (Atomics.load(this.u32, VALID) !== 1 || this.host.changed()) {
      this.release(); // repaired: publish it
      return;
    }
    this.held = false;
    this.lockWord.release();
  }

  /**
   * close() inside batch(fn) (TurnStore.closable made sure no write runs): the writes the batches
   * made so far are complete, each having returned, so the turn is released as at the end of the
   * outermost batch, and the batches' own leaves then find nothing to leave.
   */
  leaveBatches(): void {
    this.depth = 0;
    this.base = 0;
    this.release();
  }

  /** Lets go of the turn without publishing, if this thread holds it: an open or close that failed. */
  abandon(): void {
    this.depth = 0;
    if (!this.held) return;
    this.held = false;
    this.lockWord.release();
  }

  /** enter() for the opener that lays the pile out and loads it from its files itself: no catching up. */
  enterFresh(): void {
    // The word was laid out free (or made free for a file kept from dead processes): no death to find.
    this.lock();
    this.depth = 1;
    this.base = 0;
    this.hold();
    this.nextTurn();
  }

  /**
   * Locks the mutex, counted in the waiter word while it sleeps so that the holder hands the turn
   * over. A thread that has just handed the turn over to waiters first lets them take it (for up to
   * HAND_OVER_MS, in naps of 50 µs): the mutex is not fair, and a woken waiter would otherwise lose
   * it again and again to the thread that released it and writes on.
   */
  private lock(): number {
    if (this.handedOver) {
      this.handedOver = false;
      // A monotonic clock: a step of the wall clock must not cut the hand-over short or make it last for ever.
      const until = performance.now() + HAND_OVER_MS;
      while (Atomics.load(this.u32, WAITERS) !== 0 && Atomics.load(this.u32, SEQ) === this.seen && performance.now() < until) {
        Atomics.wait(NAP, 0, 0, 0.05);
      }
    }
    const r = this.lockWord.tryTake();
    if (r !== BUSY) return r;
    Atomics.add(this.u32, WAITERS, 1);
    try {
      return this.lockWord.take();
    } finally {
      Atomics.sub(this.u32, WAITERS, 1);
    }
  }

  private hold(): void {
    this.held = true;
    if (this.listed) return;
    this.listed = true;
    taken[takenCount++] = this;
    if (!endScheduled) {
      endScheduled = true;
      if (!exitHooked) {
        exitHooked = true;
        process.on('exit', releaseAtExit);
      }
      settled.then(releaseTurnsTaken);
    }
  }

  /** The mutex is this thread's (lock result `r`): catch up when another process wrote or a holder died. */
  private taken(r: number): void {
    this.hold();
    const u32 = this.u32;
    if (r === OWNER_DEAD && Atomics.load(u32, VALID) === 1) {
      // A fresh death: its repair rescans what the dead turn (still the number in TURN) touched.
      // Recorded before the state is marked invalid, so that a repairer that dies before either
      // leaves the next to record the same turn; one that dies after leaves the state invalid
      // and this record for the next, which rescans what it touched too.
      u32[REPAIR_FROM] = u32[TURN]!;
      u32[FULL_REPAIR] = 0;
      Atomics.store(u32, VALID, 0);
    }
    this.nextTurn();
    if (r === OWNER_DEAD || u32[SEQ] !== this.seen) this.catchUp(r === OWNER_DEAD);
    this.completed();
  }

  /**
   * Numbers the writes from now on with a new turn number (0 is never one: segments no turn wrote
   * hold it): at each take of the mutex (a repair's writes carry it), then after each complete write.
   */
  private nextTurn(): void {
    const turn = (this.u32[TURN]! + 1) >>> 0 || 1;
    this.u32[TURN] = turn;
    this.host.turn(turn);
    // Frees of this turn belong to a newer epoch than every read session begun before it was taken.
    this.coord.readers.advance();
  }

  /**
   * A write completed (or the take caught up): a holder that dies from now on left half done only
   * what it touches under the next number (see HolderRepair). The number moves on after the tail
   * is stored: a death in between rescans this number's segments too.
   */
  private completed(): void {
    const turn = (this.u32[TURN]! + 1) >>> 0 || 1;
    this.host.completed(turn);
    this.u32[TURN] = turn;
  }

  /**
   * Another process wrote, or the holder before died. A death is recorded in the file first
   * (STATE_VALID 0, the sequence moved) and the mutex marked consistent: if this process dies or
   * fails while repairing, the next holder sees the state still invalid and repairs again.
   */
  private catchUp(ownerDied: boolean): void {
    const u32 = this.u32;
    try {
      if (ownerDied) {
        Atomics.store(u32, VALID, 0);
        Atomics.add(u32, SEQ, 1);
      }
      if (Atomics.load(u32, VALID) !== 1) this.host.repair();
      else this.host.refresh();
      this.seen = Atomics.load(u32, SEQ);
    } catch (err) {
      this.abandon();
      throw err;
    }
  }
}

function lockError(file: string, err: unknown): PileError {
  if (err instanceof PileError) return err;
  const e = err as NodeJS.ErrnoException;
  return new PileError(
    'PILE_LOCKED',
    `can not take the writer turn of ${file} (word at offset ${COORD.OWNER}): ${e.code ?? ''} ${e.message} (a liveness mutex of another open that can not be checked)`,
  );
}
