import { NO_SEQ_WORDS, ReadRetry, SEQ_WORD } from './ChangeSeq';
import { PileError } from '../PileError';
import type { PilePointer } from '../records/PilePointer';
import type { ReaderTable } from './ReaderTable';
import type { RetiredList } from '../alloc/RetiredList';
import type { Segment } from '../storage/Segment';
import type { WriterTurn } from './WriterTurn';

/**
 * What a read of a RecordStore leaves for the code after it, and the check that the read met no
 * writer's change (docs/concurrency.md, "Checked reads"). The base class of RecordStore: Pile is
 * still the one concrete class, so the read paths stay monomorphic.
 */
export abstract class ReadState {
  /** @internal True once the pile is closed. */
  closed = false;
  /**
   * @internal Whether reads load the change sequences (ChangeSeq.ts): only where another process
   * may change records while this one reads them: read-only opens, and writable opens that take
   * the writer turn with others (pile.coord mapped). A writer alone (in memory, or a process that
   * could not map pile.coord and so holds the writers' lock exclusively) never meets a change.
   */
  checkReads = false;
  /**
   * The writer turn of a read-write mapped pile (docs/concurrency.md): writable() enters it, and
   * TurnStore leaves it when the write is done; undefined for in-memory and read-only piles.
   */
  protected turn: WriterTurn | undefined;
  /** @internal This open's slot in pile.coord's reader table; undefined without pile.coord as shared memory. */
  readers: ReaderTable | undefined;
  /** @internal The blocks freed while sessions were open (deferred reuse); for a read-write open with pile.coord shared. */
  retired: RetiredList | undefined;

  // Scratch of the last resolve(): the head block, and the block holding the data (== head unless
  // linked). Fields rather than a result object: resolve() runs on every read and allocates
  // nothing. Each is read right after the resolve() (or quickLocate) that set it, before any
  // call that may resolve again (caller code runs before a resolve, never between).
  /** @internal */
  hSeg!: Segment;
  /** @internal */
  hOff = 0;
  /** @internal */
  dSeg!: Segment;
  /** @internal */
  dOff = 0;
  // The change sequences (ChangeSeq.ts) the last resolve() loaded before it read the head block
  // (sU32, sSeq) and the body block (bU32, bSeq); readSettled() loads them again after the read.
  /** @internal */
  sU32: Uint32Array = NO_SEQ_WORDS;
  /** @internal */
  sSeq = 0;
  /** @internal */
  bU32: Uint32Array = NO_SEQ_WORDS;
  /** @internal */
  bSeq = 0;

  protected open(): void {
    if (this.closed) throw closedError();
  }

  /**
   * Begins a read session: until the matching {@link endRead}, no block freed from now on by any
   * process is handed out again (docs/concurrency.md, "Read sessions"). A walk over many records
   * (entries(), graph and list walks, cache iteration) holds one, so that it never meets a block
   * reused for another record, unless a writer that ran out of room gave the pin up (see
   * {@link readSessionBroken}). Sessions of one open nest. Costs two plain stores, one locked
   * instruction and a load; nothing when the pile has no pile.coord (in memory, or alone). Call endRead in a finally.
   */
  beginRead(): void {
    this.readers?.begin();
  }

  /**
   * True while this open is in a read session (beginRead) during which a writer handed freed blocks
   * back before the session ended: it had no room left (maxMemory reached, a cache evicting) and
   * waited for the session for 100 ms in vain, or the last writer closed. From then on the session
   * protects nothing: its reads are still checked (never a torn or wrong value; at worst
   * PILE_STALE_POINTER for a record deleted meanwhile, or a walk that yields a record put during it),
   * as reads outside a session are. False outside a session (docs/concurrency.md, "Deferred reuse").
   */
  get readSessionBroken(): boolean {
    return this.readers?.broken === true;
  }

  /** Ends a session begun by {@link beginRead} (after close(), nothing to do). */
  endRead(): void {
    this.readers?.end();
    // A writer's own walk pinned what it freed meanwhile (a loop that deletes what entries()
    // yields): handed back now, not at the turn's release, so that stats and compact() after the
    // loop see it free.
    if (this.retired?.pending !== true || this.readers!.depth !== 0 || this.turn === undefined || this.closed) return;
    try {
      this.turn.enter();
      try {
        this.retired.reclaim();
      } finally {
        this.turn.leave();
      }
    } catch {
      // The turn could not be taken: the next release of the turn reclaims them.
    }
  }

  /** @internal Takes up what other processes published (Catalog's host): see WriterTurn.view. */
  follow(): void {
    this.turn?.view();
  }

  /** @internal Forgets the change sequences of the last read (a read that touches no segment compares these). */
  clearSeqs(): void {
    this.sU32 = NO_SEQ_WORDS;
    this.sSeq = 0;
    this.bU32 = NO_SEQ_WORDS;
    this.bSeq = 0;
  }

  /**
   * @internal The head block's change sequence, before the read: a plain load (a compiler may only
   * merge it with an earlier load of the word, which is as good; V8 keeps it before the loads after it).
   */
  seqBefore(u32: Uint32Array): void {
    this.sU32 = u32;
    this.sSeq = u32[SEQ_WORD]!;
  }

  /** @internal The body block's change sequence, before the body is read (see seqBefore). */
  bodySeqBefore(u32: Uint32Array): void {
    this.bU32 = u32;
    this.bSeq = u32[SEQ_WORD]!;
  }

  /**
   * Whether nothing changed the blocks the last resolve() named since it loaded their change
   * sequences (ChangeSeq.ts): a value read meanwhile is whole and an error it raised is real.
   * @internal
   */
  readSettled(): boolean {
    if (!this.checkReads) return true;
    const s = this.sSeq;
    const b = this.bSeq;
    return ((s | b) & 1) === 0 && Atomics.load(this.sU32, SEQ_WORD) === s && Atomics.load(this.bU32, SEQ_WORD) === b;
  }

  /**
   * Whether the raw block the last {@link RecordStore.rawSeek} found was not changed since: true
   * while no writer has changed a block of its segment since rawSeek loaded the segment's change
   * sequence (docs/concurrency.md, "Checked reads"). Packages that read raw blocks in place
   * (@pile/cache) call it after they have read what they need, and read again when it is false;
   * an error the read raised is real only when this is true. Always true for a writable open, the
   * only writer of its pile, whose reads never meet a change. One Atomics.load in a read-only open.
   */
  rawSettled(): boolean {
    if (!this.checkReads) return true;
    const s = this.sSeq;
    return (s & 1) === 0 && Atomics.load(this.sU32, SEQ_WORD) === s;
  }

  /**
   * Whether the process holding the writer turn died or closed holding it (docs/concurrency.md,
   * "Checked reads"): a change it left open, a segment's or a cache table's change mark odd, lasts
   * until the next writer takes the turn and repairs it, so a read waits for that at most 1 s
   * (ReadRetry then throws PILE_LOCKED). False where no other process writes (pile.coord not shared memory). Costs
   * an atomic load, and a trylock of the holder's liveness mutex while the turn is held.
   */
  rawWriterGone(): boolean {
    return this.readers?.writerGone() === true;
  }

  /**
   * Makes the read `once(ptr, a, b)` until one attempt meets no change (readSettled), pausing
   * between attempts (ReadRetry); returns its value or throws its error.
   * @throws PILE_LOCKED when a writer stays in the middle of a change (see ReadRetry), else what `once` throws
   * @internal
   */
  reread<A, B>(once: (this: this, ptr: PilePointer, a: A, b: B) => unknown, ptr: PilePointer, a: A, b: B): unknown {
    const retry = new ReadRetry(this);
    for (;;) {
      const odd = (this.sSeq & 1) === 0 && (this.bSeq & 1) !== 0;
      retry.pause(`a read of pointer ${ptr}`, odd ? this.bU32 : this.sU32, odd ? this.bSeq : this.sSeq);
      let value: unknown;
      try {
        value = once.call(this, ptr, a, b);
      } catch (err) {
        if (this.closed || this.readSettled()) throw err;
        continue;
      }
      if (this.readSettled()) return value;
    }
  }
}

/** The error of every call on a closed pile. */
export function closedError(): PileError {
  return new PileError('PILE_CLOSED', 'the pile is closed');
}
