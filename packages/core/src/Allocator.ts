import {
  FLAG_BODY, GEN_MASK, KIND_CATALOG, KIND_FREE, KIND_JOURNAL, KIND_LINK, MIN_BLOCK_SIZE, SEGMENT_HEADER_SIZE,
  STATE_FREE, STATE_RESERVED, STATE_USED, flagsOf, genOf, kindOf, stateOf, word1,
} from './BlockFormat';
import { PileError } from './PileError';
import type { Segment } from './Segment';

/** Exact classes of 8 bytes up to 1 KiB, then four classes per power of two up to 1 GiB. */
export const NUM_CLASSES = 212;
const FIT_SCAN_LIMIT = 16;
/** Bytes of pages faulted in ahead of the tail per request (see Allocator.populatedTo). */
const POPULATE_CHUNK = 1 << 20;

export function sizeClass(size: number): number {
  if (size <= 1024) return size >>> 3;
  const lg = 31 - Math.clz32(size);
  return 128 + (lg - 10) * 4 + ((size >>> (lg - 2)) & 3);
}

/** Counters the allocator keeps exact; the pile adds the per-kind ones. */
export const STAT_FIELDS = ['allocatedBytes', 'freeBytes', 'utilizedBytes', 'objectCount', 'linkCount', 'internalCount', 'tailAddr', 'tailEnd', 'tailGen'] as const;

/**
 * Block allocator over a list of segments. Free blocks form doubly linked lists by size
 * class, threaded through the free blocks themselves (addresses as float64 at +16/+24), so
 * the allocator holds no per-block JS objects. An address is `segment * segmentSize + offset`.
 *
 * Generations: a new block gets the generation of the free block it was cut from plus one,
 * and merged free blocks keep the larger generation. So a block ever created at a given
 * offset has a larger generation than any dead block that started there, and a stale
 * pointer's tag can only match again after the generation wraps (2^tagBits reuses).
 */
export class Allocator {
  readonly heads = new Float64Array(NUM_CLASSES);
  private readonly nonEmpty = new Uint32Array(Math.ceil(NUM_CLASSES / 32));
  /** How many classes have a free list: 0 while a pile only grows, and alloc() skips the search. */
  private nonEmptyClasses = 0;
  allocatedBytes = 0;
  freeBytes = 0;
  utilizedBytes = 0;
  objectCount = 0;
  linkCount = 0;
  internalCount = 0;
  /**
   * The tail: the free end of the newest segment, cut by bumping an address instead of
   * through the lists (a fresh pile fills at the cost of two header writes per block).
   * It is a valid free block on disk, just not listed; 0 when there is none.
   */
  tailAddr = 0;
  tailEnd = 0;
  tailGen = 0;
  /**
   * Pages are faulted in ahead of the tail on a worker (Segment.populate) up to this address;
   * the next chunk is asked for once the tail passes populateMark, so the tail keeps one to two
   * chunks of ready pages before it. 0 (after open, rebuild or a new segment): not armed yet.
   * The first cut only arms it a chunk further on, so a pile that writes less than a chunk
   * commits no memory (or, mapped, dirties no page) ahead of what it wrote.
   */
  private populatedTo = 0;
  private populateMark = 0;
  /** Free lists found damaged: their rest was dropped (space leaked, nothing overwritten). */
  damagedLists = 0;
  /** Bytes freed since the last walk that merged free runs (see alloc). */
  private freedSinceWalk = 0;
  /** 1 / segmentSize: a power of two, so `addr * segmentInv` is exact and much cheaper than a division. */
  private readonly segmentInv: number;

  constructor(
    readonly segments: Segment[],
    readonly segmentSize: number,
    /** Adds a segment and returns it, or throws PILE_OUT_OF_SPACE. */
    private readonly grow: () => Segment,
  ) {
    this.segmentInv = 1 / segmentSize;
  }

  /**
   * A block of at least `size` bytes (a multiple of 8, >= MIN_BLOCK_SIZE), in state RESERVED.
   * @throws PILE_TOO_LARGE when no segment can hold it
   * @throws PILE_OUT_OF_SPACE when maxMemory forbids another segment
   */
  alloc(size: number): number {
    if (size > this.segmentSize - SEGMENT_HEADER_SIZE) {
      throw new PileError('PILE_TOO_LARGE', `a block of ${size} bytes does not fit in a segment of ${this.segmentSize} bytes (segmentSize)`);
    }
    // Filling a pile that never freed anything: no list to search, straight to the tail.
    let addr = this.nonEmptyClasses === 0 ? 0 : this.take(size);
    if (addr === 0) addr = this.bump(size);
    if (addr === 0 && this.freeBytes >= size && this.freedSinceWalk * 8 >= this.allocatedBytes + this.freeBytes) {
      // free() merges only with the blocks after it, so space freed front to back stays in
      // pieces too small for a larger put; one walk merges every free run before the pile grows.
      // Only once an eighth of the pile was freed since the last walk, so that a full pile
      // failing allocations again and again does not walk each time (amortized O(1) per free).
      this.rebuild();
      addr = this.take(size);
      if (addr === 0) addr = this.bump(size);
    }
    if (addr === 0) {
      const seg = this.grow();
      this.addFreeSegment(seg);
      addr = this.bump(size);
      if (addr === 0) throw new PileError('PILE_OUT_OF_SPACE', `no block of ${size} bytes after adding segment ${seg.index}`);
    }
    return addr;
  }

  /**
   * Where a record of at most `size` block bytes may be encoded in place before its exact size
   * is known: the start of the tail, when alloc(size) would bump the tail too (no free list can
   * serve it) and the tail has room; 0 otherwise. Encoding there writes only inside the free
   * tail, whose header stays as it is until claimTail(), so a crash meanwhile leaves it free.
   */
  tailFor(size: number): number {
    if (this.tailEnd - this.tailAddr < size) return 0;
    if (this.nonEmptyClasses !== 0 && this.nextNonEmpty(sizeClass(size)) >= 0) return 0;
    return this.tailAddr;
  }

  /**
   * Cuts the block of a record encoded at the start of the tail, which tailFor() gave: `seg`,
   * `segIdx` and `off` name that address. The block is RESERVED, like alloc()'s; returns its
   * generation.
   */
  claimTail(seg: Segment, segIdx: number, off: number, size: number): number {
    this.cut(seg, segIdx, off, size);
    return genOf(seg.u32[(off >>> 2) + 1]!);
  }

  /** Frees the block at `addr` (USED or RESERVED) and merges it with free blocks after it. */
  free(addr: number): void {
    const segIdx = Math.floor(addr * this.segmentInv);
    const seg = this.segments[segIdx]!.use();
    const off = addr - segIdx * this.segmentSize;
    const u32 = seg.u32;
    const h = off >>> 2;
    let size = u32[h]!;
    let gen = genOf(u32[h + 1]!);
    this.allocatedBytes -= size;
    this.freedSinceWalk += size;
    // The record is gone from this store on: a crash after it never brings it back.
    u32[h + 1] = word1(gen, KIND_FREE, STATE_FREE, 0);
    let end = off + size;
    while (end < this.segmentSize) {
      if (segIdx * this.segmentSize + end === this.tailAddr) {
        // Freed right before the tail: the tail grows down over it.
        const g = gen > this.tailGen ? gen : this.tailGen;
        // Generation before size: once the size covers the tail, the header must already carry
        // the tail's generation, or a crash between the two stores would lower it.
        u32[h + 1] = word1(g, KIND_FREE, STATE_FREE, 0);
        u32[h] = this.tailEnd - addr;
        this.freeBytes += end - off;
        this.tailAddr = addr;
        this.tailGen = g;
        return;
      }
      const nw = u32[(end >>> 2) + 1]!;
      const nsize = u32[end >>> 2]!;
      if (stateOf(nw) !== STATE_FREE || !this.saneSize(end, nsize)) break;
      this.unlink(segIdx * this.segmentSize + end, nsize, seg, end);
      this.freeBytes -= nsize;
      const ng = genOf(nw);
      if (ng > gen) gen = ng;
      size += nsize;
      end += nsize;
    }
    // Generation before size (see above): the merged block never shows a smaller generation than a block it covers.
    u32[h + 1] = word1(gen, KIND_FREE, STATE_FREE, 0);
    u32[h] = size;
    this.push(addr, size, seg, off);
    this.freeBytes += size;
  }

  /**
   * Shortens the RESERVED block at `addr` to its first `keep` bytes and frees the rest: for a put
   * that allocated for an upper bound of its length. The block's size is read from its header,
   * not taken from the request: alloc() may hand out more than asked (a free block or a tail
   * whose rest would be too small to stand alone). A rest too small to be a block stays as slack.
   */
  trim(addr: number, keep: number): void {
    const segIdx = Math.floor(addr * this.segmentInv);
    const u32 = this.segments[segIdx]!.use().u32;
    const h = (addr - segIdx * this.segmentSize) >>> 2;
    const size = u32[h]!;
    const cut = size - keep;
    if (cut <= 0) return;
    const r = h + (keep >>> 2);
    if (addr + size === this.tailAddr) {
      // The block ends where the tail starts: the tail moves back over the rest. Its new header
      // first, while the block still covers it; a crash before the block shrinks leaves the old tail
      // header where the block ends. The larger generation of the two, as free() merges: the rest
      // may have held blocks of the block's generation history, not the tail's.
      const gen = genOf(u32[h + 1]!);
      const g = gen > this.tailGen ? gen : this.tailGen;
      u32[r + 1] = word1(g, KIND_FREE, STATE_FREE, 0);
      u32[r] = this.tailEnd - (addr + keep);
      u32[h] = keep;
      this.tailAddr = addr + keep;
      this.tailGen = g;
      this.allocatedBytes -= cut;
      this.freeBytes += cut;
      return;
    }
    if (cut < MIN_BLOCK_SIZE) return;
    // The rest becomes a RESERVED block of the block's generation before the block shrinks, so a
    // crash between the two leaves a walkable segment and recovery frees it like any unfinished put.
    u32[r + 1] = word1(genOf(u32[h + 1]!), KIND_FREE, STATE_RESERVED, 0);
    u32[r] = cut;
    u32[h] = keep;
    this.free(addr + keep);
    // Not freed space but space never used: it must not bring the next merge walk closer.
    this.freedSinceWalk -= cut;
  }

  /** Makes the whole of a fresh segment the tail; the old tail's rest joins the free lists. */
  addFreeSegment(seg: Segment): void {
    this.retireTail();
    const size = this.segmentSize - SEGMENT_HEADER_SIZE;
    const off = SEGMENT_HEADER_SIZE;
    seg.u32[off >>> 2] = size;
    seg.u32[(off >>> 2) + 1] = word1(0, KIND_FREE, STATE_FREE, 0);
    this.tailAddr = seg.index * this.segmentSize + off;
    this.tailEnd = (seg.index + 1) * this.segmentSize;
    this.tailGen = 0;
    // A segment added after compact() released later ones lies below the old marks.
    this.populatedTo = this.populateMark = 0;
    this.freeBytes += size;
  }

  private retireTail(): void {
    if (this.tailAddr === 0) return;
    const segIdx = Math.floor(this.tailAddr * this.segmentInv);
    const seg = this.segments[segIdx]?.use();
    if (seg !== undefined) this.push(this.tailAddr, this.tailEnd - this.tailAddr, seg, this.tailAddr - segIdx * this.segmentSize);
    this.tailAddr = this.tailEnd = this.tailGen = 0;
  }

  /** Cuts `size` bytes off the front of the tail; 0 when the tail is too short. */
  private bump(size: number): number {
    const addr = this.tailAddr;
    if (addr === 0 || this.tailEnd - addr < size) return 0;
    const segIdx = Math.floor(addr * this.segmentInv);
    this.cut(this.segments[segIdx]!.use(), segIdx, addr - segIdx * this.segmentSize, size);
    return addr;
  }

  /** Cuts `size` bytes (or the whole tail, when the rest could not stand alone) off the front of the tail, at `off` of `seg`. */
  private cut(seg: Segment, segIdx: number, off: number, size: number): void {
    const addr = this.tailAddr;
    const u32 = seg.u32;
    const gen = (this.tailGen + 1) & GEN_MASK;
    let used = this.tailEnd - addr;
    if (used - size >= MIN_BLOCK_SIZE) {
      const rOff = off + size;
      u32[rOff >>> 2] = used - size;
      u32[(rOff >>> 2) + 1] = word1(gen, KIND_FREE, STATE_FREE, 0);
      used = size;
      this.tailAddr = addr + size;
      this.tailGen = gen;
    } else {
      this.tailAddr = this.tailEnd = this.tailGen = 0;
    }
    u32[(off >>> 2) + 1] = word1(gen, KIND_FREE, STATE_RESERVED, 0);
    u32[off >>> 2] = used;
    this.freeBytes -= used;
    this.allocatedBytes += used;
    if (this.tailAddr > this.populateMark) this.populateAhead(seg, segIdx, addr);
  }

  /** Asks for the pages from the block just cut at `addr` to two chunks past the tail (see populatedTo). */
  private populateAhead(seg: Segment, segIdx: number, addr: number): void {
    if (this.populatedTo === 0) {
      this.populatedTo = addr;
      this.populateMark = addr + POPULATE_CHUNK;
      return;
    }
    const base = segIdx * this.segmentSize;
    const from = Math.max(this.populatedTo, addr);
    const to = Math.min(this.tailEnd, this.tailAddr + 2 * POPULATE_CHUNK);
    if (to > from) seg.populate(from - base, to - base);
    this.populatedTo = to;
    this.populateMark = to - POPULATE_CHUNK;
  }

  /**
   * Rebuilds free lists and counters by walking every block of every segment, merging runs
   * of free blocks. Used after recovery and when a clean state is missing.
   * `onSegment` reports progress.
   */
  rebuild(onSegment?: (done: number) => void): void {
    this.heads.fill(0);
    this.nonEmpty.fill(0);
    this.nonEmptyClasses = 0;
    this.allocatedBytes = this.freeBytes = this.utilizedBytes = 0;
    this.objectCount = this.linkCount = this.internalCount = 0;
    this.tailAddr = this.tailEnd = this.tailGen = 0;
    this.populatedTo = this.populateMark = 0;
    this.freedSinceWalk = 0;
    const segSize = this.segmentSize;
    const last = this.segments.length - 1;
    for (const s of this.segments) {
      const seg = s.use();
      const u32 = seg.u32;
      let off = SEGMENT_HEADER_SIZE;
      let runStart = -1;
      let runGen = 0;
      const closeRun = (end: number): void => {
        if (runStart < 0) return;
        const size = end - runStart;
        u32[(runStart >>> 2) + 1] = word1(runGen, KIND_FREE, STATE_FREE, 0);
        u32[runStart >>> 2] = size;
        this.freeBytes += size;
        if (seg.index === last && end === segSize) {
          this.tailAddr = seg.index * segSize + runStart;
          this.tailEnd = (seg.index + 1) * segSize;
          this.tailGen = runGen;
        } else this.push(seg.index * segSize + runStart, size, seg, runStart);
        runStart = -1;
      };
      while (off < segSize) {
        const size = u32[off >>> 2]!;
        if (!this.saneSize(off, size)) break; // quarantined by recovery: the rest of the segment stays untouched
        const w = u32[(off >>> 2) + 1]!;
        const state = stateOf(w);
        if (state === STATE_USED) {
          closeRun(off);
          this.allocatedBytes += size;
          this.countUsed(w, u32[(off >>> 2) + 2]!);
        } else {
          if (state === STATE_RESERVED) u32[(off >>> 2) + 1] = word1(genOf(w), KIND_FREE, STATE_FREE, 0);
          if (runStart < 0) { runStart = off; runGen = genOf(w); } else if (genOf(w) > runGen) runGen = genOf(w);
        }
        off += size;
      }
      closeRun(off < segSize ? off : segSize);
      onSegment?.(seg.index + 1);
    }
  }

  /** Counters only, by a walk that writes nothing (read-only piles). */
  countOnly(): void {
    this.allocatedBytes = this.freeBytes = this.utilizedBytes = 0;
    this.objectCount = this.linkCount = this.internalCount = 0;
    for (const s of this.segments) {
      const seg = s.use();
      let off = SEGMENT_HEADER_SIZE;
      while (off < this.segmentSize) {
        const size = seg.u32[off >>> 2]!;
        if (!this.saneSize(off, size)) break;
        const w = seg.u32[(off >>> 2) + 1]!;
        if (stateOf(w) === STATE_USED) {
          this.allocatedBytes += size;
          this.countUsed(w, seg.u32[(off >>> 2) + 2]!);
        } else this.freeBytes += size;
        off += size;
      }
    }
  }

  /** Adds a committed block to the record counters (allocatedBytes is kept by alloc and free). */
  countUsed(w: number, length: number): void {
    this.utilizedBytes += length;
    const kind = kindOf(w);
    if (flagsOf(w) & FLAG_BODY) return;
    if (kind === KIND_CATALOG || kind === KIND_JOURNAL) this.internalCount++;
    else {
      this.objectCount++;
      if (kind === KIND_LINK) this.linkCount++;
    }
  }

  /** countUsed() of a typed record, small enough to be inlined into the typed put. */
  countUsedTyped(length: number): void {
    this.utilizedBytes += length;
    this.objectCount++;
  }

  uncountUsed(w: number, length: number): void {
    this.utilizedBytes -= length;
    const kind = kindOf(w);
    if (flagsOf(w) & FLAG_BODY) return;
    if (kind === KIND_CATALOG || kind === KIND_JOURNAL) this.internalCount--;
    else {
      this.objectCount--;
      if (kind === KIND_LINK) this.linkCount--;
    }
  }

  /** Allocator state for a clean close: counters then list heads. */
  snapshot(): Float64Array {
    const out = new Float64Array(STAT_FIELDS.length + NUM_CLASSES);
    STAT_FIELDS.forEach((f, i) => { out[i] = this[f]; });
    out.set(this.heads, STAT_FIELDS.length);
    return out;
  }

  /** Restores a snapshot; false if it does not fit this build (then the caller rebuilds). */
  restore(s: Float64Array): boolean {
    if (s.length !== STAT_FIELDS.length + NUM_CLASSES) return false;
    STAT_FIELDS.forEach((f, i) => { this[f] = s[i]!; });
    this.populatedTo = this.populateMark = 0;
    this.heads.set(s.subarray(STAT_FIELDS.length));
    this.nonEmpty.fill(0);
    this.nonEmptyClasses = 0;
    for (let c = 0; c < NUM_CLASSES; c++) {
      if (this.heads[c] !== 0) {
        this.nonEmpty[c >>> 5]! |= 1 << (c & 31);
        this.nonEmptyClasses++;
      }
    }
    return true;
  }

  saneSize(off: number, size: number): boolean {
    return size >= MIN_BLOCK_SIZE && (size & 7) === 0 && off + size <= this.segmentSize;
  }

  private take(size: number): number {
    let c = sizeClass(size);
    if (size > 1024 && this.heads[c] !== 0) {
      // Blocks in a range class may be smaller than asked: first fit among a few.
      let a = this.heads[c]!;
      for (let i = 0; i < FIT_SCAN_LIMIT && a !== 0; i++) {
        const segIdx = Math.floor(a * this.segmentInv);
        const seg = this.segments[segIdx]?.use();
        const off = a - segIdx * this.segmentSize;
        if (seg === undefined || !this.checkFree(seg, off)) { this.dropList(c); break; }
        if (seg.u32[off >>> 2]! >= size) return this.carve(a, size, seg, off);
        a = seg.f64[(off + 16) >>> 3]!;
      }
      c++;
    }
    for (;;) {
      c = this.nextNonEmpty(c);
      if (c < 0) return 0;
      const a = this.heads[c]!;
      const segIdx = Math.floor(a * this.segmentInv);
      const seg = this.segments[segIdx]?.use();
      const off = a - segIdx * this.segmentSize;
      if (seg === undefined || !this.checkFree(seg, off)) { this.dropList(c); continue; }
      return this.carve(a, size, seg, off);
    }
  }

  /** A free-list entry must look like a free block: otherwise the list is damaged and is not followed. */
  private checkFree(seg: Segment, off: number): boolean {
    if (off < SEGMENT_HEADER_SIZE || (off & 7) !== 0 || off >= this.segmentSize) return false;
    return stateOf(seg.u32[(off >>> 2) + 1]!) === STATE_FREE && this.saneSize(off, seg.u32[off >>> 2]!);
  }

  private dropList(c: number): void {
    if (this.heads[c] !== 0) this.nonEmptyClasses--;
    this.heads[c] = 0;
    this.nonEmpty[c >>> 5]! &= ~(1 << (c & 31));
    this.damagedLists++;
  }

  private carve(addr: number, size: number, seg: Segment, off: number): number {
    const u32 = seg.u32;
    const h = off >>> 2;
    const have = u32[h]!;
    this.unlink(addr, have, seg, off);
    const gen = (genOf(u32[h + 1]!) + 1) & GEN_MASK;
    let used = have;
    if (have - size >= MIN_BLOCK_SIZE) {
      // Remainder header first: until the block's own size is rewritten, a walker skips it.
      const rOff = off + size;
      u32[rOff >>> 2] = have - size;
      u32[(rOff >>> 2) + 1] = word1(gen, KIND_FREE, STATE_FREE, 0);
      this.push(addr + size, have - size, seg, rOff);
      used = size;
    }
    u32[h + 1] = word1(gen, KIND_FREE, STATE_RESERVED, 0);
    u32[h] = used;
    this.freeBytes -= used;
    this.allocatedBytes += used;
    return addr;
  }

  private push(addr: number, size: number, seg: Segment, off: number): void {
    const c = sizeClass(size);
    const head = this.heads[c]!;
    seg.f64[(off + 16) >>> 3] = head;
    seg.f64[(off + 24) >>> 3] = 0;
    if (head !== 0) this.setLink(head, 24, addr);
    else this.nonEmptyClasses++;
    this.heads[c] = addr;
    this.nonEmpty[c >>> 5]! |= 1 << (c & 31);
  }

  private unlink(addr: number, size: number, seg: Segment, off: number): void {
    const next = seg.f64[(off + 16) >>> 3]!;
    const prev = seg.f64[(off + 24) >>> 3]!;
    if (prev !== 0) this.setLink(prev, 16, next);
    else {
      const c = sizeClass(size);
      if (this.heads[c] === addr) {
        this.heads[c] = next;
        if (next === 0) {
          this.nonEmpty[c >>> 5]! &= ~(1 << (c & 31));
          this.nonEmptyClasses--;
        }
      }
    }
    if (next !== 0) this.setLink(next, 24, prev);
  }

  /** Writes a link of the free block at `addr`; a link that leads anywhere but a free block is damage and is not written through. */
  private setLink(addr: number, at: number, value: number): void {
    const segIdx = Math.floor(addr * this.segmentInv);
    const seg = this.segments[segIdx]?.use();
    if (seg === undefined) return;
    const off = addr - segIdx * this.segmentSize;
    if ((off & 7) !== 0 || off < SEGMENT_HEADER_SIZE || off > this.segmentSize - MIN_BLOCK_SIZE || stateOf(seg.u32[(off >>> 2) + 1]!) !== STATE_FREE) {
      this.damagedLists++;
      return;
    }
    seg.f64[(off + at) >>> 3] = value;
  }

  private nextNonEmpty(c: number): number {
    for (let w = c >>> 5; w < this.nonEmpty.length; w++) {
      let bits = this.nonEmpty[w]!;
      if (w === c >>> 5) bits &= ~((1 << (c & 31)) - 1) | 0;
      if (bits !== 0) return (w << 5) + (31 - Math.clz32(bits & -bits));
    }
    return -1;
  }
}
