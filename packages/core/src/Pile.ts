import { randomInt } from 'node:crypto';
import type { ZodType } from 'zod';
import { MARK_WHOLE } from './alloc/Allocator';
import { BLOCK_HEADER_SIZE, FLAG_SEALED, KIND_TYPED, RAW_PREFIX, TYPED_PREFIX, kindOf } from './storage/BlockFormat';
import { blockDamage } from './storage/Checksum';
import { compactSegments } from './recovery/Compact';
import type { DirectoryLock, ReaderMark } from './storage/DirectoryLock';
import { encodeGuard } from './records/EncodeGuard';
import { walkEntries, type PileEntry } from './records/Entries';
import { PileError } from './PileError';
import { closeFiles, openFiles, saveCheckpoint, startPile } from './storage/PileFiles';
import { DEFAULT_SEGMENT_SIZE, checkOptions, invalid, type PileOptions } from './PileOptions';
import { NULL_POINTER, type PilePointer } from './records/PilePointer';
import { compileFieldAccess, type FieldAccessCode } from './records/PointerCheck';
import { emptyRecoveryReport, type RecoveryReport } from './recovery/Recovery';
import { EMPTY_BUFFER, TYPED_USED_WORD } from './records/RecordStore';
import type { InlineRead } from './schema/SchemaCodegen';
import { compileSchema, type CompiledSchema, type FieldReader } from './schema/SchemaCompiler';
import type { SchemaDescriptor } from './schema/SchemaDescriptor';
import type { Segment } from './storage/Segment';
import { foldTail } from './alloc/SegmentRows';
import { shareState } from './concurrency/SharedState';
import { PILE_WRITES, TurnStore, holdTurnIn } from './concurrency/TurnStore';
import type { FieldAccess } from './schema/TypedStore';
import { CheckedTypedView } from './schema/CheckedTypedView';
import { TypedView, type SchemaOptions } from './schema/TypedView';
import { payloadSize } from './records/ValueEncoding';
import { checkBeforeWrite, corruptError, verifyPile, type VerifyReport } from './recovery/Verify';
import { warmPile } from './storage/Warm';

/** Module-local: a reference to the import itself is a property load on each use. */
const GUARD = encodeGuard;

/** view.field() of a pile with verifyOnRead: every read takes the general path, which checks the checksum. */
const checkedFieldAccess: FieldAccessCode = (ptr, _segments, _read, slow) => slow(ptr);

export type { PileOptions } from './PileOptions';
export type { CorruptRecord, VerifyReport } from './recovery/Verify';
export type { RecoveryReport } from './recovery/Recovery';
export type { PileEntry } from './records/Entries';

/** Exact counters of a pile. */
export interface PileStats {
  /** Live records (what entries() yields); a linked record counts once. */
  objectCount: number;
  /** Records whose value moved to a larger block (their head holds a link). */
  linkCount: number;
  segmentCount: number;
  /** Bytes of all segments. */
  totalBytes: number;
  /** Bytes of all blocks in use, headers included (catalog and journal blocks too). */
  allocatedBytes: number;
  /** Payload bytes of the blocks in use. */
  utilizedBytes: number;
  /** allocatedBytes - utilizedBytes: headers, alignment, preallocated room. */
  overheadBytes: number;
  /** Bytes of free blocks, reusable by later puts. */
  freeBytes: number;
}

/**
 * Opens (or creates) a pile. Synchronous.
 * @throws PILE_INVALID_OPTION for a bad option, naming it
 * @throws PILE_LOCKED when this thread has it open for writing, or an older build's writer holds it (docs/concurrency.md)
 * @throws PILE_CORRUPT when a file of the pile is damaged (the message names it)
 * @throws PILE_FORMAT_VERSION when the pile was written by a newer format
 */
export function openPile(options: PileOptions = {}): Pile {
  return new Pile(options);
}

/**
 * A store of records outside the V8 heap, in off-heap Buffers or in mapped segment files.
 * See docs/guide.md and docs/architecture.md. The hot record paths (put, get, set, the typed
 * put and get, rawSeek, and the resolve, store and commit under them) are RecordStore's; this
 * class adds the pile's life (open, checkpoints, close), the other record, raw and typed calls,
 * schemas and roots, iteration, statistics, verify and compact.
 */
export class Pile extends TurnStore implements Iterable<PileEntry> {
  /** What the open did after an unclean shutdown. */
  readonly lastRecovery: RecoveryReport = emptyRecoveryReport();
  /** Block bytes written between checkpoints (Infinity: no checkpoints, for in-memory and read-only piles). */
  protected override readonly checkpointBytes: number;
  private checkpointTimer: ReturnType<typeof setInterval> | undefined;
  private lock: DirectoryLock | ReaderMark | undefined;

  /** Use {@link openPile}. */
  constructor(options: PileOptions = {}) {
    const { dir, readonly, verifyOnRead, create, onProgress, checkpointBytes, checkpointInterval, warm } = checkOptions(options);
    const files =
      dir === undefined
        ? undefined
        : openFiles(dir, options, readonly, create, options.segmentSize ?? DEFAULT_SEGMENT_SIZE, randomInt(1, 0x7fffffff));
    const segmentSize = files?.segmentSize ?? options.segmentSize ?? DEFAULT_SEGMENT_SIZE;
    super({
      dir,
      readonly,
      verifyOnRead,
      segmentSize,
      maxMemory: options.maxMemory ?? Number.MAX_SAFE_INTEGER,
      pileId: files?.pileId ?? randomInt(1, 0x7fffffff),
      meta: files?.meta,
      checkReads: readonly || files?.coord?.shared === true, // others may write beside (docs/concurrency.md)
    });
    this.lock = files?.lock;
    this.coord = files?.coord;
    if (this.coord?.shared === true) this.readers = this.coord.readers;
    this.checkpointBytes = dir !== undefined && !readonly ? checkpointBytes : Infinity;
    if (this.maxMemory < segmentSize) {
      this.releaseFiles();
      throw invalid('maxMemory', `${this.maxMemory} is less than one segment (segmentSize ${segmentSize})`);
    }
    const meta = this.meta;
    if (meta !== undefined && !readonly) {
      this.alloc.onMark = (segIdx, level) => meta.writeMark(segIdx, level);
      this.alloc.onMarkAll = (count) => meta.writeMarks(count, MARK_WHOLE);
    }
    const turn = (this.turn = readonly ? undefined : shareState(this, this.coord, this.lastRecovery, () => this.checkpoint()));
    try {
      if (files !== undefined) startPile(this, files, turn, this.lastRecovery, onProgress, () => this.checkpoint());
      if (dir !== undefined && !readonly && checkpointInterval > 0) {
        this.checkpointTimer = setInterval(() => {
          if (this.closed || GUARD.depth !== 0 || (turn !== undefined && !turn.tryEnter())) return;
          try {
            if (this.alloc.sinceCheckpoint !== 0) this.checkpoint();
          } catch {
            // pile.meta could not be written (a full disk, an I/O error): the marks stay, so the
            // next recovery scans more; the next write's own checkpoint reports the error.
          } finally {
            turn?.leave();
          }
        }, checkpointInterval);
        this.checkpointTimer.unref();
      }
    } catch (err) {
      turn?.abandon();
      this.releaseFiles();
      throw err;
    }
    // A pile that holds generic objects loads msgpackr and their structures now, not in its first get.
    if (this.catalog.structures.length > 0) this.warmGenericReads();
    if (warm) void warmPile({ segments: this.segments, segmentSize, isOpen: () => !this.closed }, this.alloc.tailAddr, onProgress);
  }

  /**
   * Loads msgpackr with the catalog's record structures and reads one generic record, the first
   * of the first few blocks: V8 compiles the get path and msgpackr's readers in the open, so the
   * first get after a restart costs what any later one does (it took 30 times a second get).
   */
  private warmGenericReads(): void {
    this.values.prepareReads();
    try {
      let seen = 0;
      for (const e of this.entries()) {
        if (e.kind === 'msgpack') {
          this.get(e.pointer);
          break;
        }
        if (++seen === 16) break;
      }
    } catch {
      // A damaged record reports itself to the get that reads it, not to the open.
    }
  }

  /**
   * Saves the allocator state to pile.meta and clears the dirty marks (PileFiles' saveCheckpoint).
   * Runs between operations only (from writable() and a timer), never inside one.
   */
  protected override checkpoint(): void {
    saveCheckpoint(this);
  }

  // ---------------------------------------------------------------- records, schemas and roots

  /**
   * get() for tools that read piles they did not write (`pile dump`): a typed record whose
   * schema is not registered in this process is decoded by the layout stored in the pile
   * instead of throwing (an object without zod's defaults or refinements).
   * @throws as {@link get}, but never PILE_SCHEMA_MISMATCH for an unregistered schema
   */
  inspect(ptr: PilePointer): unknown {
    this.open();
    this.resolve(ptr, true);
    const seg = this.dSeg;
    const off = this.dOff;
    if (kindOf(seg.u32[(off >>> 2) + 1]!) !== KIND_TYPED) return this.values.decode(seg, off);
    const p = off + BLOCK_HEADER_SIZE;
    const id = seg.view.getUint16(p, true);
    const codec = this.values.codecs.get(id)?.codec ?? this.catalog.storedCodec(id, seg, off);
    return codec.decode(seg.buf, seg.view, p + TYPED_PREFIX, seg.u32[(off >>> 2) + 2]! - TYPED_PREFIX);
  }

  /**
   * The name of the schema a typed record was written with; undefined for other records.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED
   */
  schemaOf(ptr: PilePointer): string | undefined {
    this.open();
    this.resolve(ptr, true);
    const seg = this.dSeg;
    if (kindOf(seg.u32[(this.dOff >>> 2) + 1]!) !== KIND_TYPED) return undefined;
    const id = seg.view.getUint16(this.dOff + BLOCK_HEADER_SIZE, true);
    return this.catalog.storedSchema(id)?.[0];
  }

  /**
   * Payload bytes of the record as stored (UTF-8 bytes of a string, encoded bytes of an object).
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED
   */
  sizeOf(ptr: PilePointer): number {
    return this.reread(this.sizeOfOnce, ptr, 0, 0) as number;
  }

  private sizeOfOnce(ptr: PilePointer): number {
    this.open();
    this.resolve(ptr, true);
    return payloadSize(this.dSeg, this.dOff);
  }

  /**
   * The check verifyOnRead makes, for one record of a pile opened without it (tools that copy data
   * out, like `pile export`): a PILE_CORRUPT error naming file, segment and offset when the record's
   * checksum or structure does not hold, else undefined.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED
   */
  checkRecord(ptr: PilePointer): PileError | undefined {
    this.open();
    this.resolve(ptr, false);
    const reason = blockDamage(this.hSeg.buf, this.hSeg.u32, this.hOff);
    return reason === undefined ? undefined : corruptError(this.hSeg, this.hOff, reason);
  }

  /**
   * Deletes a record; its space is reused. Returns false when it was already gone (stale pointer).
   * @throws PILE_INVALID_POINTER, PILE_READONLY, PILE_CLOSED
   */
  delete(ptr: PilePointer): boolean {
    this.writable();
    if (!this.tryResolve(ptr)) return false;
    const linked = this.hSeg !== this.dSeg || this.hOff !== this.dOff;
    checkBeforeWrite(this.hSeg, this.hOff);
    if (linked) checkBeforeWrite(this.dSeg, this.dOff);
    const hAddr = this.fmt.address(this.hSeg.index, this.hOff);
    const dAddr = this.fmt.address(this.dSeg.index, this.dOff);
    this.release(hAddr);
    if (linked) this.release(dAddr);
    return true;
  }

  /**
   * True when `ptr` points at a live record.
   * @throws PILE_CLOSED
   */
  has(ptr: PilePointer): boolean {
    return this.reread(this.hasOnce, ptr, 0, 0) as boolean;
  }

  private hasOnce(ptr: PilePointer): boolean {
    this.open();
    try {
      return this.tryResolve(ptr);
    } catch (err) {
      if (err instanceof PileError && err.code === 'PILE_INVALID_POINTER') return false;
      throw err;
    }
  }

  // ------------------------------------------------- raw blocks (for @pile/cache and @pile/graph)

  /**
   * A zeroed, mutable block of `size` bytes, for index structures that are updated in place
   * through {@link rawBuffer}. Raw blocks carry no checksum; `tag` (0..2^32-1) says who owns it.
   * @throws PILE_TOO_LARGE, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  allocRaw(size: number, tag: number): PilePointer {
    this.writable();
    if (!Number.isSafeInteger(size) || size < 0) throw invalid('size', `expected a non-negative integer, got ${String(size)}`);
    if (!Number.isInteger(tag) || tag < 0 || tag > 0xffffffff) throw invalid('tag', `expected a u32, got ${String(tag)}`);
    this.values.prepareRaw(tag, size, undefined);
    return this.store(this.values.len, 0);
  }

  /**
   * Stores `bytes` as a sealed raw block owned by `tag`: checksummed like any record (verify,
   * recovery and verifyOnRead check it) and meant to be read, not mutated, through rawBuffer.
   * Packages use it for records they must find again by scanning (entries() kind 'raw' + rawTag).
   * @throws PILE_TOO_LARGE, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  putRaw(bytes: Uint8Array, tag: number): PilePointer {
    this.writable();
    if (!(bytes instanceof Uint8Array)) throw invalid('bytes', 'expected a Uint8Array');
    if (!Number.isInteger(tag) || tag < 0 || tag > 0xffffffff) throw invalid('tag', `expected a u32, got ${String(tag)}`);
    this.values.prepareRaw(tag, bytes.length, bytes);
    return this.store(this.values.len, FLAG_SEALED);
  }

  /**
   * The bytes of a raw block, as a Buffer over the pile's memory (no copy): writes go straight
   * to the pile. 8-byte aligned, so Float64Array/Uint32Array views over it work. Valid until
   * the block is deleted or the pile is closed.
   * @throws PILE_INVALID_POINTER when `ptr` is not a raw block, PILE_STALE_POINTER, PILE_CLOSED
   */
  rawBuffer(ptr: PilePointer): Buffer {
    this.resolveRaw(ptr);
    const start = this.hOff + BLOCK_HEADER_SIZE + RAW_PREFIX;
    return this.hSeg.buf.subarray(start, this.hOff + BLOCK_HEADER_SIZE + this.hSeg.u32[(this.hOff >>> 2) + 2]!);
  }

  /** The owner tag of a raw block. @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED */
  rawTag(ptr: PilePointer): number {
    this.resolveRaw(ptr);
    return this.hSeg.u32[(this.hOff + BLOCK_HEADER_SIZE) >>> 2]!;
  }

  /** @internal */
  setTyped(ptr: PilePointer, id: number, codec: CompiledSchema<unknown>, value: unknown): void {
    this.writable();
    // The value first: measuring runs the caller's code (getters, zod), which may read this pile
    // and so move the resolved-record fields that replace() works on.
    this.values.prepareTyped(id, codec, value);
    this.resolve(ptr, true);
    this.checkTypedId(ptr, id);
    this.replace();
  }

  /**
   * view.field()'s code for one field of schema `id` in this pile (`name` undefined: the whole
   * record, for a checked typed get), and what it is called with (see compileFieldAccess).
   * @internal
   */
  typedFieldAccess(id: number, name: string | undefined, read: FieldReader, inline: InlineRead | undefined): FieldAccess {
    const slow = (ptr: number): unknown => this.fieldTyped(ptr as PilePointer, id, read);
    const code = this.verifyOnRead
      ? checkedFieldAccess
      : compileFieldAccess(this.fmt, TYPED_USED_WORD, this.typedWordMask, id, name, inline, this.checkReads);
    return { code, segments: this.segments, read, slow };
  }

  /**
   * A typed view whose records are encoded by code compiled once from the zod schema.
   * The schema is persisted under `name`; a later open must register a compatible one.
   * @throws PILE_SCHEMA_MISMATCH when `name` was registered with an incompatible shape
   * @throws PILE_INVALID_OPTION when the schema uses an unsupported type (the message names the path)
   * @throws PILE_READONLY when a read-only pile does not know the schema yet
   * @throws PILE_CLOSED
   */
  schema<T>(name: string, schema: ZodType<T>, options: SchemaOptions = {}): TypedView<T> {
    this.open();
    this.turn?.enter(); // the catalog of now, and a new schema id no other process takes
    if (typeof name !== 'string' || name === '') throw invalid('name', 'a schema name must be a non-empty string');
    const codec = compileSchema(schema, options.validate === undefined ? {} : { validate: options.validate });
    const stored = codec as CompiledSchema<unknown>;
    const id = this.catalog.register(name, stored);
    this.values.codecs.set(id, { name, codec: stored });
    return new (this.checkReads ? CheckedTypedView : TypedView)<T>(this, id, codec as CompiledSchema<T>, name);
  }

  /**
   * Names a record so a later open finds it; null removes the name. Persisted at once.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_READONLY, PILE_CLOSED
   */
  setRoot(name: string, ptr: PilePointer | null): void {
    this.writable();
    if (typeof name !== 'string' || name === '') throw invalid('name', 'a root name must be a non-empty string');
    if (ptr === null || ptr === NULL_POINTER) {
      if (!this.catalog.roots.has(name)) return;
      this.catalog.change((c) => c.roots.delete(name));
    } else {
      this.resolve(ptr, true);
      if (this.catalog.roots.get(name) === ptr) return;
      this.catalog.change((c) => c.roots.set(name, ptr));
    }
  }

  /**
   * The pointer named `name`, or undefined.
   * @throws PILE_CLOSED
   */
  getRoot(name: string): PilePointer | undefined {
    this.open();
    if (this.readonly) this.catalog.refresh();
    else this.turn?.view();
    const p = this.catalog.roots.get(name);
    return p === undefined ? undefined : (p as PilePointer);
  }

  /** Names of all roots. @throws PILE_CLOSED */
  roots(): string[] {
    this.open();
    if (this.readonly) this.catalog.refresh();
    this.turn?.view();
    return [...this.catalog.roots.keys()];
  }

  /**
   * Registered schema names with their ids, fingerprints and stored layouts (a layout is enough to
   * decode the schema's records without its zod schema: compileDescriptor). @throws PILE_CLOSED
   */
  schemas(): { name: string; id: number; fingerprint: string; descriptor: SchemaDescriptor }[] {
    this.open();
    return [...this.catalog.schemas].map(([name, s]) => ({ name, id: s.id, fingerprint: s.fingerprint, descriptor: s.descriptor }));
  }

  // ---------------------------------------------------------------- the whole pile

  [Symbol.iterator](): IterableIterator<PileEntry> {
    return this.entries();
  }

  /**
   * Every live record once, in address order; a linked record is yielded at its head.
   * Records added or deleted during the iteration may or may not be seen.
   * @throws PILE_CLOSED
   */
  entries(): IterableIterator<PileEntry> {
    // Checked at the call, not at the first next(): a generator body would defer it.
    this.open();
    return walkEntries(this, () => this.closed);
  }

  /** Exact counters. @throws PILE_CLOSED */
  get stats(): PileStats {
    this.open();
    this.turn?.view();
    const a = this.alloc;
    foldTail(a); // what appends to the tail's segment added (SegmentRows.ts)
    const totalBytes = this.segments.length * this.segmentSize;
    return {
      objectCount: a.objectCount,
      linkCount: a.linkCount,
      segmentCount: this.segments.length,
      totalBytes,
      allocatedBytes: a.allocatedBytes,
      utilizedBytes: a.utilizedBytes,
      overheadBytes: a.allocatedBytes - a.utilizedBytes,
      freeBytes: a.freeBytes,
    };
  }

  /**
   * Full integrity check: walks every block and free list. Never throws on damage.
   * @throws PILE_CLOSED
   */
  verify(onProgress?: (p: { phase: string; done: number; total: number }) => void): VerifyReport {
    this.open();
    this.turn?.enter(); // no other process writes meanwhile
    const linkHolds = (seg: Segment, off: number): boolean => this.locateBody(seg, off);
    const catalogAddr = this.readonly || !this.persistent ? undefined : this.catalog.address;
    return verifyPile(this.segments, this.alloc, this.readonly, linkHolds, onProgress, catalogAddr);
  }

  /**
   * msync every segment and fsync the meta file: what was stored before survives power loss.
   * @throws PILE_CLOSED
   */
  flush(): void {
    this.open();
    if (!this.persistent || this.readonly) return;
    for (const seg of this.segments) seg.sync();
    this.meta!.sync();
  }

  /**
   * Rebuilds the free lists (merging neighbouring free blocks) and releases empty segments at
   * the end of the pile (their files are deleted). Interrupted at any point, the pile stays valid:
   * the meta file stops counting a segment before its file is deleted, and merging free blocks
   * rewrites one header at a time, each leaving a walkable segment.
   * Segments in the middle can not be released (pointers name segments by index).
   * @throws PILE_READONLY, PILE_CLOSED
   */
  compact(onProgress?: (p: { phase: string; done: number; total: number }) => void): {
    segmentsBefore: number;
    segmentsAfter: number;
    bytesReleased: number;
  } {
    this.writable();
    const result = compactSegments(this, onProgress);
    if (this.persistent) this.checkpoint();
    return result;
  }

  /**
   * Clean shutdown (see closeFiles: the last writer to close marks the pile clean). Idempotent.
   * Inside batch(fn) it releases the batch's writer turn first; writes after it throw PILE_CLOSED.
   * @throws PILE_REENTRANT from code that runs inside a write of this pile; PILE_IO
   */
  close(): void {
    if (this.closed) return;
    this.closable();
    try {
      if (this.persistent && !this.readonly) closeFiles(this, this.coord, this.turn, () => this.checkpoint());
    } finally {
      this.turn?.abandon();
      this.releaseFiles();
    }
  }

  /** True once close() ran. */
  get isClosed(): boolean {
    return this.closed;
  }

  private releaseFiles(): void {
    this.closed = true;
    if (this.checkpointTimer !== undefined) clearInterval(this.checkpointTimer);
    this.checkpointTimer = undefined;
    this.meta?.close();
    this.meta = undefined;
    this.coord?.close();
    this.coord = undefined;
    this.lock?.release();
    this.lock = undefined;
    // Gives every segment's memory back now; views still held anywhere read zeros from then on.
    for (const seg of this.segments) seg.release();
    this.segments.length = 0;
    this.hSeg = this.dSeg = undefined as unknown as Segment;
    this.rawSegment = EMPTY_BUFFER;
    this.rawView = new DataView(EMPTY_BUFFER.buffer, 0, 0);
    this.rawF64 = new Float64Array(0);
    this.values.clear();
    this.catalog.storedCodecs.clear();
  }
}

// Each write holds the writer turn until it returns (docs/concurrency.md); writable() enters it.
holdTurnIn(Pile.prototype, PILE_WRITES);
