import { PileError } from '../PileError';

/**
 * The change sequence of a segment: a seqlock that lets a process read records without a lock
 * while a writer in another process changes them in place (docs/concurrency.md, "Checked reads").
 *
 * It is the u32 at byte 20 of the segment's header (a word that format 2 and 3 leave reserved, 0:
 * no format change). A writer makes it odd before it changes a block that a reader may be reading
 * (an in-place set, a record turned into a link, a delete and the merges of the block it frees)
 * and even again after. A reader loads it before it reads a block's header and again after it has
 * copied or decoded the value; an odd or a changed word means the read may be torn, and the read
 * is made again. 32 bits: a reader is fooled only if exactly 2^31 changes of one segment fall
 * inside one read.
 *
 * The reader's load after its read is Atomics.load, or in the typed get and field() a plain load
 * through another view of the segment (see SEQ_BYTE). The segments are not SharedArrayBuffers (they
 * are mappings made by @pile/native), so the ECMAScript memory model promises nothing across
 * processes; what is relied on is what V8 does: an Atomics call is never merged with another load
 * nor moved across the plain loads and stores beside it, and on x86-64 the loads of another core
 * keep program order (TSO: loads are not reordered with older loads, stores not with older stores).
 * On a weaker CPU (arm64) the reader's second load would need a load fence that JavaScript can not
 * express; Pile's prebuilt binaries are x86-64 only.
 *
 * The writer's two stores are plain typed-array stores on x86-64 (see PLAIN_STORES), Atomics.store
 * elsewhere.
 */
const SEQ_WORD = 5;

/**
 * Byte offset of the change sequence. The typed get and field() (the hot checked reads) load the
 * word again after their read as `seg.view.getUint32(SEQ_BYTE, true)`: a plain load through the
 * segment's DataView, where the load before the read went through its Uint32Array. Atomics.load
 * is not inlined by V8 (each call runs the AtomicsLoad builtin, which validates the array again):
 * it made a mapped pile's random typed get several per cent slower than this load does
 * (benchmarks/results/comparisons.md, the section on the mapped get's check). The plain load keeps
 * what the check needs: a compiler forwards a load only from an earlier access to the same base
 * and index, and it can not know that two views share memory, so the second load is never merged
 * with the first; V8 keeps loads of typed arrays and DataViews in program order on the effect
 * chain; and x86-64 keeps loads in order between cores (TSO), as for Atomics.load. The other
 * checks (ReadState.readSettled, the cache's) still use Atomics.load.
 */
const SEQ_BYTE = SEQ_WORD * 4;

/**
 * On x86-64 the writer marks with plain stores. Atomics.store is sequentially consistent, so V8
 * compiles it to xchg, a full barrier that waits until every store before it has reached the
 * cache: a put that has just written an entry and an index slot at random places of a large pile
 * stalls there for cache misses, about 60 ns per mark in a loop of two random stores between two
 * marks (125 ns per pair, against 5 ns for plain stores). A seqlock's writer needs only that its
 * stores become visible in program order, which x86-64 gives every store (TSO), and that the
 * compiler neither reorders nor drops them: V8 keeps typed-array stores in program order on the
 * effect chain, and its store-store elimination (TurboFan's, and Turboshaft's in Node 22 and 24)
 * removes only stores at fixed offsets of objects on the V8 heap, never an element store into
 * memory outside it. The torn-read tests (checked-reads, cache-contention, graph-readers) would fail
 * if either failed.
 */
const PLAIN_STORES = process.arch === 'x64';

/** What a read that touched no segment compares: all zeros, never changed. */
const NO_SEQ_WORDS = new Uint32Array(SEQ_WORD + 1);

/** Sleeper of the reader's back-off: nobody ever wakes it, Atomics.wait just times out. */
const SLEEPER = new Int32Array(new SharedArrayBuffer(4));

/** Reads made again without pausing: a writer's change of one block takes about a microsecond. */
const EAGER_ATTEMPTS = 16;
/** A mark that stays odd and unmoved this long was left by a writer that died or is stopped. */
const STUCK_MS = 1000;
/** Reads that keep meeting changes give up after this long (a writer that changes one segment non-stop). */
const GIVE_UP_MS = 10_000;

/**
 * Marks `u32`'s segment as being changed; false when it already is (a change that encloses this
 * one, in the same segment, ends it).
 */
function beginChange(u32: Uint32Array): boolean {
  const s = u32[SEQ_WORD]!;
  if ((s & 1) !== 0) return false;
  moveOn(u32, s);
  return true;
}

/** Ends the change {@link beginChange} began (when it returned true). */
function endChange(u32: Uint32Array, began: boolean): void {
  if (began) moveOn(u32, u32[SEQ_WORD]!);
}

/** The writer's store of the word after `s` (see PLAIN_STORES). */
function moveOn(u32: Uint32Array, s: number): void {
  if (PLAIN_STORES) u32[SEQ_WORD] = (s + 1) >>> 0;
  else Atomics.store(u32, SEQ_WORD, (s + 1) >>> 0);
}

/**
 * A mark left odd by a writer that died mid-change is moved on to even (the repair the change
 * needed is recovery's), so that readers stop waiting. Safe only where no other writer can be in
 * a change: under the writer turn (the repair after a holder died, the first opener's load) or in a
 * writer that writes alone (Segment.clearDeadMark).
 */
function clearDeadMark(u32: Uint32Array): void {
  const s = u32[SEQ_WORD]!;
  if ((s & 1) !== 0) Atomics.store(u32, SEQ_WORD, (s + 1) >>> 0);
}

/** What a reader asks of its pile while it waits: whether the writer turn's holder is gone (ReadState.rawWriterGone). */
interface WriterLiveness {
  rawWriterGone(): boolean;
}

/**
 * Back-off of a reader whose read met a change: the state of its retries. `pause(words, seq)`
 * is called before each new attempt with the word and the value that made the last one fail.
 * `pile`: asked at each pause past the eager attempts whether the writer holding the turn died.
 */
class ReadRetry {
  private attempt = 0;
  /** performance.now() at the pause that first found the turn's holder gone (-1: not gone at the last pause). */
  private goneSince = -1;
  /** performance.now() at the first pause (-1 before): a monotonic clock, so that a step of the wall clock neither ends the wait early nor makes it last for ever. */
  private started = -1;
  private stuckWords: Uint32Array = NO_SEQ_WORDS;
  private stuckSeq = -1;
  private stuckSince = 0;

  constructor(private readonly pile?: WriterLiveness) {}

  /**
   * @throws PILE_LOCKED when attempts kept failing for STUCK_MS after the writer holding the turn
   * was found dead (a change it left open lasts until the next writer repairs it, and none came);
   * when the segment has stayed marked as being changed for STUCK_MS (its writer is stopped), or
   * reads kept meeting changes for GIVE_UP_MS
   */
  pause(what: string, words: Uint32Array, seq: number): void {
    this.attempt++;
    if (this.attempt <= EAGER_ATTEMPTS) return;
    const now = performance.now();
    if (this.started < 0) this.started = now;
    const current = Atomics.load(words, SEQ_WORD);
    // An attempt that failed after the holder's death was seen met a change it left open (maybe in
    // another word than `words`: a cache read watches its table's seqlock, the entry's segment may
    // be the odd one), which only the next writer's repair ends. In a pile that other processes
    // write, that comes within milliseconds (their waiter finds the death, repairs, publishes), and
    // the read then succeeds; so the read waits for it as for a stuck mark, whichever word it watches.
    if (this.pile?.rawWriterGone() === true) {
      if (this.goneSince < 0) this.goneSince = now;
      else if (now - this.goneSince >= STUCK_MS) throw deadError(what, now - this.goneSince);
    } else this.goneSince = -1;
    if ((current & 1) !== 0 && words === this.stuckWords && current === this.stuckSeq) {
      if (now - this.stuckSince >= STUCK_MS) throw stuckError(what, current, now - this.stuckSince);
    } else {
      this.stuckWords = words;
      this.stuckSeq = current;
      this.stuckSince = now;
    }
    if (now - this.started >= GIVE_UP_MS) throw stuckError(what, seq, now - this.started);
    // 10 µs, doubling to 1 ms: the writer runs meanwhile, even on one core.
    Atomics.wait(SLEEPER, 0, 0, Math.min(1, 0.01 * 2 ** Math.min(7, this.attempt - EAGER_ATTEMPTS - 1)));
  }
}

function stuckError(what: string, seq: number, ms: number): PileError {
  return new PileError(
    'PILE_LOCKED',
    `${what} met a segment being changed by a writer for ${Math.round(ms)} ms (change sequence ${seq}): the writer died or is stopped in the middle of a change; the next writer to take the turn or open the pile repairs a dead one (docs/concurrency.md, "Checked reads")`,
  );
}

function deadError(what: string, ms: number): PileError {
  return new PileError(
    'PILE_LOCKED',
    `${what} met a change left open by a writer that died holding the writer turn, and no writer repaired it in ${Math.round(ms)} ms: it stays open until the next writer takes the turn (any write, or a writable open) and repairs it (docs/concurrency.md, "Checked reads")`,
  );
}

export { SEQ_WORD, SEQ_BYTE, NO_SEQ_WORDS, beginChange, endChange, clearDeadMark, ReadRetry, type WriterLiveness };
