import { faultPoints } from './FaultPoints';

// The undo log of the write in progress (docs/concurrency.md, "A holder's death"; docs/format.md):
// the old bytes of every store a write makes where a dead holder's repair takes the pile as it
// stands (below the tail's last fold, and the rows, free-list links and retired list in
// pile.coord). A repair puts them back, newest first, and rescans only from the fold on, instead
// of every segment the dead write stamped. The log lives in pile.coord, emptied at the end of each
// complete write (WriterTurn.completed). A write that takes a path not logged here, or that logs
// more than the log holds, marks the log not to be trusted before its first store there; the
// repair then rescans what the dead turn stamped, as it did before the log.

/** Where the log and what it may name lie in pile.coord (CoordFile's COORD). */
export interface UndoPlaces {
  /** u32: 0 not to be trusted; n + 1 with n entries. */
  readonly state: number;
  /** The entries, 16 bytes each, from here to `end`. */
  readonly log: number;
  readonly end: number;
  /** The f64 slots a logged write may change: the segment rows, the tail at the last fold, the retired list's head. */
  readonly rows: number;
  readonly fold: number;
  readonly retired: number;
}

/**
 * A pile.coord's undo log as the holder of the writer turn writes it. Each entry is the place of
 * an 8-byte word (a pile address, or minus a byte offset of pile.coord) and its old bytes as two
 * u32 (not an f64: payload bytes read as a NaN may not survive a float store). The entry is
 * written before the count that makes it part of the log, and both before the store it guards.
 * A pile without a shared pile.coord has a log that is never trusted and never written (off()).
 */
export class UndoLog {
  /** Entries logged since the last complete write; -1: the log is not trusted until the next one. */
  n = -1;
  /**
   * Logged paths running (Allocator.touch marks the log not to be trusted outside them): a delete
   * or an in-place set (RecordStore.release, Journal.replaceRecord), a cut from a free block or a
   * trim (Allocator). Back to 0 at each complete write, whatever threw.
   */
  armed = 0;
  /** pile.coord's state word may differ from an empty trusted log (it was never reset by this process, or was marked). */
  dirty = true;
  /** Entries the log holds. */
  readonly capacity: number;
  private readonly stateAt: number;
  private readonly logF64: number;
  private readonly logU32: number;

  constructor(
    private readonly u32: Uint32Array,
    private readonly f64: Float64Array,
    private readonly places: UndoPlaces,
    private readonly segmentSize: number,
  ) {
    this.stateAt = places.state >>> 2;
    this.logF64 = places.log >>> 3;
    this.logU32 = places.log >>> 2;
    this.capacity = (places.end - places.log) >>> 4;
  }

  /** The log of a pile that writes without a shared pile.coord: nothing is ever logged. */
  static off(): UndoLog {
    const buf = new ArrayBuffer(64);
    return new UndoLog(new Uint32Array(buf), new Float64Array(buf), { state: 0, log: 16, end: 16, rows: 0, fold: 0, retired: 0 }, 1);
  }

  /** Logs the 8-byte word at byte `off` (a multiple of 8) of segment `segIdx`, whose words are `seg`. */
  word(seg: Uint32Array, segIdx: number, off: number): void {
    if (this.n < 0) return;
    const w = off >>> 2;
    this.add(segIdx * this.segmentSize + off, seg[w]!, seg[w + 1]!);
  }

  /** word() of `count` words from `off` on. */
  words(seg: Uint32Array, segIdx: number, off: number, count: number): void {
    if (this.n < 0) return;
    if (this.n + count > this.capacity) return this.distrust();
    for (let i = 0; i < count; i++) this.word(seg, segIdx, off + 8 * i);
  }

  /**
   * Before a cut from the free block at byte `off`: its header and links (4 words), the header of
   * the rest at `off + rest` when `rest` > 0, and row slot `row`. The allocator's hot paths log
   * through one such call each, made only while `n >= 0`, never by a pile whose log is off()
   * (Allocator.carve: the calls inline cost an in-memory pile's cache put about 1 %, docs/benchmarks.md).
   */
  cut(seg: Uint32Array, segIdx: number, off: number, rest: number, row: number): void {
    this.words(seg, segIdx, off, 4);
    if (rest > 0) this.words(seg, segIdx, off + rest, 2);
    this.row(row);
  }

  /** Row slots `i` to `i + count - 1`. */
  rows(i: number, count: number): void {
    for (let k = 0; k < count; k++) this.row(i + k);
  }

  /** words(), then row(`row`): a block's words and the row slot its write changes. */
  block(seg: Uint32Array, segIdx: number, off: number, count: number, row: number): void {
    this.words(seg, segIdx, off, count);
    this.row(row);
  }

  /** Logs slot `i` of the segment rows (Allocator.rows). */
  row(i: number): void {
    if (this.n >= 0) this.slot(this.places.rows + 8 * i);
  }

  /** Logs the tail at the last fold (COORD.FOLD_TAIL). */
  fold(): void {
    if (this.n >= 0) this.slot(this.places.fold);
  }

  /** Logs the retired list's head (COORD.RETIRED_HEAD). */
  retiredHead(): void {
    if (this.n >= 0) this.slot(this.places.retired);
  }

  private slot(at: number): void {
    this.add(-at, this.u32[at >>> 2]!, this.u32[(at >>> 2) + 1]!);
  }

  private add(where: number, lo: number, hi: number): void {
    const n = this.n;
    if (n >= this.capacity) return this.distrust();
    this.f64[this.logF64 + 2 * n] = where;
    const u = this.logU32 + 4 * n + 2;
    this.u32[u] = lo;
    this.u32[u + 1] = hi;
    this.n = n + 1;
    this.u32[this.stateAt] = n + 2;
    faultPoints.hit?.('undo-logged');
  }

  /** From here to the next complete write, a repair must not trust the log: before the first store of a path not logged. */
  distrust(): void {
    if (this.n < 0) return;
    this.u32[this.stateAt] = 0;
    this.n = -1;
    this.dirty = true;
  }

  /** This process stops logging until its next complete write, leaving pile.coord's log as it is: a repair reads it. */
  forget(): void {
    this.n = -1;
    this.dirty = true;
    this.armed = 0;
  }

  /**
   * A write completed: before the tail is stored (SharedState.completed), the log is marked not to
   * be trusted when it holds anything; true then, and emptied() follows the store. A death between
   * the two leaves the repair the turn's stamps, as one before the log did.
   */
  completing(): boolean {
    this.armed = 0;
    if (this.n === 0 && !this.dirty) return false;
    this.u32[this.stateAt] = 0;
    return true;
  }

  /** Empties the log (after completing()): the next write logs from its first entry. */
  emptied(): void {
    this.u32[this.stateAt] = 1;
    this.n = 0;
    this.dirty = false;
  }

  /**
   * The repair's side, on pile.coord's words `u32` (CoordFile.u32): puts the old bytes of a trusted log back,
   * newest first, and returns how many entries it had; -1 when the log is not trusted or names a
   * place no logged write stores to (nothing is changed then). The log stays as it is: a repairer
   * that dies meanwhile leaves the next one the same log, and putting old bytes back twice is
   * putting them back once. `segment(i)` gives the words of segment i, undefined past the pile's
   * (a segment the dead turn added is rescanned whole).
   */
  static undo(u32: Uint32Array, places: UndoPlaces, segmentSize: number, segment: (i: number) => Uint32Array | undefined): number {
    const state = u32[places.state >>> 2]!;
    const capacity = (places.end - places.log) >>> 4;
    if (state === 0 || state > capacity + 1) return -1;
    const n = state - 1;
    const f64 = new Float64Array(u32.buffer, u32.byteOffset, u32.length >>> 1);
    const logF64 = places.log >>> 3;
    const logU32 = places.log >>> 2;
    for (let k = 0; k < n; k++) {
      const where = f64[logF64 + 2 * k]!;
      const at = -where;
      const ok =
        Number.isSafeInteger(where) &&
        where % 8 === 0 &&
        (where >= 0
          ? where % segmentSize >= 64
          : at === places.fold || at === places.retired || (at >= places.rows && at + 8 <= u32.byteLength));
      if (!ok) return -1;
    }
    for (let k = n - 1; k >= 0; k--) {
      const where = f64[logF64 + 2 * k]!;
      let words: Uint32Array | undefined = u32;
      let w = -where >>> 2;
      if (where >= 0) {
        const s = Math.floor(where / segmentSize);
        words = segment(s);
        w = (where - s * segmentSize) >>> 2;
      }
      if (words === undefined || w + 1 >= words.length) continue;
      faultPoints.hit?.('undo-restoring');
      words[w] = u32[logU32 + 4 * k + 2]!;
      words[w + 1] = u32[logU32 + 4 * k + 3]!;
    }
    return n;
  }
}
