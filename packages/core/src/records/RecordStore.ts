import { rebuild } from '../alloc/AllocatorScan';
import { countUsed, countUsedTyped, uncountUsed } from '../alloc/AllocatorRows';
import { Allocator } from '../alloc/Allocator';
import {
  BLOCK_HEADER_SIZE,
  MIN_BLOCK_SIZE,
  FLAG_BODY,
  FLAG_SEALED,
  FLAG_SHIFT,
  GEN_MASK,
  KIND_BUFFER,
  KIND_CATALOG,
  KIND_JOURNAL,
  KIND_LINK,
  KIND_RAW,
  KIND_TYPED,
  RAW_PREFIX,
  SEGMENT_HEADER_SIZE,
  STATE_DAMAGED,
  STATE_RESERVED,
  STATE_USED,
  TYPED_PREFIX,
  blockSizeFor,
  checkedWord1,
  flagsOf,
  genOf,
  kindOf,
  stateOf,
  word1,
} from '../storage/BlockFormat';
import { Catalog } from './Catalog';
import { beginChange, endChange } from '../concurrency/ChangeSeq';
import { blockChecksum, blockDamage, headerChecksum } from '../storage/Checksum';
import { encodeGuard, reentrantError } from './EncodeGuard';
import { replaceRecord } from './Journal';
import type { MetaFile } from '../storage/MetaFile';
import { PileError } from '../PileError';
import { invalid } from '../PileOptions';
import type { PilePointer } from './PilePointer';
import { compileQuickLocate, type QuickLocate } from './PointerCheck';
import { PointerFormat, SEGMENT_DIV } from './PointerFormat';
import { ReadState, closedError } from '../concurrency/ReadState';
import type { CompiledSchema, FieldReader } from '../schema/SchemaCompiler';
import type { Segment } from '../storage/Segment';
import { growOrReclaim, replacedSegment, segmentAdded } from '../storage/SegmentTable';
import { ValueEncoding } from './ValueEncoding';
import { checkBeforeWrite, corruptError } from '../recovery/Verify';

/** Module-local: a reference to the import itself is a property load on each use. */
const GUARD = encodeGuard;

/** What the raw views of a pile hold before the first rawSeek and after close. */
export const EMPTY_BUFFER = Buffer.alloc(0);
/** word1 of a committed, unlinked typed record, generation bits zero. */
export const TYPED_USED_WORD = word1(0, KIND_TYPED, STATE_USED, 0);
/** checkedWord1() of a committed typed record, generation bits zero. */
const TYPED_CHECKED_WORD = checkedWord1(TYPED_USED_WORD);
/** word1 of a typed record being written, generation bits zero. */
const TYPED_RESERVED_WORD = word1(0, KIND_TYPED, STATE_RESERVED, 0);
/** word1 of a committed raw block (sealed or not), generation bits zero. */
const RAW_USED_WORD = word1(0, KIND_RAW, STATE_USED, 0);
/** Typed records whose length bound is above this are measured exactly before allocation. */
const TYPED_BOUND_LIMIT = 4096;

/**
 * The fields of a RecordStore that the compiled fast pointer check reads (`segments`) and writes
 * (`seg`, the segment of the block it found) on the store it is called on: see compileQuickLocate.
 * Checked against the class, so that renaming either field without this fails to compile.
 */
type Field = keyof RecordStore;
export const LOCATE_FIELDS = { segments: 'segments', seg: 'hSeg', seqWords: 'sU32', seq: 'sSeq' } as const satisfies Record<string, Field>;

/** What a RecordStore is made with: the pile's geometry and files, opened by the pile. */
export interface RecordStoreSetup {
  readonly dir: string | undefined;
  readonly readonly: boolean;
  readonly verifyOnRead: boolean;
  readonly segmentSize: number;
  readonly maxMemory: number;
  readonly pileId: number;
  readonly meta: MetaFile | undefined;
  readonly checkReads: boolean; // another process may write (ReadState.checkReads)
}

/**
 * The records of a pile: the hot paths (resolve, store, commit, the generic put, get and set,
 * the typed put and get, rawSeek) and the state they use. They are methods of this one class,
 * whose only concrete subclass is Pile, so their call sites stay monomorphic and TurboFan inlines
 * them; what runs rarely lives in the files they call (Journal, Catalog, SegmentTable,
 * ValueEncoding) or in Pile.
 */
export abstract class RecordStore extends ReadState {
  /** True when the pile lives in files and survives restarts. */
  readonly persistent: boolean;
  readonly readonly: boolean;
  readonly dir: string | undefined;
  readonly segmentSize: number;
  readonly maxMemory: number;
  /** @internal */
  readonly pileId: number;
  /** @internal The mapped segments, by index (a pointer names its segment by index). */
  readonly segments: Segment[] = [];
  /** @internal */
  readonly alloc: Allocator;
  /** @internal pile.meta of a mapped pile; undefined in memory and once closed. */
  meta: MetaFile | undefined;
  /** @internal Pointer and address arithmetic of this pile's segment size. */
  readonly fmt: PointerFormat;
  /** @internal Roots, schemas and msgpackr's structures. */
  readonly catalog: Catalog;
  /** @internal How values become bytes and back; holds what a put is about to write. */
  readonly values: ValueEncoding;
  /** @internal While recovery runs: a released block is only marked free (no free lists yet). */
  recovering = false;
  protected readonly verifyOnRead: boolean;
  /** word1 bits a typed pointer pins down: the tag's generation bits, kind, state, flags. */
  protected readonly typedWordMask: number;
  /** typedWordMask without the SEALED flag: rawSeek takes sealed and mutable raw blocks alike. */
  private readonly rawWordMask: number;
  /**
   * The fast path of resolve() for the common case (an unlinked record, no verifyOnRead),
   * compiled for this pile's geometry: see compileQuickLocate. Called as a method: it reads and
   * writes the LOCATE_FIELDS of this store.
   */
  private readonly quickLocate: QuickLocate;

  constructor(setup: RecordStoreSetup) {
    super();
    this.dir = setup.dir;
    this.persistent = setup.dir !== undefined;
    this.readonly = setup.readonly;
    this.verifyOnRead = setup.verifyOnRead;
    this.segmentSize = setup.segmentSize;
    this.maxMemory = setup.maxMemory;
    this.pileId = setup.pileId;
    this.meta = setup.meta;
    const fmt = new PointerFormat(setup.segmentSize);
    this.fmt = fmt;
    this.typedWordMask = ~(GEN_MASK & ~fmt.tagMask) >>> 0;
    this.rawWordMask = (this.typedWordMask & ~(FLAG_SEALED << FLAG_SHIFT)) >>> 0;
    this.checkReads = setup.checkReads;
    this.quickLocate = setup.verifyOnRead ? () => -1 : compileQuickLocate(fmt, LOCATE_FIELDS, this.checkReads);
    this.alloc = new Allocator(
      this.segments,
      fmt,
      () => growOrReclaim(this),
      () => rebuild(this.alloc),
    );
    this.catalog = new Catalog(this);
    this.values = new ValueEncoding(this.catalog, (id) => this.catalog.storedSchema(id)?.[0]);
  }

  /** Saves a checkpoint (see Pile): writable() calls it once enough was written since the last. */
  protected abstract checkpoint(): void;

  /** Bytes written since the last checkpoint that make writable() save one. */
  protected abstract readonly checkpointBytes: number;

  // ---------------------------------------------------------------- records

  /**
   * Stores a value and returns its pointer. Strings are stored as UTF-8 and Uint8Array/Buffer
   * as raw bytes; anything else goes through msgpackr with shared record structures.
   * `preallocate` reserves room for a later, larger `set` in place.
   * @throws PILE_TOO_LARGE when the value does not fit in one segment
   * @throws PILE_OUT_OF_SPACE when maxMemory is reached
   * @throws PILE_READONLY, PILE_CLOSED
   * @throws PILE_INVALID_OPTION for a bad `preallocate`
   * @throws PILE_INVALID_VALUE naming the path (`value.items[1]`) of a part that would not read back
   *   as it was (a function, -0, a lone surrogate, a cycle, ...); nothing is written
   */
  put(value: unknown, opts?: { preallocate?: number }): PilePointer {
    this.writable();
    const pre = opts === undefined ? undefined : opts.preallocate;
    if (pre !== undefined && (!Number.isSafeInteger(pre) || pre < 0))
      throw invalid('preallocate', `expected a non-negative integer, got ${String(pre)}`);
    const values = this.values;
    values.prepare(value);
    const room = pre !== undefined && pre > values.len ? pre : values.len;
    if (this.catalog.structuresUndo === undefined) return this.store(room, 0);
    let ptr: PilePointer;
    try {
      ptr = this.store(room, 0);
    } catch (err) {
      this.catalog.undoStructures();
      throw err;
    }
    this.catalog.keepStructures();
    return ptr;
  }

  /**
   * Reads a record back as the kind it was put: string, Uint8Array, Buffer, or the decoded value.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER
   * @throws PILE_CORRUPT when the record is damaged (always on a structural check, on checksums with verifyOnRead)
   * @throws PILE_SCHEMA_MISMATCH when a typed record's schema is not registered in this process
   * @throws PILE_CLOSED
   */
  get<T = unknown>(ptr: PilePointer): T {
    if (!this.checkReads) return this.getOnce(ptr) as T;
    // The first attempt written out; a read that met a change (or failed) is left to reread().
    try {
      const value = this.getOnce(ptr);
      if (this.readSettled()) return value as T;
    } catch (err) {
      if (this.readSettled()) throw err;
    }
    return this.reread(this.getOnce, ptr, 0, undefined) as T;
  }

  private getOnce(ptr: PilePointer): unknown {
    this.open();
    this.resolve(ptr, true);
    return this.values.decode(this.dSeg, this.dOff);
  }

  /**
   * Replaces a record's value, keeping its pointer. In place when the new value fits the
   * block; otherwise the value moves to a new block and the old one becomes a link to it.
   * Atomic across a crash: a journal record makes the old or the new value survive whole.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_TOO_LARGE, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   * @throws PILE_INVALID_VALUE as {@link put}; nothing is written
   */
  set(ptr: PilePointer, value: unknown): void {
    this.writable();
    // The value first: encoding it runs the caller's code (getters, toJSON), which may read this
    // pile and so move the resolved-record fields that replace() works on.
    this.values.prepare(value);
    if (this.catalog.structuresUndo === undefined) {
      this.resolve(ptr, true);
      this.replace();
      return;
    }
    try {
      this.resolve(ptr, true);
      this.replace();
    } catch (err) {
      this.catalog.undoStructures();
      throw err;
    }
    this.catalog.keepStructures();
  }

  // ------------------------------------------------- raw blocks (for @pile/cache and @pile/graph)

  /**
   * rawBuffer without the allocation, for hot paths of packages built on the pile: checks
   * `ptr` the same way, then points {@link rawSegment}, {@link rawView} and {@link rawF64} at
   * the whole segment holding the block and returns the offset of its bytes in it
   * ({@link rawLength} bytes long, 8-byte aligned). Read them before the next rawSeek; they are
   * valid until the block is deleted or the pile is closed.
   * @throws PILE_INVALID_POINTER when `ptr` is not a raw block, PILE_STALE_POINTER, PILE_CLOSED
   */
  rawSeek(ptr: PilePointer): number {
    let off = this.quickLocate(ptr, RAW_USED_WORD, this.rawWordMask);
    if (off < 0) {
      this.resolveRaw(ptr);
      off = this.hOff;
    }
    this.hOff = off;
    const seg = this.hSeg;
    const h = off >>> 2;
    this.rawSegment = seg.buf;
    this.rawView = seg.view;
    this.rawF64 = seg.f64;
    this.rawLength = seg.u32[h + 2]! - RAW_PREFIX;
    return this.hOff + BLOCK_HEADER_SIZE + RAW_PREFIX;
  }

  /** The segment of the last {@link rawSeek} (whole mapping, byte 0 = segment start). */
  rawSegment: Buffer = EMPTY_BUFFER;
  /** DataView over {@link rawSegment}. */
  rawView: DataView = new DataView(EMPTY_BUFFER.buffer, 0, 0);
  /** Float64Array over {@link rawSegment}: index = byte offset / 8. */
  rawF64: Float64Array = new Float64Array(0);
  /** Length of the raw bytes found by the last {@link rawSeek}. */
  rawLength = 0;

  /** resolve() of a raw block (no link followed): hSeg/hOff name it. */
  protected resolveRaw(ptr: PilePointer): void {
    this.open();
    this.resolve(ptr, false);
    if (kindOf(this.hSeg.u32[(this.hOff >>> 2) + 1]!) !== KIND_RAW)
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} is not a raw block`);
  }

  // ------------------------------------------------------------ typed records (used by TypedView)

  /** @internal */
  putTyped(id: number, codec: CompiledSchema<unknown>, value: unknown): PilePointer {
    this.writable();
    // store() and ValueEncoding.write() inlined by hand: this is the hottest write path. A small record is encoded for an
    // upper bound of its length, which spares the UTF-8 length scan of its strings (a native call each); a large one is
    // measured exactly, so that a bound up to 3x its size never refuses a record that fits. While the pile grows, the
    // record is encoded at the start of the tail and its block cut to the exact size after; otherwise it is trimmed.
    // Measuring and encoding run the caller's code (getters, zod), which reads the value twice:
    // writes are refused meanwhile (EncodeGuard), encode() checks what it reads again and stays
    // inside the block, and a throw gives the block back.
    let addr = 0;
    let inTail = false;
    let len: number;
    let size: number;
    let segIdx: number;
    let seg: Segment;
    let off: number;
    let length: number;
    GUARD.depth++;
    try {
      len = TYPED_PREFIX + codec.measureBound(value);
      if (len > TYPED_BOUND_LIMIT) len = TYPED_PREFIX + codec.measure(value);
      // blockSizeFor(len), written out (see the end of this method).
      size = len > 0x3fffffe0 ? BLOCK_HEADER_SIZE + len : (len + (BLOCK_HEADER_SIZE + 7)) & ~7;
      if (size < MIN_BLOCK_SIZE) size = MIN_BLOCK_SIZE;
      addr = this.alloc.tailFor(size);
      inTail = addr !== 0;
      if (!inTail) addr = this.alloc.alloc(size);
      // PointerFormat.segmentOf(), written out like the rest (see the end of this method).
      segIdx = Math.floor(addr * this.fmt.segmentInv);
      seg = this.segments[segIdx]!.use();
      off = addr - segIdx * this.segmentSize;
      const start = off + BLOCK_HEADER_SIZE;
      seg.view.setUint16(start, id, true);
      length = codec.encodeMeasured(value, seg.buf, seg.view, start + TYPED_PREFIX, off + size) - start;
    } catch (err) {
      if (addr !== 0 && !inTail) this.alloc.free(addr);
      throw err;
    } finally {
      GUARD.depth--;
    }
    let gen: number;
    // blockSizeFor(length): length <= len, whose size passed the 32-bit test above.
    let exact = (length + (BLOCK_HEADER_SIZE + 7)) & ~7;
    if (exact < MIN_BLOCK_SIZE) exact = MIN_BLOCK_SIZE;
    if (inTail) {
      gen = this.alloc.claimTail(seg, segIdx, off, exact, length); // counts the record too
    } else {
      if (length < len) this.alloc.trim(addr, exact);
      gen = genOf(seg.u32[(off >>> 2) + 1]!);
      countUsedTyped(this.alloc, length, segIdx);
    }
    // commit() inlined by hand for a typed record: as a call it cost about 20 ns of a 270 ns put
    // (TurboFan's inlining budget is spent on the codec by then). Same order of stores.
    // word1(), checkedWord1(), blockSizeFor() and pointerOf() are written out here as expressions: as calls they
    // take TurboFan's inlining budget (920 bytecode bytes per function), which must cover the
    // generated measureBound and encode; `node benchmarks/dist/run.js codec` (docs/benchmarks.md) measures it.
    const u32 = seg.u32;
    const h = off >>> 2;
    const g = gen & GEN_MASK;
    const used = (g | TYPED_USED_WORD) >>> 0;
    u32[h + 1] = (g | TYPED_RESERVED_WORD) >>> 0;
    u32[h + 3] = blockChecksum(seg.buf, u32, off, u32[h]!, (g | TYPED_CHECKED_WORD) >>> 0, length);
    u32[h + 2] = length;
    u32[h + 1] = used;
    const fmt = this.fmt;
    return (((gen & fmt.tagMask) * SEGMENT_DIV + segIdx) * fmt.offsetDiv + off * 0.125) as PilePointer;
  }

  /** @internal */
  getTyped(ptr: PilePointer, id: number, codec: CompiledSchema<unknown>): unknown {
    // A checked pile's views read through compiled code of their own (CheckedTypedView.get), so that this
    // branch gets no type feedback from them; it is here for any other caller.
    if (this.checkReads) return this.reread(this.typedOnce, ptr, id, codec.decode);
    // An unlinked record (no verifyOnRead) is decided by one comparison of the header word (quickLocate).
    const off = this.quickLocate(ptr, TYPED_USED_WORD, this.typedWordMask);
    const seg = this.hSeg;
    if (off >= 0 && (seg.u32[(off >>> 2) + 4]! & 0xffff) === id)
      return codec.decode(seg.buf, seg.view, off + BLOCK_HEADER_SIZE + TYPED_PREFIX, seg.u32[(off >>> 2) + 2]! - TYPED_PREFIX);
    return this.typedOnce(ptr, id, codec.decode);
  }

  /** @internal view.field()'s general path (compileFieldAccess names it `slow`): checked like a get. */
  fieldTyped(ptr: PilePointer, id: number, read: FieldReader): unknown {
    return this.reread(this.typedOnce, ptr, id, read);
  }

  /** One read of a typed record of schema `id` through the full resolve(); the caller's reread() checks it. */
  private typedOnce(ptr: PilePointer, id: number, read: FieldReader): unknown {
    this.open();
    this.resolve(ptr, true);
    const start = this.checkTypedId(ptr, id);
    return read(this.dSeg.buf, this.dSeg.view, start, this.dSeg.u32[(this.dOff >>> 2) + 2]! - TYPED_PREFIX);
  }

  protected checkTypedId(ptr: PilePointer, id: number): number {
    const w = this.dSeg.u32[(this.dOff >>> 2) + 1]!;
    const start = this.dOff + BLOCK_HEADER_SIZE;
    if (kindOf(w) !== KIND_TYPED || this.dSeg.view.getUint16(start, true) !== id) {
      const name = this.values.codecs.get(id)?.name ?? id;
      throw new PileError('PILE_SCHEMA_MISMATCH', `record ${ptr} is not a '${name}' record`);
    }
    return start + TYPED_PREFIX;
  }

  /**
   * Every write starts here, the typed put too: the refusals are a call of their own, so that
   * TurboFan's inlining budget goes to the codec (`node benchmarks/dist/run.js codec`, docs/benchmarks.md).
   */
  protected writable(): void {
    if (this.closed || this.readonly || GUARD.depth !== 0) this.refuseWrite();
    if (this.turn !== undefined) this.turn.enter();
    if (this.alloc.sinceCheckpoint >= this.checkpointBytes) this.checkpoint();
  }

  private refuseWrite(): never {
    if (this.closed) throw closedError();
    if (this.readonly) throw new PileError('PILE_READONLY', `pile ${this.dir ?? ''} is open read-only`);
    throw reentrantError();
  }

  /** Allocates a block with room for `room` payload bytes, writes the prepared value, commits it. */
  protected store(room: number, flags: number): PilePointer {
    const addr = this.alloc.alloc(blockSizeFor(room));
    const segIdx = this.fmt.segmentOf(addr);
    const seg = this.segments[segIdx]!;
    const off = addr - segIdx * this.segmentSize;
    const values = this.values;
    try {
      values.write(seg, off + BLOCK_HEADER_SIZE);
    } catch (err) {
      this.alloc.free(addr);
      throw err;
    }
    const gen = this.commit(seg, off, values.kind, flags, values.len);
    return this.fmt.pointer(segIdx, off, gen);
  }

  /** @internal Stores `bytes` as a catalog record (see Catalog.save). */
  storeCatalog(bytes: Uint8Array): PilePointer {
    this.values.prepareBytes(KIND_CATALOG, bytes);
    return this.store(bytes.length, 0);
  }

  /**
   * Writes length, checksum and then the state word: a crash before the last store leaves
   * the block RESERVED (freed by recovery), never a half-written USED record.
   * @internal
   */
  commit(seg: Segment, off: number, kind: number, flags: number, length: number): number {
    const u32 = seg.u32;
    const h = off >>> 2;
    const gen = genOf(u32[h + 1]!);
    const used = word1(gen, kind, STATE_USED, flags);
    u32[h + 1] = word1(gen, kind, STATE_RESERVED, flags);
    // Checksum before length: until the length is written the block's size check (word2) still
    // holds, and from then on its checksum does, so recovery can trust its size at every store.
    u32[h + 3] =
      kind === KIND_RAW && (flags & FLAG_SEALED) === 0
        ? headerChecksum(u32[h]!, checkedWord1(used), length)
        : blockChecksum(seg.buf, u32, off, u32[h]!, checkedWord1(used), length);
    u32[h + 2] = length;
    u32[h + 1] = used;
    countUsed(this.alloc, used, length, seg.index);
    return gen;
  }

  /** @internal Frees the block at `addr` (in recovery: only marks it free) inside a change of its segment (ChangeSeq.ts). */
  release(addr: number): void {
    const segIdx = this.fmt.segmentOf(addr);
    const seg = this.segments[segIdx]!.use();
    const off = addr - segIdx * this.segmentSize;
    const w = seg.u32[(off >>> 2) + 1]!;
    // No reader can hold a journal block (no pointer names one): its release is not marked.
    const began = kindOf(w) !== KIND_JOURNAL && beginChange(seg.u32);
    try {
      if (this.recovering) {
        // Free lists are not built yet: only mark it (rebuild() lists it); a damaged one is the torn-record pass's.
        if (blockDamage(seg.buf, seg.u32, off) === undefined) this.alloc.writeFree(seg.u32, off >>> 2, seg.u32[off >>> 2]!, genOf(w));
        return;
      }
      // Logged (UndoLog.ts), and stamped before its row changes, not only in free(): a repair puts back or rescans it.
      this.alloc.undo.armed++;
      this.alloc.touch(segIdx, off);
      if (stateOf(w) === STATE_USED) uncountUsed(this.alloc, w, seg.u32[(off >>> 2) + 2]!, segIdx);
      if (kindOf(w) === KIND_JOURNAL || this.retired?.retire(seg, off, addr) !== true) this.alloc.free(addr);
      this.alloc.undo.armed--;
    } finally {
      endChange(seg.u32, began);
    }
  }

  /** @internal Segment and offset of the block at `addr`. */
  seat(addr: number): { seg: Segment; off: number } {
    const segIdx = this.fmt.segmentOf(addr);
    return { seg: this.segments[segIdx]!.use(), off: addr - segIdx * this.segmentSize };
  }

  /** set(): the prepared value replaces the record resolved in hSeg/hOff (head) and dSeg/dOff (data). */
  protected replace(): void {
    checkBeforeWrite(this.hSeg, this.hOff);
    if (this.hSeg !== this.dSeg || this.hOff !== this.dOff) checkBeforeWrite(this.dSeg, this.dOff);
    replaceRecord(this, this.hSeg, this.hOff, this.dSeg, this.dOff);
  }

  /**
   * Decodes `ptr` and checks the block it names; sets hSeg/hOff and, following a link, dSeg/dOff.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CORRUPT
   */
  protected resolve(ptr: PilePointer, follow: boolean): void {
    if (!this.tryResolve(ptr, follow)) {
      // A made-up number in range lands here too: the block word it finds can not tell the two apart.
      throw new PileError(
        'PILE_STALE_POINTER',
        `pointer ${ptr} names no live record: the block at segment ${this.hSeg.index}, offset ${this.hOff} does not carry its tag (the record was deleted, or the number was never a pointer of this pile)`,
      );
    }
  }

  /** resolve() that answers false for a stale pointer instead of throwing. */
  protected tryResolve(ptr: PilePointer, follow = true): boolean {
    const checked = this.checkReads;
    if (checked) this.clearSeqs();
    if (typeof ptr !== 'number' || !(ptr > 0 && ptr <= Number.MAX_SAFE_INTEGER) || Math.floor(ptr) !== ptr) {
      throw new PileError('PILE_INVALID_POINTER', `${String(ptr)} is not a pile pointer`);
    }
    // PointerFormat's decode, written out: resolve() needs the tag, segment and offset at once, and
    // every get and set runs it (`node benchmarks/dist/run.js codec` and `gc`, docs/benchmarks.md).
    const fmt = this.fmt;
    const rest = Math.floor(ptr * fmt.offsetInv);
    const off = (ptr - rest * fmt.offsetDiv) * 8;
    const tag = Math.floor(rest * (1 / SEGMENT_DIV));
    const segIdx = rest - tag * SEGMENT_DIV;
    const seg = this.segments[segIdx] ?? segmentAdded(this, segIdx);
    seg?.use();
    if (seg === undefined || tag > fmt.tagMask || off < SEGMENT_HEADER_SIZE || off > this.segmentSize - 32) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} (segment ${segIdx}, offset ${off}) points outside the pile`);
    }
    const u32 = seg.u32;
    if (checked) this.seqBefore(u32); // before anything of the block is read: see readSettled()
    const h = off >>> 2;
    const w = u32[h + 1]!;
    this.hSeg = seg;
    this.hOff = off;
    if ((genOf(w) & fmt.tagMask) !== tag || stateOf(w) !== STATE_USED) {
      if (stateOf(w) === STATE_DAMAGED && (genOf(w) & fmt.tagMask) === tag)
        throw corruptError(seg, off, 'a record that recovery found damaged and left in place');
      return replacedSegment(this, seg) && this.tryResolve(ptr, follow);
    }
    const size = u32[h]!;
    const kind = kindOf(w);
    if (
      !this.alloc.saneSize(off, size) ||
      (flagsOf(w) & FLAG_BODY) !== 0 ||
      kind === KIND_CATALOG ||
      kind === KIND_JOURNAL ||
      kind === 0 ||
      kind > KIND_BUFFER
    ) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} (segment ${segIdx}, offset ${off}) does not name a record`);
    }
    this.checkRead(seg, off, size);
    this.dSeg = seg;
    this.dOff = off;
    if (kind === KIND_LINK && follow) {
      if (!this.locateBody(seg, off)) throw corruptError(seg, off, 'link to a block that is not a live body');
      this.checkRead(this.dSeg, this.dOff, this.dSeg.u32[this.dOff >>> 2]!);
    }
    return true;
  }

  private checkRead(seg: Segment, off: number, size: number): void {
    const length = seg.u32[(off >>> 2) + 2]!;
    if (length > size - BLOCK_HEADER_SIZE) throw corruptError(seg, off, `payload length ${length} exceeds block size ${size}`);
    if (this.verifyOnRead) {
      const reason = blockDamage(seg.buf, seg.u32, off);
      if (reason !== undefined) throw corruptError(seg, off, reason);
    }
  }

  /** @internal Sets dSeg/dOff to the body a link block points at; false when that is not a live body. */
  locateBody(seg: Segment, off: number): boolean {
    const target = seg.f64[(off + BLOCK_HEADER_SIZE) >>> 3]!;
    if (!Number.isSafeInteger(target) || target <= 0) return false;
    const segIdx = this.fmt.segmentOf(target);
    // A body in a segment added since this open mapped its segments: the link is no damage.
    const bSeg = (this.segments[segIdx] ?? segmentAdded(this, segIdx))?.use();
    const bOff = target - segIdx * this.segmentSize;
    if (bSeg === undefined || bOff < SEGMENT_HEADER_SIZE || (bOff & 7) !== 0 || bOff > this.segmentSize - 32) return false;
    if (this.checkReads) this.bodySeqBefore(bSeg.u32); // before the body's header is read
    const bw = bSeg.u32[(bOff >>> 2) + 1]!;
    if (stateOf(bw) !== STATE_USED || (flagsOf(bw) & FLAG_BODY) === 0 || !this.alloc.saneSize(bOff, bSeg.u32[bOff >>> 2]!)) return false;
    this.dSeg = bSeg;
    this.dOff = bOff;
    return true;
  }
}
