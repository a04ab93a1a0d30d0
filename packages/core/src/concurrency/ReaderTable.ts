import { native } from '@pile/native';
import { COORD } from './CoordLayout';
import { PileError } from '../PileError';

// The reader table of pile.coord (docs/concurrency.md, "Read sessions and the
// reader table"; docs/format.md). Every open that maps pile.coord claims a slot and keeps it while
// it is open; a walk (entries(), a graph or list walk, a cache iteration) stores the pile's epoch in
// it for as long as it runs. A writer learns from the table which epochs live readers may still be
// reading at, to keep a block freed at or after the oldest of them from being handed out again.

const { EPOCH, SESSIONS, REUSE_GEN, READERS } = COORD;
export const READER_SLOTS = COORD.READER_SLOTS;
const SLOT_SIZE = COORD.READER_SLOT_SIZE;
/** In a slot: f64 epoch at +0 (valid while the flag is 1), u32 session flag at +8, u32 pid at +12. */
const SLOT_FLAG = 8;
const SLOT_PID = 12;

/** What ReaderTable needs of the mapped file (CoordFile), kept apart so that neither imports the other's class. */
export interface ReaderTableFile {
  readonly u32: Uint32Array;
  readonly f64: Float64Array;
  readonly file: string;
  /** The file descriptor whose open file description holds the slot's byte lock (-1 once closed). */
  readonly lockFd: number;
  /** Whether the writer turn names a holder that is gone (CoordFile.holderGone). */
  holderGone(): boolean;
}

/** No live session: every epoch is past it. */
export const NO_READER = Infinity;

/**
 * One open's slot in the reader table, and the writer's look at every slot.
 *
 * A slot is owned by whoever holds the OFD write lock of its first byte (READERS + 32 i): the lock
 * is the claim, so a slot whose byte is unlocked belongs to no live open, whatever pid number it
 * names. A session stores the epoch and sets the flag (plain stores), then raises the session count
 * with Atomics.add: the locked instruction orders the stores before every read of the walk that
 * follows (x86-64: a store may otherwise pass a later load). A writer moves the epoch on and runs a
 * locked instruction too before it loads the count and the slots (oldest()): either it sees the
 * session, or the session's reads come after the writer's changes and can not reach what it freed.
 */
export class ReaderTable {
  /** This open's slot, -1 while none is claimed. */
  slot = -1;
  /** Sessions of this open not yet ended: the slot's epoch is the first's (older, so safe for all). */
  depth = 0;
  /** REUSE_GEN when this open's outermost session began. */
  private beganGen = 0;

  constructor(private readonly host: ReaderTableFile) {}

  /** Whether the writer turn's holder died or closed holding it: the question of a reader that waits for a change (ReadState.rawWriterGone). */
  writerGone(): boolean {
    return this.host.holderGone();
  }

  /**
   * Claims a slot: the first whose byte lock can be taken and whose session flag is clear (a slot
   * left flagged by a dead open is cleared by whoever claims it or the next writer's oldest()).
   * @throws PILE_LOCKED when all 1024 slots are held by live opens, naming the file
   */
  claim(): void {
    const u32 = this.host.u32;
    const fd = this.host.lockFd;
    for (let i = 0; i < READER_SLOTS; i++) {
      const base = (READERS + i * SLOT_SIZE) >>> 2;
      if (!native.ofdLock(fd, READERS + i * SLOT_SIZE, 1, 'write', this.host.file)) continue;
      // Held now: no live open owns it. A session flag left by the dead owner is dropped first.
      dropSession(u32, base);
      u32[base + (SLOT_PID >>> 2)] = process.pid;
      this.slot = i;
      return;
    }
    throw new PileError(
      'PILE_LOCKED',
      `every slot of the reader table of ${this.host.file} (offset ${READERS}, ${READER_SLOTS} slots) is held by a live open: close some`,
    );
  }

  /** Begins a session (a walk): stores the epoch unless a session of this open runs already. */
  begin(): void {
    if (this.slot < 0 || this.depth++ !== 0) return;
    const base = (READERS + this.slot * SLOT_SIZE) >>> 2;
    this.host.f64[base >>> 1] = this.host.f64[EPOCH >>> 3]!;
    this.host.u32[base + (SLOT_FLAG >>> 2)] = 1;
    Atomics.add(this.host.u32, SESSIONS >>> 2, 1);
    // After the session is visible: a writer that gives pins up later moves it on, one before is seen here.
    this.beganGen = Atomics.load(this.host.u32, REUSE_GEN >>> 2);
  }

  /**
   * Whether a writer handed blocks back to the free lists while this open's session was live,
   * pinned or not (breakPins: it ran out of room and could not wait longer, or the last writer closed).
   */
  get broken(): boolean {
    return this.depth !== 0 && Atomics.load(this.host.u32, REUSE_GEN >>> 2) !== this.beganGen;
  }

  /** Tells every live session that its pin is given up (before the blocks are freed). For the holder of the writer turn. */
  breakPins(): void {
    Atomics.add(this.host.u32, REUSE_GEN >>> 2, 1);
  }

  /** Ends a session begun by begin(); the last one of this open clears the slot. */
  end(): void {
    if (this.slot < 0 || this.depth === 0 || --this.depth !== 0) return;
    dropSession(this.host.u32, (READERS + this.slot * SLOT_SIZE) >>> 2);
  }

  /** Ends every session of this open and gives the slot up (the byte lock goes with the file's close). */
  release(): void {
    if (this.slot < 0) return;
    this.depth = 1;
    this.end();
    native.ofdLock(this.host.lockFd, READERS + this.slot * SLOT_SIZE, 1, 'unlock', this.host.file);
    this.slot = -1;
  }

  /** The epoch now (what a session beginning now stores). */
  get epoch(): number {
    return this.host.f64[EPOCH >>> 3]!;
  }

  /**
   * Moves the epoch on: frees made after it belong to the new epoch. Only the holder of the writer
   * turn calls it (the epoch is an f64 stored plainly, so one writer at a time).
   */
  advance(): number {
    const e = this.host.f64[EPOCH >>> 3]! + 1;
    this.host.f64[EPOCH >>> 3] = e;
    return e;
  }

  /**
   * Whether a session may be open (dead ones count until cleared), loaded with a locked
   * instruction: the writer's side of the fence (see the class). One per retire-or-free.
   */
  anySession(): boolean {
    return Atomics.add(this.host.u32, SESSIONS >>> 2, 0) !== 0;
  }

  /** Open sessions as counted in pile.coord (dead ones included until a writer clears them). */
  get sessions(): number {
    return Atomics.load(this.host.u32, SESSIONS >>> 2);
  }

  /**
   * The oldest epoch a live session holds, or NO_READER: a block freed at an epoch before it can be
   * reused, one freed at or after it can not. Clears the flags of slots whose byte lock is free
   * (their opens died in a session: a SIGKILLed process pins nothing from the next call on). Costs
   * one locked instruction and a count load when no session is open; else a pass over the slots
   * and one fcntl(F_OFD_GETLK) per flagged slot of another open. For the holder of the writer turn.
   */
  oldest(): number {
    const u32 = this.host.u32;
    // The fence of the Dekker pair described on the class: the writer's stores before, these loads after.
    if (Atomics.add(u32, SESSIONS >>> 2, 0) === 0) return NO_READER;
    const f64 = this.host.f64;
    let oldest = NO_READER;
    for (let i = 0; i < READER_SLOTS; i++) {
      const base = (READERS + i * SLOT_SIZE) >>> 2;
      if (u32[base + (SLOT_FLAG >>> 2)] !== 1) continue;
      const epoch = f64[base >>> 1]!;
      if (i !== this.slot && !this.held(i)) {
        dropSession(u32, base);
        continue;
      }
      // The epoch is stored before the flag and loaded after it (both in program order on x86-64): it is
      // this session's, or a later session's of the same slot, never older.
      if (epoch < oldest) oldest = epoch;
    }
    return oldest;
  }

  /** Whether a live open holds slot `i`'s byte lock (this open's own lock does not show through its own file description). */
  private held(i: number): boolean {
    return native.ofdHolder(this.host.lockFd, READERS + i * SLOT_SIZE, 1, 'write', this.host.file) !== null;
  }
}

/** Clears a slot's session flag once (Atomics: its owner and a writer finding it dead may race) and counts it out. */
function dropSession(u32: Uint32Array, base: number): void {
  if (Atomics.compareExchange(u32, base + (SLOT_FLAG >>> 2), 1, 0) === 1) Atomics.sub(u32, SESSIONS >>> 2, 1);
}

/** What holds read sessions: a pile (ReadState.beginRead / endRead). */
export interface SessionHolder {
  beginRead(): void;
  endRead(): void;
}

/**
 * `walk` inside one read session of `pile` (docs/concurrency.md, "Read sessions"): begun at the
 * first next(), ended when the walk ends, throws, or is closed early (break, return()). A walk left
 * unfinished and never closed holds its session until the pile is closed.
 */
export function* inReadSession<T>(pile: SessionHolder, walk: Iterable<T>): IterableIterator<T> {
  pile.beginRead();
  try {
    yield* walk;
  } finally {
    pile.endRead();
  }
}
