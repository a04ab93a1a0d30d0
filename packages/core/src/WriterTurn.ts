import { native } from '@pile/native';
import { COORD, type CoordFile } from './CoordFile';
import { PileError } from './PileError';

const OWNER_DEAD = native.MUTEX.OWNER_DEAD;
const SEQ = COORD.WRITE_SEQ >>> 2;
const VALID = COORD.STATE_VALID >>> 2;

/** What the turn brings up to date, publishes and repairs: the pile (see SharedState). */
export interface TurnHost {
  /** Brings what this process caches in JS up to the state published in pile.coord. */
  refresh(): void;
  /** Publishes this process's state to pile.coord (the write sequence is the turn's). */
  publish(): void;
  /** Brings the pile back from the files after a holder died, as an unclean open does; publishes. */
  repair(): void;
}

/**
 * The writer turn of issue 17: one thread of one process writes at a time, any may take the turn.
 * enter() takes the writer mutex of pile.coord (sleeping in the kernel while another holds it),
 * repairs what a dead holder left, and refreshes this process's view when another process wrote
 * since (the write sequence moved); leave() publishes this process's state, moves the sequence on
 * and unlocks. Nested enters (a batch, a write inside a write) hold it once.
 */
export class WriterTurn {
  /** Enters not yet left: the mutex is held while this is above 0. */
  depth = 0;
  /** The write sequence as this process last saw or made it. */
  private seen: number;
  private readonly u32: Uint32Array;

  constructor(
    private readonly coord: CoordFile,
    private readonly host: TurnHost,
  ) {
    this.u32 = coord.u32;
    // A joining opener catches up at its first enter, whatever the sequence says.
    this.seen = -1;
  }

  /**
   * @throws PILE_LOCKED when the mutex can not be taken (ENOTRECOVERABLE, or this thread holds it
   *   through another pile object), naming the file; what repair() or refresh() throws
   */
  enter(): void {
    if (this.depth++ !== 0) return;
    let r: number;
    try {
      r = this.coord.mutex!.lock();
    } catch (err) {
      this.depth = 0;
      throw lockError(this.coord.file, err);
    }
    if (r === OWNER_DEAD || this.u32[SEQ] !== this.seen) this.catchUp(r === OWNER_DEAD);
  }

  /** enter() for a timer: false (nothing held) when another thread holds the turn now. */
  tryEnter(): boolean {
    if (this.depth !== 0) {
      this.depth++;
      return true;
    }
    let r: number;
    try {
      r = this.coord.mutex!.tryLock();
    } catch {
      return false;
    }
    if (r === native.MUTEX.BUSY) return false;
    this.depth = 1;
    if (r === OWNER_DEAD || this.u32[SEQ] !== this.seen) this.catchUp(r === OWNER_DEAD);
    return true;
  }

  /**
   * Brings this process's view (roots, schemas, segments) up to what another process published,
   * without writing: for reads of roots. Nothing to do while this thread holds the turn or nothing moved.
   */
  view(): void {
    if (this.depth !== 0 || Atomics.load(this.u32, SEQ) === this.seen) return;
    this.enter();
    if (Atomics.load(this.u32, VALID) !== 1) {
      this.leave(); // repaired: publish it
      return;
    }
    this.depth = 0;
    this.coord.mutex!.unlock();
  }

  /** Lets go of the turn without publishing, if this thread holds it: an open or close that failed. */
  abandon(): void {
    if (this.depth === 0) return;
    this.depth = 0;
    try {
      this.coord.mutex!.unlock();
    } catch {
      /* not held after all */
    }
  }

  /** enter() for the opener that lays the pile out and loads it from its files itself: no catching up. */
  enterFresh(): void {
    this.coord.mutex!.lock();
    this.depth = 1;
  }

  leave(): void {
    if (--this.depth !== 0) return;
    try {
      this.host.publish();
      Atomics.store(this.u32, VALID, 1);
      this.seen = Atomics.add(this.u32, SEQ, 1) + 1;
    } finally {
      this.coord.mutex!.unlock();
    }
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
        this.coord.mutex!.consistent();
      }
      if (Atomics.load(u32, VALID) !== 1) this.host.repair();
      else this.host.refresh();
      this.seen = Atomics.load(u32, SEQ);
    } catch (err) {
      this.depth = 0;
      this.coord.mutex!.unlock();
      throw err;
    }
  }
}

function lockError(file: string, err: unknown): PileError {
  const e = err as NodeJS.ErrnoException;
  return new PileError(
    'PILE_LOCKED',
    `can not take the writer mutex of ${file} at offset ${COORD.MUTEX}: ${e.code ?? ''} ${e.message} (a second pile object of this thread holding the turn, or a mutex left unrecoverable)`,
  );
}
