import {
  GEN_MASK,
  KIND_FREE,
  MIN_BLOCK_SIZE,
  SEGMENT_HEADER_SIZE,
  STATE_FREE,
  STATE_RESERVED,
  genCheck,
  genOf,
  sizeCheck,
  stateOf,
  word1,
} from '../storage/BlockFormat';
import { faultPoints } from '../recovery/FaultPoints';
import { PileError } from '../PileError';
import { MAX_SEGMENTS, type PointerFormat } from '../records/PointerFormat';
import type { Segment } from '../storage/Segment';
import { R_ALLOC, R_SPAN, ROW, foldTail } from './SegmentRows';
import { NUM_CLASSES, sizeClass } from './SizeClass';
import { UndoLog } from '../recovery/UndoLog';
import { firstSeg, nextNonEmpty, populateAhead } from './FreeClasses';

const FIT_SCAN_LIMIT = 16;
/** Dirty marks of a segment since the last checkpoint (kept in pile.meta, see docs/format.md). */
export const MARK_CLEAN = 0;
/** Written only at or past the checkpoint's tail: recovery scans from there to the segment's end. */
export const MARK_TAIL = 1;
/** Written anywhere: recovery must scan the whole segment. */
export const MARK_WHOLE = 2;
/** Added since the checkpoint: always scanned whole, never marked. */
const MARK_NEW = 3;

/**
 * Block allocator over a list of segments. Free blocks form doubly linked lists by segment and size
 * class, threaded through the free blocks themselves (addresses as float64 at +16/+24), so
 * the allocator holds no per-block JS objects. An address is `segment * segmentSize + offset`.
 * Each segment's list heads and counters form its row (SegmentRows.ts), which a checkpoint saves and recovery restores
 * segment by segment; the pile's counters below are their sums (both with the pend* counters of the tail's segment added).
 *
 * Generations: a new block gets the generation of the free block it was cut from plus one,
 * and merged free blocks keep the larger generation. So a block ever created at a given
 * offset has a larger generation than any dead block that started there, and a stale
 * pointer's tag can only match again after the generation wraps (2^tagBits reuses).
 */
export class Allocator {
  /** Segment rows (SegmentRows.ts); a read-write mapped pile's are pile.coord's (SharedState.share), others grow (ensureRows). */
  rows: Float64Array<ArrayBufferLike> = new Float64Array(ROW * 4);
  /** @internal Bit per class: some segment has a free list of it. */
  readonly nonEmpty = new Uint32Array(Math.ceil(NUM_CLASSES / 32));
  /** @internal How many classes have a free list: 0 while a pile only grows, and alloc() skips the search. */
  nonEmptyClasses = 0;
  /** @internal Per class, `segWords` words of a bit per segment with a list of that class (from the rows: relist). */
  segBits = new Uint32Array(NUM_CLASSES);
  segWords = 1;
  /** @internal Per class, the segments with a list of it. */
  readonly classSegs = new Int32Array(NUM_CLASSES);
  /** The checkpoint the rows in pile.meta were last saved by (its sequence number). */
  ckptSeq = 0;
  /** Gives pile.coord's rows of segments 0..count-1 disk space (SharedState sets it). */
  onRows: (count: number) => void = () => {};
  /** @internal What appends to the tail's segment added, not yet in its row nor in the counters below (SegmentRows' foldTail). */
  pendSeg = -1;
  /** @internal */ pendAlloc = 0;
  /** @internal */ pendUtil = 0;
  /** @internal */ pendObj = 0;
  /** The pile's exact counters (Pile.stats; per segment in the rows, and in checkpoints), zero until the constructor's
   * end: bytes of blocks in use with their headers, of free blocks, of payload; live records (a moved record once, by its
   * link); moved records; catalog and journal blocks. */
  allocatedBytes: number;
  freeBytes: number;
  utilizedBytes: number;
  objectCount: number;
  linkCount: number;
  internalCount: number;
  /** The tail: the free end of the newest segment, cut by bumping an address instead of through the lists (a fresh
   * pile fills at the cost of two header writes per block). A valid free block on disk, not listed; 0: none. */
  tailAddr = 0;
  tailEnd = 0;
  tailGen = 0;
  /** @internal Pages are faulted in ahead of the tail on a worker (Segment.populate) up to this address; the next chunk
   * is asked for once the tail passes populateMark: one to two chunks of ready pages before the tail. 0 (after open,
   * rebuild or a new segment): not armed; the first cut arms it a chunk on, so a pile that writes less than a chunk
   * commits no memory ahead of what it wrote. */
  populatedTo = 0;
  /** @internal */ populateMark = 0;
  /** Free lists found damaged: their rest was dropped (space leaked, nothing overwritten). */
  damagedLists = 0;
  /** Generation a new segment's free space starts at: above any a segment released by compact() held, so a segment made
   * again at its index never takes the tag of a record deleted there before (kept in pile.meta). */
  genFloor = 0;
  /** @internal Walks keep retired blocks (RetiredList.ts) as allocated; false while an unclean open recovers: none is listed then. */
  keepRetired = false;
  /** @internal Bytes freed since the last walk that merged free runs (see alloc). */
  freedSinceWalk = 0;
  /** Bytes per segment (fmt.segmentSize). */
  readonly segmentSize: number;
  /** fmt.segmentInv. The put and delete paths (bump, take, trim, free, setLink) write fmt.segmentOf(addr) out as
   * `Math.floor(addr * this.segmentInv)`: no call, no load of fmt per put or free; cold code calls fmt.segmentOf.
   * Measure a change there with `node benchmarks/compare/compare-builds.cjs` (docs/benchmarks.md). */
  private readonly segmentInv: number;
  /** Dirty marks per segment since the last checkpoint (MARK_*). A write into a segment first raises its mark through
   * onMark, which writes it to pile.meta before the write lands: once per segment and level per checkpoint. */
  marks: Uint8Array<ArrayBufferLike> = new Uint8Array(MAX_SEGMENTS);
  /** Per segment, the writer turn that last wrote into it (pile.coord's, see SharedState): a dead holder's repair rescans its own. */
  touched: Uint32Array<ArrayBufferLike> = new Uint32Array(MAX_SEGMENTS);
  /** The writer turn this process holds (WriterTurn), stamped into `touched` beside each mark check: one store, no clearing. */
  epoch = 0;
  /** [0]: the body a growing set() is writing until its journal links it (pile.coord's PENDING_BODY; see Journal). */
  intent: Float64Array<ArrayBufferLike> = new Float64Array(1);
  /** [0]: the tail at the last fold of the pend* counters (pile.coord's FOLD_TAIL; SegmentRows' foldTail). */
  foldAt: Float64Array<ArrayBufferLike> = new Float64Array(1);
  /** The old bytes of what this write stores below foldAt and in the rows (UndoLog.ts; pile.coord's, see SharedState). */
  undo: UndoLog = UndoLog.off();
  /** @internal The tail at the last checkpoint: its segment (-1: none) and offset. Writes at or past it in that segment are MARK_TAIL. */
  ckptTailSeg = -1;
  /** @internal */ ckptTailOff = 0;
  /** @internal Segments at the last checkpoint; later ones are scanned whole by recovery and need no mark. */
  ckptSegCount = 0;
  /** Block bytes cut since the last checkpoint (the pile checkpoints once this passes checkpointBytes). */
  sinceCheckpoint = 0;
  /** Writes a raised mark durably (against a killed process) before the segment is written; set by the pile. */
  onMark: (segIdx: number, level: number) => void = () => {};
  /** Marks every segment MARK_WHOLE at once, before a walk that writes into all of them. */
  onMarkAll: (segCount: number) => void = () => {};

  constructor(
    readonly segments: Segment[],
    readonly fmt: PointerFormat,
    /** Adds a segment and returns it, or throws PILE_OUT_OF_SPACE; undefined: it freed retired blocks instead (RetiredList.makeRoom). */
    private readonly grow: () => Segment | undefined,
    /** The walk that merges every free run (AllocatorScan's rebuild) before alloc() grows the pile: no import cycle. */
    private readonly mergeWalk: () => void,
  ) {
    this.segmentSize = fmt.segmentSize;
    this.segmentInv = fmt.segmentInv;
    this.allocatedBytes = this.freeBytes = this.utilizedBytes = this.objectCount = this.linkCount = this.internalCount = 0;
  }

  /** A block of at least `size` bytes (a multiple of 8, >= MIN_BLOCK_SIZE), in state RESERVED.
   * @throws PILE_TOO_LARGE when no segment can hold it
   * @throws PILE_OUT_OF_SPACE when maxMemory forbids another segment */
  alloc(size: number): number {
    if (size > this.segmentSize - SEGMENT_HEADER_SIZE) {
      throw new PileError(
        'PILE_TOO_LARGE',
        `a block of ${size} bytes does not fit in a segment of ${this.segmentSize} bytes (segmentSize)`,
      );
    }
    // Filling a pile that never freed anything: no list to search, straight to the tail.
    let addr = this.nonEmptyClasses === 0 ? 0 : this.take(size);
    if (addr === 0) addr = this.bump(size);
    if (addr === 0) foldTail(this); // freeBytes and allocatedBytes are read
    if (addr === 0 && this.freeBytes >= size && this.freedSinceWalk * 8 >= this.allocatedBytes + this.freeBytes) {
      // free() merges only with the blocks after it, so space freed front to back stays in pieces too small for a
      // larger put; one walk merges every free run before the pile grows. Only once an eighth of the pile was freed
      // since the last walk, so that a full pile failing allocations again and again does not walk each time.
      this.undo.distrust(); // the walk rewrites every row: not logged
      this.mergeWalk();
      addr = this.take(size);
      if (addr === 0) addr = this.bump(size);
    }
    if (addr === 0) {
      this.undo.distrust(); // a new segment, the old tail listed, retired blocks freed: not logged
      this.touched[this.segments.length] = this.epoch; // the new segment's index, before its file is counted
      const seg = this.grow();
      // Deferred reuse handed blocks back instead of the pile growing past its limit: look again.
      if (seg === undefined) return this.alloc(size);
      this.addFreeSegment(seg);
      addr = this.bump(size);
      if (addr === 0) throw new PileError('PILE_OUT_OF_SPACE', `no block of ${size} bytes after adding segment ${seg.index}`);
    }
    return addr;
  }

  /** Where a record of at most `size` block bytes may be encoded in place before its exact size is known: the start of
   * the tail, when alloc(size) would bump the tail too (no free list can serve it) and the tail has room; 0 otherwise.
   * Encoding there writes only inside the free tail, whose header stays until claimTail(): a crash leaves it free. */
  tailFor(size: number): number {
    if (this.tailEnd - this.tailAddr < size) return 0;
    if (this.nonEmptyClasses !== 0 && nextNonEmpty(this, sizeClass(size)) >= 0) return 0;
    return this.tailAddr;
  }

  /** Cuts the block of a typed record encoded at the start of the tail, which tailFor() gave: `seg`, `segIdx` and `off`
   * name that address. The block is RESERVED, like alloc()'s; returns its generation. Counts the record (`length` payload
   * bytes) in the tail's pending counters, which cut() has just made its segment's: countUsedTyped() inlined by hand. */
  claimTail(seg: Segment, segIdx: number, off: number, size: number, length: number): number {
    this.cut(seg, segIdx, off, size);
    this.pendUtil += length;
    this.pendObj++;
    return genOf(seg.u32[(off >>> 2) + 1]!);
  }

  /** Frees the block at `addr` (USED or RESERVED) and merges it with free blocks after it. */
  free(addr: number): void {
    const segIdx = Math.floor(addr * this.segmentInv); // inline: hot (see segmentInv)
    const seg = this.segments[segIdx]!.use();
    const off = addr - segIdx * this.segmentSize;
    this.touch(segIdx, off);
    const u32 = seg.u32;
    const undo = this.undo;
    if (undo.n >= 0) undo.block(u32, segIdx, off, 4, segIdx * ROW + R_ALLOC); // the header, the words push() links through, the row
    const h = off >>> 2;
    let size = u32[h]!;
    let gen = genOf(u32[h + 1]!);
    this.allocatedBytes -= size;
    this.rows[segIdx * ROW + R_ALLOC]! -= size;
    this.freedSinceWalk += size;
    // The record is gone from this store on: a crash after it never brings it back. Its check
    // words first: the block is then a whole free block at every store that follows.
    u32[h + 2] = sizeCheck(size);
    u32[h + 3] = genCheck(gen);
    u32[h + 1] = word1(gen, KIND_FREE, STATE_FREE, 0);
    let end = off + size;
    while (end < this.segmentSize) {
      if (segIdx * this.segmentSize + end === this.tailAddr) {
        // Freed right before the tail: the tail grows down over it.
        const g = gen > this.tailGen ? gen : this.tailGen;
        // Generation before size: once the size covers the tail, the header must already carry
        // the tail's generation, or a crash between the two stores would lower it.
        this.writeFree(u32, h, this.tailEnd - addr, g);
        // The tail's old header is inside the tail now: a header whose check words hold must
        // only ever start a block (recovery trusts it to confirm a neighbour's size).
        if (undo.n >= 0) undo.word(u32, segIdx, end + 8);
        u32[(end >>> 2) + 2] = 0;
        this.freeBytes += end - off;
        this.tailDown(addr);
        this.tailGen = g;
        return;
      }
      const nw = u32[(end >>> 2) + 1]!;
      const nsize = u32[end >>> 2]!;
      // A neighbour whose check words fail is damaged: merging by its size could cover live records.
      if (stateOf(nw) !== STATE_FREE || !this.wholeFree(u32, end, nsize, nw)) break;
      if (!this.unlink(segIdx * this.segmentSize + end, nsize, seg, end)) break;
      this.freeBytes -= nsize;
      const ng = genOf(nw);
      if (ng > gen) gen = ng;
      size += nsize;
      // Generation before size (see above): the merged block never shows a smaller generation than a block it covers.
      this.writeFree(u32, h, size, gen);
      if (undo.n >= 0) undo.word(u32, segIdx, end + 8);
      u32[(end >>> 2) + 2] = 0;
      end += nsize;
    }
    this.writeFree(u32, h, size, gen);
    this.push(addr, size, seg, off);
    this.freeBytes += size;
  }

  /** Shortens the RESERVED block at `addr` to its first `keep` bytes and frees the rest: for a put
   * that allocated for an upper bound of its length. The block's size is read from its header,
   * not taken from the request: alloc() may hand out more than asked (a free block or a tail
   * whose rest would be too small to stand alone). A rest too small to be a block stays as slack. */
  trim(addr: number, keep: number): void {
    const segIdx = Math.floor(addr * this.segmentInv); // inline: hot (see segmentInv)
    const u32 = this.segments[segIdx]!.use().u32;
    const h = (addr - segIdx * this.segmentSize) >>> 2;
    const size = u32[h]!;
    const cut = size - keep;
    if (cut <= 0) return;
    const r = h + (keep >>> 2);
    const atTail = addr + size === this.tailAddr;
    const undo = this.undo;
    undo.armed++;
    undo.words(u32, segIdx, h << 2, 2);
    undo.words(u32, segIdx, r << 2, 2);
    // A block cut since the last fold (at or past foldAt) is counted in pendAlloc, not its row: no fold.
    if (atTail && segIdx === this.pendSeg) this.markFor(segIdx, h << 2);
    else this.touch(segIdx, h << 2);
    if (atTail) {
      if (segIdx === this.pendSeg) this.pendAlloc -= cut;
      else {
        undo.row(segIdx * ROW + R_ALLOC);
        this.rows[segIdx * ROW + R_ALLOC]! -= cut;
        this.allocatedBytes -= cut;
        this.freeBytes += cut;
      }
      // The block ends where the tail starts: the tail moves back over the rest. Its new header
      // first, while the block still covers it; a crash before the block shrinks leaves the old tail
      // header where the block ends. The larger generation of the two, as free() merges: the rest
      // may have held blocks of the block's generation history, not the tail's.
      const gen = genOf(u32[h + 1]!);
      const g = gen > this.tailGen ? gen : this.tailGen;
      this.writeFree(u32, r, this.tailEnd - (addr + keep), g);
      u32[h + 2] = sizeCheck(keep);
      u32[h] = keep;
      undo.word(u32, segIdx, (h << 2) + size + 8);
      u32[h + (size >>> 2) + 2] = 0; // the old tail header, inside the tail now (see free)
      this.tailDown(addr + keep);
      this.tailGen = g;
      undo.armed--;
      return;
    }
    if (cut < MIN_BLOCK_SIZE) return void undo.armed--;
    faultPoints.hit?.('trim-split');
    // The rest becomes a RESERVED block of the block's generation before the block shrinks, so a
    // crash between the two leaves a walkable segment and recovery frees it like any unfinished put.
    const gen = genOf(u32[h + 1]!);
    this.writeReserved(u32, r, cut, gen);
    u32[h + 2] = sizeCheck(keep);
    u32[h] = keep;
    faultPoints.hit?.('trim-shrunk');
    this.free(addr + keep);
    // Not freed space but space never used: it must not bring the next merge walk closer.
    this.freedSinceWalk -= cut;
    undo.armed--;
  }

  /** The tail moves down to `addr`, foldAt with it when above (it stays at or below the tail). */
  private tailDown(addr: number): void {
    this.tailAddr = addr;
    if (addr >= this.foldAt[0]!) return;
    this.undo.fold();
    this.foldAt[0] = addr;
  }

  /** Makes the whole of a fresh segment the tail; the old tail's rest joins the free lists. */
  addFreeSegment(seg: Segment): void {
    this.retireTail();
    foldTail(this);
    const size = this.segmentSize - SEGMENT_HEADER_SIZE;
    const off = SEGMENT_HEADER_SIZE;
    const r = seg.index * ROW;
    this.rows.fill(0, r, r + ROW);
    this.rows[r + R_SPAN] = size;
    this.writeFree(seg.u32, off >>> 2, size, this.genFloor);
    this.tailAddr = seg.index * this.segmentSize + off;
    this.tailEnd = (seg.index + 1) * this.segmentSize;
    this.tailGen = this.genFloor;
    this.foldAt[0] = this.tailAddr; // nothing cut from it yet
    // A segment added after compact() released later ones lies below the old marks.
    this.populatedTo = this.populateMark = 0;
    this.freeBytes += size;
  }

  /** @internal Lists the rest of the tail, which stops being the tail. */
  retireTail(): void {
    if (this.tailAddr === 0) return;
    const segIdx = this.fmt.segmentOf(this.tailAddr);
    const seg = this.segments[segIdx]?.use();
    if (seg !== undefined) this.push(this.tailAddr, this.tailEnd - this.tailAddr, seg, this.tailAddr - segIdx * this.segmentSize);
    this.tailAddr = this.tailEnd = this.tailGen = 0;
  }

  /** Cuts `size` bytes off the front of the tail; 0 when the tail is too short. */
  private bump(size: number): number {
    const addr = this.tailAddr;
    if (addr === 0 || this.tailEnd - addr < size) return 0;
    const segIdx = Math.floor(addr * this.segmentInv); // inline: hot (see segmentInv)
    this.cut(this.segments[segIdx]!.use(), segIdx, addr - segIdx * this.segmentSize, size);
    return addr;
  }

  /** Cuts `size` bytes (or the whole tail, when the rest could not stand alone) off the front of the tail, at `off` of `seg`. */
  private cut(seg: Segment, segIdx: number, off: number, size: number): void {
    // No turn stamp (touched): a cut writes only from the tail on, at or past foldAt, which a repair rescans (HolderRepair).
    if (this.marks[segIdx] === MARK_CLEAN) this.mark(segIdx, off);
    if (segIdx !== this.pendSeg) foldTail(this, segIdx); // foldAt: the tail before this cut
    this.sinceCheckpoint += size;
    const addr = this.tailAddr;
    const u32 = seg.u32;
    const gen = (this.tailGen + 1) & GEN_MASK;
    let used = this.tailEnd - addr;
    if (used - size >= MIN_BLOCK_SIZE) {
      this.writeFree(u32, (off + size) >>> 2, used - size, gen);
      used = size;
      this.tailAddr = addr + size;
      this.tailGen = gen;
    } else {
      this.tailAddr = this.tailEnd = this.tailGen = 0;
    }
    this.writeReserved(u32, off >>> 2, used, gen);
    this.pendAlloc += used; // also out of freeBytes (foldTail)
    if (this.tailAddr > this.populateMark) populateAhead(this, seg, segIdx, addr);
  }

  /** Raises the mark of segment `segIdx` for a write at `off`, before that write: MARK_TAIL at or past the checkpoint's
   * tail in its segment, MARK_WHOLE elsewhere. Into the tail's segment other than by a cut, its row is made whole first
   * (foldTail), so that a repair may take it as it is up to foldAt and rescan only from there (HolderRepair). */
  touch(segIdx: number, off: number): void {
    if (this.undo.armed === 0) this.undo.distrust(); // a write no logged path makes
    if (segIdx === this.pendSeg) foldTail(this);
    this.touched[segIdx] = this.epoch;
    this.markFor(segIdx, off);
  }

  private markFor(segIdx: number, off: number): void {
    const m = this.marks[segIdx]!;
    if (m === MARK_CLEAN || (m === MARK_TAIL && off < this.ckptTailOff)) this.mark(segIdx, off);
  }

  private mark(segIdx: number, off: number): void {
    if (segIdx >= this.ckptSegCount) {
      this.marks[segIdx] = MARK_NEW;
      return;
    }
    const level = segIdx === this.ckptTailSeg && off >= this.ckptTailOff ? MARK_TAIL : MARK_WHOLE;
    if (this.marks[segIdx]! >= level) return;
    this.onMark(segIdx, level);
    this.marks[segIdx] = level;
  }

  /** @internal Writes a whole free block header: check words first, then generation, then size (see free). */
  writeFree(u32: Uint32Array, h: number, size: number, gen: number): void {
    u32[h + 2] = sizeCheck(size);
    u32[h + 3] = genCheck(gen);
    u32[h + 1] = word1(gen, KIND_FREE, STATE_FREE, 0);
    u32[h] = size;
  }

  /** writeFree's stores for a block just cut or carved: RESERVED, no record kind yet (small: inlines into cut). */
  private writeReserved(u32: Uint32Array, h: number, size: number, gen: number): void {
    u32[h + 2] = sizeCheck(size);
    u32[h + 3] = genCheck(gen);
    u32[h + 1] = word1(gen, KIND_FREE, STATE_RESERVED, 0);
    u32[h] = size;
  }

  /** The free block at `off` (word1 `w`) has a sane size and both check words hold. */
  private wholeFree(u32: Uint32Array, off: number, size: number, w: number): boolean {
    const h = off >>> 2;
    return this.saneSize(off, size) && u32[h + 2] === sizeCheck(size) && u32[h + 3] === genCheck(genOf(w));
  }

  saneSize(off: number, size: number): boolean {
    return size >= MIN_BLOCK_SIZE && (size & 7) === 0 && off + size <= this.segmentSize;
  }

  private take(size: number): number {
    let c = sizeClass(size);
    if (size > 1024 && this.classSegs[c] !== 0) {
      // Blocks in a range class may be smaller than asked: first fit among a few of one segment's.
      const s = firstSeg(this, c);
      let a = this.rows[s * ROW + c]!;
      for (let i = 0; i < FIT_SCAN_LIMIT && a !== 0; i++) {
        const segIdx = Math.floor(a * this.segmentInv); // inline: hot (see segmentInv)
        const seg = segIdx === s ? this.segments[segIdx]?.use() : undefined;
        const off = a - segIdx * this.segmentSize;
        if (seg === undefined || !this.checkFree(seg, off)) {
          this.dropList(s, c);
          break;
        }
        if (seg.u32[off >>> 2]! >= size) return this.carve(a, size, seg, off);
        a = seg.f64[(off + 16) >>> 3]!;
      }
      c++;
    }
    for (;;) {
      c = nextNonEmpty(this, c);
      if (c < 0) return 0;
      const s = firstSeg(this, c);
      const a = this.rows[s * ROW + c]!;
      const segIdx = Math.floor(a * this.segmentInv); // inline: hot (see segmentInv)
      const seg = segIdx === s ? this.segments[segIdx]?.use() : undefined;
      const off = a - segIdx * this.segmentSize;
      // A damaged link may lead to a free block of another class, possibly smaller than asked.
      if (seg === undefined || !this.checkFree(seg, off) || seg.u32[off >>> 2]! < size) {
        this.dropList(s, c);
        continue;
      }
      return this.carve(a, size, seg, off);
    }
  }

  /** @internal A free-list entry must look like a free block: otherwise the list is damaged and is not followed. */
  checkFree(seg: Segment, off: number): boolean {
    if (!(off >= SEGMENT_HEADER_SIZE && off <= this.segmentSize - MIN_BLOCK_SIZE) || (off & 7) !== 0 || Math.floor(off) !== off)
      return false;
    const w = seg.u32[(off >>> 2) + 1]!;
    return stateOf(w) === STATE_FREE && this.wholeFree(seg.u32, off, seg.u32[off >>> 2]!, w);
  }

  /** @internal Empties the damaged list of class `c` of segment `s` (its blocks leak, nothing is
   * overwritten). The segment's row changes: it is marked, so that the next checkpoint saves it. */
  dropList(s: number, c: number): void {
    this.touch(s, 0);
    this.undo.row(s * ROW + c);
    if (this.rows[s * ROW + c] !== 0) this.unlisted(c, s);
    this.rows[s * ROW + c] = 0;
    this.damagedLists++;
  }

  /** @internal Segment `s` has a list of class `c` now. */
  listed(c: number, s: number): void {
    this.segBits[c * this.segWords + (s >>> 5)]! |= 1 << (s & 31);
    if (this.classSegs[c]!++ === 0) {
      this.nonEmpty[c >>> 5]! |= 1 << (c & 31);
      this.nonEmptyClasses++;
    }
  }

  /** Segment `s` has no list of class `c` any more. */
  private unlisted(c: number, s: number): void {
    this.segBits[c * this.segWords + (s >>> 5)]! &= ~(1 << (s & 31));
    if (--this.classSegs[c]! === 0) {
      this.nonEmpty[c >>> 5]! &= ~(1 << (c & 31));
      this.nonEmptyClasses--;
    }
  }

  private carve(addr: number, size: number, seg: Segment, off: number): number {
    const undo = this.undo;
    undo.armed++;
    const s = seg.index;
    this.touch(s, off);
    this.sinceCheckpoint += size;
    const u32 = seg.u32;
    const h = off >>> 2;
    const have = u32[h]!;
    const rest = have - size >= MIN_BLOCK_SIZE;
    // Logged in one call made only while a log is kept (UndoLog.off() never is): TurboFan does not
    // inline a call never made, so an in-memory pile's carve, free and push stay their size without the log.
    if (undo.n >= 0) undo.cut(u32, s, off, rest ? size : 0, s * ROW + R_ALLOC);
    this.unlink(addr, have, seg, off);
    const gen = (genOf(u32[h + 1]!) + 1) & GEN_MASK;
    let used = have;
    if (rest) {
      // Remainder header first: until the block's own size is rewritten, a walker skips it.
      const rOff = off + size;
      this.writeFree(u32, rOff >>> 2, have - size, gen);
      this.push(addr + size, have - size, seg, rOff);
      used = size;
    }
    this.writeReserved(u32, h, used, gen);
    this.freeBytes -= used;
    this.allocatedBytes += used;
    this.rows[s * ROW + R_ALLOC]! += used;
    undo.armed--;
    return addr;
  }

  /** @internal Puts the free block at `addr` at the head of its segment's list of its class. */
  push(addr: number, size: number, seg: Segment, off: number): void {
    const s = seg.index;
    this.touch(s, off);
    const c = sizeClass(size);
    const i = s * ROW + c;
    const head = this.rows[i]!;
    const undo = this.undo;
    if (undo.n >= 0) undo.block(seg.u32, s, off + 16, 2, i);
    seg.f64[(off + 16) >>> 3] = head;
    seg.f64[(off + 24) >>> 3] = 0;
    if (head !== 0) this.setLink(head, 24, addr);
    else this.listed(c, s);
    this.rows[i] = addr;
  }

  /** Takes the free block at `addr` out of its list; false (nothing changed) when its links are not addresses. */
  private unlink(addr: number, size: number, seg: Segment, off: number): boolean {
    const next = seg.f64[(off + 16) >>> 3]!;
    const prev = seg.f64[(off + 24) >>> 3]!;
    if (!this.linkValue(next) || !this.linkValue(prev)) {
      this.damagedLists++;
      const c = sizeClass(size);
      if (this.rows[seg.index * ROW + c] === addr) this.dropList(seg.index, c);
      return false;
    }
    if (prev !== 0) this.setLink(prev, 16, next);
    else {
      const c = sizeClass(size);
      const i = seg.index * ROW + c;
      if (this.rows[i] === addr) {
        if (this.undo.n >= 0) this.undo.row(i);
        this.rows[i] = next;
        if (next === 0) this.unlisted(c, seg.index);
      }
    }
    if (next !== 0) this.setLink(next, 24, prev);
    return true;
  }

  /** A link is 0 or the address of a block in a segment: an integer, 8-aligned. */
  private linkValue(a: number): boolean {
    return a === 0 || (Number.isSafeInteger(a) && a > 0 && a % 8 === 0 && a < this.segments.length * this.segmentSize);
  }

  /** Writes a link of the free block at `addr`; a link that leads anywhere but a free block is damage and is not written through. */
  private setLink(addr: number, at: number, value: number): void {
    if (!this.linkValue(addr)) {
      this.damagedLists++;
      return;
    }
    const segIdx = Math.floor(addr * this.segmentInv); // inline: hot (see segmentInv)
    const seg = this.segments[segIdx]?.use();
    if (seg === undefined) return;
    const off = addr - segIdx * this.segmentSize;
    // The whole free header, check words included: a damaged link may name any 8-aligned spot, and
    // a payload word there can look like a free state.
    if (!this.checkFree(seg, off)) {
      this.damagedLists++;
      return;
    }
    this.touch(segIdx, off);
    if (this.undo.n >= 0) this.undo.word(seg.u32, segIdx, off + at);
    seg.f64[(off + at) >>> 3] = value;
  }
}
