import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomInt } from 'node:crypto';
import type { Packr } from 'msgpackr';
import type { ZodType } from 'zod';
import { Allocator, MARK_CLEAN, MARK_WHOLE } from './Allocator';
import {
  BLOCK_HEADER_SIZE,
  MIN_BLOCK_SIZE,
  FLAG_BODY,
  FLAG_SEALED,
  FLAG_SHIFT,
  GEN_MASK,
  KIND_BUFFER,
  KIND_BYTES,
  KIND_CATALOG,
  KIND_JOURNAL,
  KIND_LINK,
  KIND_MSGPACK,
  KIND_NAMES,
  KIND_RAW,
  KIND_STRING,
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
  type RecordKind,
} from './BlockFormat';
import { blockChecksum, blockDamage, headerChecksum } from './Checksum';
import { DirectoryLock, ReaderMark } from './DirectoryLock';
import { META_FILE_NAME, MetaFile, type CatalogSlot, type MetaHeader } from './MetaFile';
import { encodeGuard, reentrantError } from './EncodeGuard';
import { ioError } from './FileAccess';
import { releaseEmptySegments } from './Compact';
import { PileError } from './PileError';
import { BOOT_ID, checkpointRegions, emptyRecoveryReport, recoverPile, type RecoveryReport } from './Recovery';
import { verifyPile, type VerifyReport } from './Verify';
import { DEFAULT_SEGMENT_SIZE, checkOptions, invalid, isSegmentSize, type PileOptions } from './PileOptions';
import { genericValueFault, illFormedString, refuseFunction } from './ValueCheck';
import { compileFieldAccess, compileQuickLocate, type FieldAccessCode, type QuickLocate } from './PointerCheck';
import { MAX_SEGMENTS, PointerFormat, SEGMENT_DIV } from './PointerFormat';
import { NULL_POINTER, type PilePointer } from './PilePointer';
import {
  compileDescriptor,
  compileSchema,
  isCompatibleEvolution,
  type CompiledSchema,
  type FieldReader,
  type SchemaDescriptor,
} from './SchemaCompiler';
import type { InlineRead } from './SchemaCodegen';
import { Segment, segmentFileName } from './Segment';
import type { FieldAccess } from './TypedStore';
import { TypedView, type SchemaOptions } from './TypedView';

/** Module-local: a reference to the import itself is a property load on each use. */
const GUARD = encodeGuard;
/** Errors of the system, not of the caller's `dir`: reported as PILE_IO. */
const IO_REFUSALS = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'EDQUOT', 'EIO']);

const EMPTY_BUFFER = Buffer.alloc(0);
/** word1 of a committed, unlinked typed record, generation bits zero. */
const TYPED_USED_WORD = word1(0, KIND_TYPED, STATE_USED, 0);
/** checkedWord1() of a committed typed record, generation bits zero. */
const TYPED_CHECKED_WORD = checkedWord1(TYPED_USED_WORD);
/** word1 of a typed record being written, generation bits zero. */
const TYPED_RESERVED_WORD = word1(0, KIND_TYPED, STATE_RESERVED, 0);
/** word1 of a committed raw block (sealed or not), generation bits zero. */
const RAW_USED_WORD = word1(0, KIND_RAW, STATE_USED, 0);
/** Typed records whose length bound is above this are measured exactly before allocation. */
const TYPED_BOUND_LIMIT = 4096;
/** view.field() of a pile with verifyOnRead: every read takes the general path, which checks the checksum. */
const checkedFieldAccess: FieldAccessCode = (ptr, _segments, _read, slow) => slow(ptr);

const JOURNAL_INPLACE = 1;
const JOURNAL_LINK = 2;
/** Journal payload: u32 op, u32 kind, f64 target, f64 new body, f64 old body, then the new payload. */
const JOURNAL_PREFIX = 32;

export type { PileOptions } from './PileOptions';
export type { CorruptRecord, VerifyReport } from './Verify';
export type { RecoveryReport } from './Recovery';

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

/** One live record as yielded by {@link Pile.entries}. */
export interface PileEntry {
  pointer: PilePointer;
  kind: RecordKind;
  /** Payload bytes as stored (what sizeOf returns). */
  size: number;
}

interface SchemaEntry {
  id: number;
  fingerprint: string;
  descriptor: SchemaDescriptor;
}

/** Names are user strings: Maps, so that a root called 'constructor' or '__proto__' is just a name. */
interface Catalog {
  roots: Map<string, number>;
  structures: unknown[];
  schemas: Map<string, SchemaEntry>;
  nextSchemaId: number;
}

/** The catalog as stored (docs/format.md, kind 6). */
interface CatalogJson {
  roots: Record<string, number>;
  structures: unknown[];
  schemas: Record<string, SchemaEntry>;
  nextSchemaId: number;
}

/**
 * Opens (or creates) a pile. Synchronous.
 * @throws PILE_INVALID_OPTION for a bad option, naming it
 * @throws PILE_LOCKED when another writer holds the directory
 * @throws PILE_CORRUPT when a file of the pile is damaged (the message names it)
 * @throws PILE_FORMAT_VERSION when the pile was written by a newer format
 */
export function openPile(options: PileOptions = {}): Pile {
  return new Pile(options);
}

/**
 * A store of records outside the V8 heap, in off-heap Buffers or in mapped segment files.
 * See docs/guide.md and docs/architecture.md.
 */
export class Pile implements Iterable<PileEntry> {
  /** True when the pile lives in files and survives restarts. */
  readonly persistent: boolean;
  readonly readonly: boolean;
  readonly dir: string | undefined;
  readonly segmentSize: number;
  readonly maxMemory: number;
  /** What the open did after an unclean shutdown. */
  readonly lastRecovery: RecoveryReport = emptyRecoveryReport();
  /** Block bytes written between checkpoints (Infinity: no checkpoints, for in-memory and read-only piles). */
  private readonly checkpointBytes: number;
  private checkpointTimer: ReturnType<typeof setInterval> | undefined;

  private segments: Segment[] = [];
  private alloc!: Allocator;
  private meta: MetaFile | undefined;
  private lock: DirectoryLock | ReaderMark | undefined;
  private closed = false;
  private recovering = false;
  private readonly verifyOnRead: boolean;
  private readonly pileId: number;
  /** Pointer and address arithmetic of this pile's segment size. */
  private readonly fmt: PointerFormat;
  /** word1 bits a typed pointer pins down: the tag's generation bits, kind, state, flags. */
  private readonly typedWordMask: number;
  /** typedWordMask without the SEALED flag: rawSeek takes sealed and mutable raw blocks alike. */
  private readonly rawWordMask: number;
  /**
   * The fast path of resolve() for the common case (an unlinked record, no verifyOnRead),
   * compiled for this pile's geometry: see compileQuickLocate.
   */
  private readonly quickLocate: QuickLocate;
  private catalog: Catalog = { roots: new Map(), structures: [], schemas: new Map(), nextSchemaId: 1 };
  private catalogAddr = 0;
  private slot: CatalogSlot = { seq: 0, addr: 0 };
  private slotIndex: 0 | 1 = 1;
  /**
   * The catalog as it was before the generic value in progress added record structures to it:
   * kept (its record not freed yet) until the value's write succeeds, put back if it fails.
   */
  private structuresUndo: { structures: unknown[]; addr: number } | undefined;
  private packrInstance: Packr | undefined;
  private readonly codecs = new Map<number, { name: string; codec: CompiledSchema<unknown> }>();
  /** Codecs compiled from stored layouts by inspect(), for schemas not registered here. */
  private readonly storedCodecs = new Map<number, CompiledSchema<unknown>>();

  // Scratch of the last resolve(): the head block, and the block holding the data (== head unless linked).
  private hSeg!: Segment;
  private hOff = 0;
  private dSeg!: Segment;
  private dOff = 0;

  // Scratch of the last prepare(): what a put/set is about to write.
  private pKind = 0;
  private pLen = 0;
  private pValue: unknown;
  private pBytes: Uint8Array | undefined;
  private pCodec: CompiledSchema<unknown> | undefined;
  private pSchemaId = 0;

  /** Use {@link openPile}. */
  constructor(options: PileOptions = {}) {
    const { dir, readonly, verifyOnRead, create, onProgress, checkpointBytes, checkpointInterval } = checkOptions(options);
    this.checkpointBytes = dir !== undefined && !readonly ? checkpointBytes : Infinity;
    this.readonly = readonly;
    this.verifyOnRead = verifyOnRead;
    this.dir = dir;
    this.persistent = dir !== undefined;

    let segmentSize = options.segmentSize ?? DEFAULT_SEGMENT_SIZE;
    let pileId = randomInt(1, 0x7fffffff);
    let existing = false;
    let clean = true;
    let segmentCount = 0;
    if (dir !== undefined) {
      ({ existing, segmentSize, pileId, clean, segmentCount } = this.openFiles(dir, options, segmentSize, pileId, create));
    }
    this.segmentSize = segmentSize;
    this.maxMemory = options.maxMemory ?? Number.MAX_SAFE_INTEGER;
    if (this.maxMemory < segmentSize) {
      this.releaseFiles();
      throw invalid('maxMemory', `${this.maxMemory} is less than one segment (segmentSize ${segmentSize})`);
    }
    this.pileId = pileId;
    const fmt = new PointerFormat(segmentSize);
    this.fmt = fmt;
    this.typedWordMask = ~(GEN_MASK & ~fmt.tagMask) >>> 0;
    this.rawWordMask = (this.typedWordMask & ~(FLAG_SEALED << FLAG_SHIFT)) >>> 0;
    this.quickLocate = verifyOnRead ? () => -1 : compileQuickLocate(fmt);
    this.alloc = new Allocator(this.segments, segmentSize, () => this.addSegment());
    if (dir !== undefined && !readonly) {
      const meta = this.meta!;
      this.alloc.onMark = (segIdx, level) => meta.writeMark(segIdx, level);
      this.alloc.onMarkAll = (count) => meta.writeMarks(count, MARK_WHOLE);
    }

    try {
      if (existing) this.load(segmentCount, clean, onProgress);
      if (dir !== undefined && !readonly) {
        this.checkpoint();
        if (checkpointInterval > 0) {
          this.checkpointTimer = setInterval(() => {
            if (this.closed || this.alloc.sinceCheckpoint === 0 || GUARD.depth !== 0) return;
            try {
              this.checkpoint();
            } catch {
              // pile.meta could not be written (a full disk, an I/O error): the marks stay, so the
              // next recovery scans more; the next write's own checkpoint reports the error.
            }
          }, checkpointInterval);
          this.checkpointTimer.unref();
        }
      }
    } catch (err) {
      this.releaseFiles();
      throw err;
    }
  }

  /**
   * Saves the allocator state to pile.meta and clears the dirty marks: recovery after a crash then
   * scans only the segments (or the part of the tail's segment) written after this. The state goes
   * first: killed between the two writes, the old marks stay, naming more than was written since.
   * Runs between operations only (from writable() and a timer), never inside one.
   */
  private checkpoint(): void {
    const meta = this.meta!;
    meta.writeCheckpoint({ segmentCount: this.segments.length, bootId: BOOT_ID, state: this.alloc.snapshot() });
    meta.writeMarks(this.segments.length, MARK_CLEAN);
    this.alloc.checkpointed();
  }

  // ---------------------------------------------------------------- public API

  /**
   * Stores a value and returns its pointer. Strings are stored as UTF-8 and Uint8Array/Buffer
   * as raw bytes; anything else goes through msgpackr with shared record structures.
   * `preallocate` reserves room for a later, larger `set` in place.
   * @throws PILE_TOO_LARGE when the value does not fit in one segment
   * @throws PILE_OUT_OF_SPACE when maxMemory is reached
   * @throws PILE_READONLY, PILE_CLOSED
   * @throws PILE_INVALID_OPTION for a bad `preallocate`
   */
  put(value: unknown, opts?: { preallocate?: number }): PilePointer {
    this.writable();
    const pre = opts === undefined ? undefined : opts.preallocate;
    if (pre !== undefined && (!Number.isSafeInteger(pre) || pre < 0))
      throw invalid('preallocate', `expected a non-negative integer, got ${String(pre)}`);
    this.prepare(value);
    const room = pre !== undefined && pre > this.pLen ? pre : this.pLen;
    if (this.structuresUndo === undefined) return this.store(room, 0);
    let ptr: PilePointer;
    try {
      ptr = this.store(room, 0);
    } catch (err) {
      this.undoStructures();
      throw err;
    }
    this.keepStructures();
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
    this.open();
    this.resolve(ptr, true);
    return this.decodeAt(this.dSeg, this.dOff) as T;
  }

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
    if (kindOf(seg.u32[(off >>> 2) + 1]!) !== KIND_TYPED) return this.decodeAt(seg, off);
    const p = off + BLOCK_HEADER_SIZE;
    const id = seg.view.getUint16(p, true);
    const codec = this.codecs.get(id)?.codec ?? this.storedCodec(id, seg, off);
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
    return this.storedSchema(id)?.[0];
  }

  /**
   * Replaces a record's value, keeping its pointer. In place when the new value fits the
   * block; otherwise the value moves to a new block and the old one becomes a link to it.
   * Atomic across a crash: a journal record makes the old or the new value survive whole.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_TOO_LARGE, PILE_OUT_OF_SPACE, PILE_READONLY, PILE_CLOSED
   */
  set(ptr: PilePointer, value: unknown): void {
    this.writable();
    // The value first: encoding it runs the caller's code (getters, toJSON), which may read this
    // pile and so move the resolved-record fields that replace() works on.
    this.prepare(value);
    if (this.structuresUndo === undefined) {
      this.resolve(ptr, true);
      this.replace();
      return;
    }
    try {
      this.resolve(ptr, true);
      this.replace();
    } catch (err) {
      this.undoStructures();
      throw err;
    }
    this.keepStructures();
  }

  /**
   * Deletes a record; its space is reused. Returns false when it was already gone (stale pointer).
   * @throws PILE_INVALID_POINTER, PILE_READONLY, PILE_CLOSED
   */
  delete(ptr: PilePointer): boolean {
    this.writable();
    if (!this.tryResolve(ptr)) return false;
    const linked = this.hSeg !== this.dSeg || this.hOff !== this.dOff;
    this.checkBeforeWrite(linked);
    const hAddr = this.addrOf(this.hSeg, this.hOff);
    const dAddr = this.addrOf(this.dSeg, this.dOff);
    this.release(hAddr);
    if (linked) this.release(dAddr);
    return true;
  }

  /**
   * True when `ptr` points at a live record.
   * @throws PILE_CLOSED
   */
  has(ptr: PilePointer): boolean {
    this.open();
    try {
      return this.tryResolve(ptr);
    } catch (err) {
      if (err instanceof PileError && err.code === 'PILE_INVALID_POINTER') return false;
      throw err;
    }
  }

  /**
   * Payload bytes of the record as stored (UTF-8 bytes of a string, encoded bytes of an object).
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED
   */
  sizeOf(ptr: PilePointer): number {
    this.open();
    this.resolve(ptr, true);
    return this.payloadSize(this.dSeg, this.dOff);
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
    if (typeof name !== 'string' || name === '') throw invalid('name', 'a schema name must be a non-empty string');
    const codec = compileSchema(schema, options.validate === undefined ? {} : { validate: options.validate });
    if (this.readonly) this.refreshCatalog();
    const known = this.catalog.schemas.get(name);
    let id: number;
    if (known === undefined) {
      if (this.readonly) throw new PileError('PILE_READONLY', `schema '${name}' is not in this read-only pile`);
      id = this.catalog.nextSchemaId;
      if (id > 0xffff) throw new PileError('PILE_OUT_OF_SPACE', 'a pile holds at most 65535 schemas');
      this.changeCatalog((c) => {
        c.nextSchemaId = id + 1;
        c.schemas.set(name, { id, fingerprint: codec.fingerprint, descriptor: codec.descriptor });
      });
    } else {
      id = known.id;
      if (known.fingerprint !== codec.fingerprint) {
        if (!isCompatibleEvolution(known.descriptor, codec.descriptor)) {
          throw new PileError(
            'PILE_SCHEMA_MISMATCH',
            `schema '${name}' does not match the one stored in the pile (fingerprint ${known.fingerprint}, given ${codec.fingerprint}); only optional fields appended at the end are a compatible change`,
          );
        }
        if (this.readonly) throw new PileError('PILE_READONLY', `schema '${name}' would be evolved, but the pile is read-only`);
        this.changeCatalog((c) => c.schemas.set(name, { id, fingerprint: codec.fingerprint, descriptor: codec.descriptor }));
      }
    }
    this.codecs.set(id, { name, codec: codec as CompiledSchema<unknown> });
    return new TypedView<T>(this, id, codec as CompiledSchema<T>, name);
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
      this.changeCatalog((c) => c.roots.delete(name));
    } else {
      this.resolve(ptr, true);
      if (this.catalog.roots.get(name) === ptr) return;
      this.changeCatalog((c) => c.roots.set(name, ptr));
    }
  }

  /**
   * The pointer named `name`, or undefined.
   * @throws PILE_CLOSED
   */
  getRoot(name: string): PilePointer | undefined {
    this.open();
    if (this.readonly) this.refreshCatalog();
    const p = this.catalog.roots.get(name);
    return p === undefined ? undefined : (p as PilePointer);
  }

  /** Names of all roots. @throws PILE_CLOSED */
  roots(): string[] {
    this.open();
    if (this.readonly) this.refreshCatalog();
    return [...this.catalog.roots.keys()];
  }

  /** Registered schema names with their ids. @throws PILE_CLOSED */
  schemas(): { name: string; id: number; fingerprint: string }[] {
    this.open();
    return [...this.catalog.schemas].map(([name, s]) => ({ name, id: s.id, fingerprint: s.fingerprint }));
  }

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
    return this.walkEntries();
  }

  private *walkEntries(): IterableIterator<PileEntry> {
    for (let s = 0; s < this.segments.length; s++) {
      const seg = this.segments[s]!.use();
      let off = SEGMENT_HEADER_SIZE;
      while (off < this.segmentSize) {
        if (this.closed) throw closedError();
        const size = seg.u32[off >>> 2]!;
        const w = seg.u32[(off >>> 2) + 1]!;
        if (!this.alloc.saneSize(off, size) || stateOf(w) === STATE_DAMAGED) break;
        if (stateOf(w) === STATE_USED && (flagsOf(w) & FLAG_BODY) === 0) {
          const kind = kindOf(w);
          let dSeg = seg;
          let dOff = off;
          if (kind === KIND_LINK && this.locateBody(seg, off)) {
            dSeg = this.dSeg;
            dOff = this.dOff;
          }
          const name = KIND_NAMES[kindOf(dSeg.u32[(dOff >>> 2) + 1]!)];
          if (name !== undefined) {
            yield { pointer: this.pointerOf(s, off, genOf(w)), kind: name, size: this.payloadSize(dSeg, dOff) };
          }
        }
        off += size;
      }
    }
  }

  /** Exact counters. @throws PILE_CLOSED */
  get stats(): PileStats {
    this.open();
    const a = this.alloc;
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
    const linkHolds = (seg: Segment, off: number): boolean => this.locateBody(seg, off);
    return verifyPile(this.segments, this.alloc, this.readonly, linkHolds, onProgress);
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
    const before = this.segments.length;
    releaseEmptySegments(
      this.segments,
      this.alloc,
      (keep) => {
        this.meta?.writeHeader(this.metaHeader(keep, false));
        this.meta?.sync();
      },
      onProgress,
    );
    this.alloc.rebuild((done) => onProgress?.({ phase: 'rebuild', done, total: this.segments.length }));
    if (this.persistent) this.checkpoint();
    return {
      segmentsBefore: before,
      segmentsAfter: this.segments.length,
      bytesReleased: (before - this.segments.length) * this.segmentSize,
    };
  }

  /** Clean shutdown: saves allocator state and marks the pile clean so the next open does not scan. Idempotent. */
  close(): void {
    if (this.closed) return;
    try {
      if (this.persistent && !this.readonly && this.meta !== undefined) {
        for (const seg of this.segments) seg.sync();
        this.meta.writeCleanState(this.alloc.snapshot());
        this.meta.writeHeader(this.metaHeader(this.segments.length, true));
        this.meta.sync();
      }
    } finally {
      this.releaseFiles();
    }
  }

  /** True once close() ran. */
  get isClosed(): boolean {
    return this.closed;
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
    this.pKind = KIND_RAW;
    this.pLen = RAW_PREFIX + size;
    this.pValue = tag;
    this.pBytes = undefined;
    return this.store(this.pLen, 0);
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
    this.pKind = KIND_RAW;
    this.pLen = RAW_PREFIX + bytes.length;
    this.pValue = tag;
    this.pBytes = bytes;
    return this.store(this.pLen, FLAG_SEALED);
  }

  /**
   * The bytes of a raw block, as a Buffer over the pile's memory (no copy): writes go straight
   * to the pile. 8-byte aligned, so Float64Array/Uint32Array views over it work. Valid until
   * the block is deleted or the pile is closed.
   * @throws PILE_INVALID_POINTER when `ptr` is not a raw block, PILE_STALE_POINTER, PILE_CLOSED
   */
  rawBuffer(ptr: PilePointer): Buffer {
    this.open();
    this.resolve(ptr, false);
    if (kindOf(this.hSeg.u32[(this.hOff >>> 2) + 1]!) !== KIND_RAW)
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} is not a raw block`);
    const start = this.hOff + BLOCK_HEADER_SIZE + RAW_PREFIX;
    return this.hSeg.buf.subarray(start, this.hOff + BLOCK_HEADER_SIZE + this.hSeg.u32[(this.hOff >>> 2) + 2]!);
  }

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
      this.open();
      this.resolve(ptr, false);
      off = this.hOff;
      if (kindOf(this.hSeg.u32[(off >>> 2) + 1]!) !== KIND_RAW)
        throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} is not a raw block`);
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

  /**
   * The check verifyOnRead makes, for one record of a pile opened without it (tools that copy data
   * out, like `pile export`): a PILE_CORRUPT error naming file, segment and offset when the record's
   * checksum or structure does not hold, else undefined.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED
   */
  checkRecord(ptr: PilePointer): PileError | undefined {
    this.open();
    this.resolve(ptr, false);
    const reason = this.checkBlock(this.hSeg, this.hOff);
    return reason === undefined ? undefined : this.corruptError(this.hSeg, this.hOff, reason);
  }

  /** The owner tag of a raw block. @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CLOSED */
  rawTag(ptr: PilePointer): number {
    this.open();
    this.resolve(ptr, false);
    if (kindOf(this.hSeg.u32[(this.hOff >>> 2) + 1]!) !== KIND_RAW)
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} is not a raw block`);
    return this.hSeg.u32[(this.hOff + BLOCK_HEADER_SIZE) >>> 2]!;
  }

  // ------------------------------------------------------------ typed records (used by TypedView)

  /** @internal */
  putTyped(id: number, codec: CompiledSchema<unknown>, value: unknown): PilePointer {
    this.writable();
    // store() and writePayload() inlined by hand: this is the hottest write path. A small record
    // is encoded for an upper bound of its length, which spares the UTF-8 length scan of its
    // strings (a native call each); a large one is measured exactly, so that a bound up to 3x its
    // size never refuses a record that fits. While the pile grows, the record is encoded at the
    // start of the tail and its block cut to the exact size after; otherwise the block allocated
    // for the bound is trimmed.
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
      length = codec.encode(value, seg.buf, seg.view, start + TYPED_PREFIX, off + size) - start;
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
      gen = this.alloc.claimTail(seg, segIdx, off, exact);
    } else {
      if (length < len) this.alloc.trim(addr, exact);
      gen = genOf(seg.u32[(off >>> 2) + 1]!);
    }
    // commit() inlined by hand for a typed record: as a call it cost about 20 ns of a 270 ns put
    // (TurboFan's inlining budget is spent on the codec by then). Same order of stores.
    // word1(), checkedWord1(), blockSizeFor() and pointerOf() are written out here as expressions: as calls they
    // take TurboFan's inlining budget (920 bytecode bytes per function), which must cover the
    // generated measureBound and encode; `pnpm bench codec` (docs/benchmarks.md) measures it.
    const u32 = seg.u32;
    const h = off >>> 2;
    const g = gen & GEN_MASK;
    const used = (g | TYPED_USED_WORD) >>> 0;
    u32[h + 1] = (g | TYPED_RESERVED_WORD) >>> 0;
    u32[h + 3] = blockChecksum(seg.buf, u32, off, u32[h]!, (g | TYPED_CHECKED_WORD) >>> 0, length);
    u32[h + 2] = length;
    u32[h + 1] = used;
    this.alloc.countUsedTyped(length);
    const fmt = this.fmt;
    return (((gen & fmt.tagMask) * SEGMENT_DIV + segIdx) * fmt.offsetDiv + off * 0.125) as PilePointer;
  }

  /** @internal */
  setTyped(ptr: PilePointer, id: number, codec: CompiledSchema<unknown>, value: unknown): void {
    this.writable();
    // The value first: measuring runs the caller's code (getters, zod), which may read this pile
    // and so move the resolved-record fields that replace() works on.
    this.prepareTyped(id, codec, value);
    this.resolve(ptr, true);
    this.checkTypedId(ptr, id);
    this.replace();
  }

  /** @internal */
  getTyped(ptr: PilePointer, id: number, codec: CompiledSchema<unknown>): unknown {
    const start = this.typedPayload(ptr, id);
    const seg = this.dSeg;
    return codec.decode(seg.buf, seg.view, start, seg.u32[(this.dOff >>> 2) + 2]! - TYPED_PREFIX);
  }

  /**
   * view.field()'s code for one field of schema `id` in this pile, and what it is called with
   * (see compileFieldAccess).
   * @internal
   */
  typedFieldAccess(id: number, name: string, read: FieldReader, inline: InlineRead | undefined): FieldAccess {
    const slow = (ptr: number): unknown => this.fieldTyped(ptr as PilePointer, id, read);
    const code = this.verifyOnRead
      ? checkedFieldAccess
      : compileFieldAccess(this.fmt, TYPED_USED_WORD, this.typedWordMask, id, name, inline);
    return { code, segments: this.segments, read, slow };
  }

  /** @internal */
  fieldTyped(ptr: PilePointer, id: number, read: FieldReader): unknown {
    const start = this.typedPayload(ptr, id);
    const seg = this.dSeg;
    return read(seg.buf, seg.view, start, seg.u32[(this.dOff >>> 2) + 2]! - TYPED_PREFIX);
  }

  /**
   * Checks that `ptr` names a live record of schema `id`, sets dSeg/dOff to the block holding
   * it and returns where the codec's bytes start. The common case (an unlinked record, no
   * verifyOnRead) is decided by one comparison of the header word; anything else takes the
   * full resolve().
   */
  private typedPayload(ptr: PilePointer, id: number): number {
    const off = this.quickLocate(ptr, TYPED_USED_WORD, this.typedWordMask);
    if (off >= 0 && (this.hSeg.u32[(off >>> 2) + 4]! & 0xffff) === id) {
      this.dSeg = this.hSeg;
      this.dOff = off;
      return off + BLOCK_HEADER_SIZE + TYPED_PREFIX;
    }
    this.open();
    this.resolve(ptr, true);
    return this.checkTypedId(ptr, id);
  }

  // ------------------------------------------------------------------------- internals

  /**
   * The generic codec, made on first use: msgpackr is loaded only by piles that store
   * generic values, which keeps the start of typed-only processes short.
   */
  private get packr(): Packr {
    if (this.packrInstance !== undefined) return this.packrInstance;
    const { Packr: MsgPackr } = require('msgpackr') as typeof import('msgpackr');
    // No `structures` option: msgpackr then starts "uninitialized" and loads the persisted
    // structures through getStructures before its first pack, so a reopened pile extends the
    // stored list instead of minting ids 0x40.. again over shapes that old records use.
    const packr: Packr = new MsgPackr({
      maxSharedStructures: 8160,
      copyBuffers: true,
      // Typed arrays other than Uint8Array, Sets and bigints beyond 64 bits round-trip only with
      // the extensions; without them msgpackr writes a Float64Array as garbage bytes.
      moreTypes: true,
      // Without it msgpackr stores a function as undefined, silently.
      writeFunction: refuseFunction('PILE_INVALID_OPTION'),
      getStructures: () => {
        if (this.readonly) this.refreshCatalog();
        // A copy: msgpackr appends new shapes to the array it holds before saveStructures
        // persists them, and the catalog must only ever list persisted ones.
        return [...this.catalog.structures] as never;
      },
      saveStructures: (structures: unknown) => {
        if (this.readonly) return false;
        const before = this.catalog.structures;
        const oldAddr = this.catalogAddr;
        this.catalog.structures = [...(structures as unknown[])];
        try {
          this.saveCatalog(this.structuresUndo !== undefined);
        } catch (err) {
          // Not persisted: msgpackr must forget the new shape, or later records would use an id
          // that a reopened pile does not know.
          this.catalog.structures = before;
          this.forgetStructures();
          throw err;
        }
        if (this.structuresUndo === undefined) this.structuresUndo = { structures: before, addr: oldAddr };
        return true;
      },
    } as never);
    this.packrInstance = packr;
    return packr;
  }

  /** msgpackr reloads the persisted structures on its next pack (its own list may hold unsaved ones). */
  private forgetStructures(): void {
    const fresh: unknown[] & { uninitialized?: boolean; sharedLength?: number } = [];
    fresh.uninitialized = true;
    fresh.sharedLength = 0;
    (this.packrInstance as unknown as { structures: unknown }).structures = fresh;
  }

  /** The write of the value that added record structures succeeded: the catalog before it goes. */
  private keepStructures(): void {
    const addr = this.structuresUndo!.addr;
    this.structuresUndo = undefined;
    if (addr !== 0) this.release(addr);
  }

  /**
   * The write of the value that added record structures failed: the catalog before it becomes
   * current again (its record was kept), so neither memory nor the files keep the new shapes.
   */
  private undoStructures(): void {
    const undo = this.structuresUndo!;
    this.structuresUndo = undefined;
    const added = this.catalog.structures;
    this.catalog.structures = undo.structures;
    this.forgetStructures();
    if (!this.persistent) return;
    try {
      if (undo.addr === 0) {
        // No catalog record before this value: save one without the new shapes.
        this.saveCatalog();
        return;
      }
      const which: 0 | 1 = this.slotIndex === 0 ? 1 : 0;
      const next: CatalogSlot = { seq: (this.slot.seq + 1) >>> 0, addr: undo.addr };
      this.meta!.writeSlot(which, next);
      const addedAddr = this.catalogAddr;
      this.slot = next;
      this.slotIndex = which;
      this.catalogAddr = undo.addr;
      this.release(addedAddr);
    } catch {
      // The files could not be put back: the saved catalog stays current, listing shapes that no
      // record uses, and memory keeps agreeing with it.
      this.catalog.structures = added;
      if (undo.addr !== 0 && undo.addr !== this.catalogAddr) this.release(undo.addr);
    }
  }

  /** The codec of the layout stored for schema `id`, compiled once per pile (see inspect()). */
  private storedCodec(id: number, seg: Segment, off: number): CompiledSchema<unknown> {
    let codec = this.storedCodecs.get(id);
    if (codec === undefined) {
      const stored = this.storedSchema(id)?.[1];
      if (stored === undefined)
        throw this.corruptError(seg, off, `typed record of schema id ${id}, which the pile's catalog does not list`);
      codec = compileDescriptor(stored.descriptor) as CompiledSchema<unknown>;
      this.storedCodecs.set(id, codec);
    }
    return codec;
  }

  /** Name and entry of the schema with this id; a read-only pile first follows the writer's catalog. */
  private storedSchema(id: number): [string, SchemaEntry] | undefined {
    const find = (): [string, SchemaEntry] | undefined => [...this.catalog.schemas].find(([, s]) => s.id === id);
    let hit = find();
    if (hit === undefined && this.readonly) {
      this.refreshCatalog();
      hit = find();
    }
    return hit;
  }

  private checkTypedId(ptr: PilePointer, id: number): number {
    const w = this.dSeg.u32[(this.dOff >>> 2) + 1]!;
    const start = this.dOff + BLOCK_HEADER_SIZE;
    if (kindOf(w) !== KIND_TYPED || this.dSeg.view.getUint16(start, true) !== id) {
      throw new PileError('PILE_SCHEMA_MISMATCH', `record ${ptr} is not a '${this.codecs.get(id)?.name ?? id}' record`);
    }
    return start + TYPED_PREFIX;
  }

  private open(): void {
    if (this.closed) throw closedError();
  }

  /**
   * Every write starts here, the typed put too: the refusals are a call of their own, so that
   * TurboFan's inlining budget goes to the codec (`pnpm bench codec`, docs/benchmarks.md).
   */
  private writable(): void {
    if (this.closed || this.readonly || GUARD.depth !== 0) this.refuseWrite();
    if (this.alloc.sinceCheckpoint >= this.checkpointBytes) this.checkpoint();
  }

  private refuseWrite(): never {
    if (this.closed) throw closedError();
    if (this.readonly) throw new PileError('PILE_READONLY', `pile ${this.dir ?? ''} is open read-only`);
    throw reentrantError();
  }

  private addrOf(seg: Segment, off: number): number {
    return seg.index * this.segmentSize + off;
  }

  private pointerOf(seg: number, off: number, gen: number): PilePointer {
    return this.fmt.pointer(seg, off, gen);
  }

  /** Sets pKind/pLen and what write() needs for `value`. */
  private prepare(value: unknown): void {
    this.pBytes = undefined;
    this.pValue = value;
    if (typeof value === 'string') {
      const bad = illFormedString(value);
      if (bad !== undefined) throw invalid('value', bad);
      this.pKind = KIND_STRING;
      this.pLen = Buffer.byteLength(value, 'utf8');
    } else if (value instanceof Uint8Array) {
      this.pKind = Buffer.isBuffer(value) ? KIND_BUFFER : KIND_BYTES;
      this.pLen = value.length;
    } else {
      // pack() may persist new record structures through saveCatalog(), which reuses the scratch fields.
      let bytes: Buffer;
      // msgpackr's packing state is one per process: a pack inside a getter of the value being
      // packed would garble both. Writes are refused meanwhile (see EncodeGuard).
      GUARD.depth++;
      try {
        const bad = genericValueFault(value, true);
        if (bad !== undefined) throw new PileError('PILE_INVALID_OPTION', `option ${bad}`);
        bytes = this.packr.pack(value);
      } catch (err) {
        // A pack that threw may have minted a structure it never saved; a later record of that
        // shape would name an id the catalog does not list.
        if (this.packrInstance !== undefined) this.forgetStructures();
        if (err instanceof PileError) throw err;
        throw invalid('value', `can not be encoded by msgpackr: ${(err as Error).message}`);
      } finally {
        GUARD.depth--;
      }
      this.pKind = KIND_MSGPACK;
      this.pBytes = bytes;
      this.pValue = value;
      this.pLen = bytes.length;
    }
  }

  private prepareTyped(id: number, codec: CompiledSchema<unknown>, value: unknown): void {
    GUARD.depth++;
    let len: number;
    try {
      len = TYPED_PREFIX + codec.measure(value);
    } finally {
      GUARD.depth--;
    }
    this.pKind = KIND_TYPED;
    this.pLen = len;
    this.pValue = value;
    this.pCodec = codec;
    this.pSchemaId = id;
  }

  /** Writes the prepared payload at `p` of `seg`. */
  private writePayload(seg: Segment, p: number): void {
    switch (this.pKind) {
      case KIND_STRING:
        seg.buf.write(this.pValue as string, p, this.pLen, 'utf8');
        break;
      case KIND_BYTES:
      case KIND_BUFFER:
        seg.buf.set(this.pValue as Uint8Array, p);
        break;
      case KIND_MSGPACK:
      case KIND_CATALOG:
        seg.buf.set(this.pBytes!, p);
        break;
      case KIND_TYPED:
        seg.view.setUint16(p, this.pSchemaId, true);
        GUARD.depth++;
        try {
          this.pCodec!.encode(this.pValue, seg.buf, seg.view, p + TYPED_PREFIX, p + this.pLen);
        } finally {
          GUARD.depth--;
        }
        break;
      case KIND_RAW:
        seg.u32[p >>> 2] = this.pValue as number;
        seg.u32[(p >>> 2) + 1] = 0;
        if (this.pBytes !== undefined) seg.buf.set(this.pBytes, p + RAW_PREFIX);
        else seg.buf.fill(0, p + RAW_PREFIX, p + this.pLen);
        break;
      default:
        throw new Error(`unexpected kind ${this.pKind}`);
    }
  }

  /** Allocates a block with room for `room` payload bytes, writes the prepared value, commits it. */
  private store(room: number, flags: number): PilePointer {
    const addr = this.alloc.alloc(blockSizeFor(room));
    const segIdx = this.fmt.segmentOf(addr);
    const seg = this.segments[segIdx]!;
    const off = addr - segIdx * this.segmentSize;
    try {
      this.writePayload(seg, off + BLOCK_HEADER_SIZE);
    } catch (err) {
      this.alloc.free(addr);
      throw err;
    }
    const gen = this.commit(seg, off, this.pKind, flags, this.pLen);
    return this.pointerOf(segIdx, off, gen);
  }

  /**
   * Writes length, checksum and then the state word: a crash before the last store leaves
   * the block RESERVED (freed by recovery), never a half-written USED record.
   */
  private commit(seg: Segment, off: number, kind: number, flags: number, length: number): number {
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
    this.alloc.countUsed(used, length);
    return gen;
  }

  private release(addr: number): void {
    const segIdx = this.fmt.segmentOf(addr);
    const seg = this.segments[segIdx]!.use();
    const off = addr - segIdx * this.segmentSize;
    const w = seg.u32[(off >>> 2) + 1]!;
    if (this.recovering) {
      // Free lists are not built yet: only mark it; rebuild() links and merges it. A damaged
      // block is left to the torn-record pass, which decides whether its size can be trusted.
      if (this.checkBlock(seg, off) === undefined) this.alloc.markFree(seg, off, seg.u32[off >>> 2]!, genOf(w));
      return;
    }
    if (stateOf(w) === STATE_USED) this.alloc.uncountUsed(w, seg.u32[(off >>> 2) + 2]!);
    this.alloc.free(addr);
  }

  /** set(): the prepared value replaces the record resolved in hSeg/hOff (head) and dSeg/dOff (data). */
  private replace(): void {
    const hSeg = this.hSeg;
    const hOff = this.hOff;
    const linked = hSeg !== this.dSeg || hOff !== this.dOff;
    this.checkBeforeWrite(linked);
    // The journal may rewrite both blocks: their segments are marked before it is written, so that
    // recovery, which replays it, scans them too.
    this.alloc.touch(hSeg.index, hOff);
    if (linked) this.alloc.touch(this.dSeg.index, this.dOff);
    const hAddr = this.addrOf(hSeg, hOff);
    const dAddr = this.addrOf(this.dSeg, this.dOff);
    const kind = this.pKind;
    const len = this.pLen;
    let target: number;
    let oldBody = 0;
    if (len <= hSeg.u32[hOff >>> 2]! - BLOCK_HEADER_SIZE) {
      target = hAddr;
      if (linked) oldBody = dAddr;
    } else if (linked && len <= this.dSeg.u32[this.dOff >>> 2]! - BLOCK_HEADER_SIZE) {
      target = dAddr;
    } else {
      target = 0;
    }
    if (target !== 0) {
      // Journal = the whole new payload; replayed by recovery if the copy below is torn.
      const jAddr = this.alloc.alloc(blockSizeFor(JOURNAL_PREFIX + len));
      const j = this.seat(jAddr);
      const p = j.off + BLOCK_HEADER_SIZE;
      try {
        this.writePayload(j.seg, p + JOURNAL_PREFIX);
      } catch (err) {
        this.alloc.free(jAddr);
        throw err;
      }
      this.writeJournalHead(j.seg, p, JOURNAL_INPLACE, kind, target, 0, oldBody);
      this.commit(j.seg, j.off, KIND_JOURNAL, 0, JOURNAL_PREFIX + len);
      this.applyJournal(j.seg, j.off);
      this.release(jAddr);
      return;
    }
    // Grown past both blocks: new body, then the head becomes a link to it.
    const bAddr = this.alloc.alloc(blockSizeFor(len));
    const b = this.seat(bAddr);
    try {
      this.writePayload(b.seg, b.off + BLOCK_HEADER_SIZE);
    } catch (err) {
      this.alloc.free(bAddr);
      throw err;
    }
    this.commit(b.seg, b.off, kind, FLAG_BODY, len);
    const jAddr = this.alloc.alloc(blockSizeFor(JOURNAL_PREFIX));
    const j = this.seat(jAddr);
    this.writeJournalHead(j.seg, j.off + BLOCK_HEADER_SIZE, JOURNAL_LINK, KIND_LINK, hAddr, bAddr, linked ? dAddr : 0);
    this.commit(j.seg, j.off, KIND_JOURNAL, 0, JOURNAL_PREFIX);
    this.applyJournal(j.seg, j.off);
    this.release(jAddr);
  }

  private seat(addr: number): { seg: Segment; off: number } {
    const segIdx = this.fmt.segmentOf(addr);
    return { seg: this.segments[segIdx]!.use(), off: addr - segIdx * this.segmentSize };
  }

  private writeJournalHead(seg: Segment, p: number, op: number, kind: number, target: number, body: number, oldBody: number): void {
    seg.u32[p >>> 2] = op;
    seg.u32[(p >>> 2) + 1] = kind;
    seg.f64[(p + 8) >>> 3] = target;
    seg.f64[(p + 16) >>> 3] = body;
    seg.f64[(p + 24) >>> 3] = oldBody;
  }

  /** Carries out a committed journal record. Idempotent, so recovery may run it again. */
  private applyJournal(jSeg: Segment, jOff: number): void {
    const p = jOff + BLOCK_HEADER_SIZE;
    const op = jSeg.u32[p >>> 2]!;
    const kind = jSeg.u32[(p >>> 2) + 1]!;
    const t = this.seat(jSeg.f64[(p + 8) >>> 3]!);
    const body = jSeg.f64[(p + 16) >>> 3]!;
    const oldBody = jSeg.f64[(p + 24) >>> 3]!;
    const tw = t.seg.u32[(t.off >>> 2) + 1]!;
    const tFlags = flagsOf(tw) & FLAG_BODY;
    const wasUsed = stateOf(tw) === STATE_USED;
    if (wasUsed) this.alloc.uncountUsed(tw, t.seg.u32[(t.off >>> 2) + 2]!);
    const tp = t.off + BLOCK_HEADER_SIZE;
    let len: number;
    if (op === JOURNAL_INPLACE) {
      len = jSeg.u32[(jOff >>> 2) + 2]! - JOURNAL_PREFIX;
      jSeg.buf.copy(t.seg.buf, tp, p + JOURNAL_PREFIX, p + JOURNAL_PREFIX + len);
    } else {
      len = 8;
      t.seg.f64[tp >>> 3] = body;
    }
    this.commit(t.seg, t.off, kind, tFlags, len);
    if (oldBody !== 0) {
      const o = this.seat(oldBody);
      const ow = o.seg.u32[(o.off >>> 2) + 1]!;
      if (stateOf(ow) === STATE_USED && (flagsOf(ow) & FLAG_BODY) !== 0) this.release(oldBody);
    }
  }

  /**
   * Decodes `ptr` and checks the block it names; sets hSeg/hOff and, following a link, dSeg/dOff.
   * @throws PILE_INVALID_POINTER, PILE_STALE_POINTER, PILE_CORRUPT
   */
  private resolve(ptr: PilePointer, follow: boolean): void {
    if (!this.tryResolve(ptr, follow)) {
      // A made-up number in range lands here too: the block word it finds can not tell the two apart.
      throw new PileError(
        'PILE_STALE_POINTER',
        `pointer ${ptr} names no live record: the block at segment ${this.hSeg.index}, offset ${this.hOff} does not carry its tag (the record was deleted, or the number was never a pointer of this pile)`,
      );
    }
  }

  /** resolve() that answers false for a stale pointer instead of throwing. */
  private tryResolve(ptr: PilePointer, follow = true): boolean {
    if (typeof ptr !== 'number' || !(ptr > 0 && ptr <= Number.MAX_SAFE_INTEGER) || Math.floor(ptr) !== ptr) {
      throw new PileError('PILE_INVALID_POINTER', `${String(ptr)} is not a pile pointer`);
    }
    // PointerFormat's decode, written out: resolve() needs the tag, segment and offset at once.
    const fmt = this.fmt;
    const rest = Math.floor(ptr * fmt.offsetInv);
    const off = (ptr - rest * fmt.offsetDiv) * 8;
    const tag = Math.floor(rest * (1 / SEGMENT_DIV));
    const segIdx = rest - tag * SEGMENT_DIV;
    let seg = this.segments[segIdx];
    if (seg === undefined && this.readonly) seg = this.mapNewSegments(segIdx);
    seg?.use();
    if (seg === undefined || tag > fmt.tagMask || off < SEGMENT_HEADER_SIZE || off > this.segmentSize - 32) {
      throw new PileError('PILE_INVALID_POINTER', `pointer ${ptr} (segment ${segIdx}, offset ${off}) points outside the pile`);
    }
    const u32 = seg.u32;
    const h = off >>> 2;
    const w = u32[h + 1]!;
    this.hSeg = seg;
    this.hOff = off;
    if ((genOf(w) & fmt.tagMask) !== tag || stateOf(w) !== STATE_USED) {
      if (stateOf(w) === STATE_DAMAGED && (genOf(w) & fmt.tagMask) === tag)
        throw this.corruptError(seg, off, 'a record that recovery found damaged and left in place');
      return false;
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
      if (!this.locateBody(seg, off)) throw this.corruptError(seg, off, 'link to a block that is not a live body');
      this.checkRead(this.dSeg, this.dOff, this.dSeg.u32[this.dOff >>> 2]!);
    }
    return true;
  }

  private checkRead(seg: Segment, off: number, size: number): void {
    const length = seg.u32[(off >>> 2) + 2]!;
    if (length > size - BLOCK_HEADER_SIZE) throw this.corruptError(seg, off, `payload length ${length} exceeds block size ${size}`);
    if (this.verifyOnRead) {
      const reason = this.checkBlock(seg, off);
      if (reason !== undefined) throw this.corruptError(seg, off, reason);
    }
  }

  /** Sets dSeg/dOff to the body a link block points at; false when that is not a live body. */
  private locateBody(seg: Segment, off: number): boolean {
    const target = seg.f64[(off + BLOCK_HEADER_SIZE) >>> 3]!;
    if (!Number.isSafeInteger(target) || target <= 0) return false;
    const segIdx = this.fmt.segmentOf(target);
    const bSeg = this.segments[segIdx]?.use();
    const bOff = target - segIdx * this.segmentSize;
    if (bSeg === undefined || bOff < SEGMENT_HEADER_SIZE || (bOff & 7) !== 0 || bOff > this.segmentSize - 32) return false;
    const bw = bSeg.u32[(bOff >>> 2) + 1]!;
    if (stateOf(bw) !== STATE_USED || (flagsOf(bw) & FLAG_BODY) === 0 || !this.alloc.saneSize(bOff, bSeg.u32[bOff >>> 2]!)) return false;
    this.dSeg = bSeg;
    this.dOff = bOff;
    return true;
  }

  /**
   * A damaged size word would make delete free, or set overwrite, a neighbour's bytes: the
   * blocks a write is about to reuse are checked first (reads check them only with verifyOnRead).
   * @throws PILE_CORRUPT, and nothing is written
   */
  private checkBeforeWrite(linked: boolean): void {
    const head = this.checkBlock(this.hSeg, this.hOff);
    if (head !== undefined) throw this.corruptError(this.hSeg, this.hOff, `${head}; the record is left as it is`);
    const body = linked ? this.checkBlock(this.dSeg, this.dOff) : undefined;
    if (body !== undefined) throw this.corruptError(this.dSeg, this.dOff, `${body}; the record is left as it is`);
  }

  /** Why the used block at `off` is damaged, or undefined when its checksum and fields hold. */
  private checkBlock(seg: Segment, off: number): string | undefined {
    return blockDamage(seg.buf, seg.u32, off);
  }

  private corruptError(seg: Segment, off: number, reason: string): PileError {
    const where = seg.file ?? `in-memory segment ${seg.index}`;
    return new PileError('PILE_CORRUPT', `${where} (segment ${seg.index}), record at offset ${off}: ${reason}`);
  }

  private payloadSize(seg: Segment, off: number): number {
    const w = seg.u32[(off >>> 2) + 1]!;
    const len = seg.u32[(off >>> 2) + 2]!;
    const kind = kindOf(w);
    return kind === KIND_TYPED ? len - TYPED_PREFIX : kind === KIND_RAW ? len - RAW_PREFIX : len;
  }

  private decodeAt(seg: Segment, off: number): unknown {
    const w = seg.u32[(off >>> 2) + 1]!;
    const len = seg.u32[(off >>> 2) + 2]!;
    const p = off + BLOCK_HEADER_SIZE;
    switch (kindOf(w)) {
      case KIND_STRING:
        return seg.buf.toString('utf8', p, p + len);
      case KIND_BYTES: {
        const out = new Uint8Array(len);
        out.set(seg.buf.subarray(p, p + len));
        return out;
      }
      case KIND_BUFFER:
        return Buffer.from(seg.buf.subarray(p, p + len));
      case KIND_RAW:
        return Buffer.from(seg.buf.subarray(p + RAW_PREFIX, p + len));
      case KIND_MSGPACK:
        try {
          return this.packr.unpack(seg.buf.subarray(p, p + len));
        } catch (err) {
          throw this.corruptError(seg, off, `msgpack decode failed: ${(err as Error).message}`);
        }
      case KIND_TYPED: {
        const id = seg.view.getUint16(p, true);
        const c = this.codecs.get(id);
        if (c === undefined) {
          const name = this.storedSchema(id)?.[0];
          throw new PileError(
            'PILE_SCHEMA_MISMATCH',
            name === undefined
              ? `record at segment ${seg.index} offset ${off} uses schema id ${id}, unknown to this pile`
              : `record at segment ${seg.index} offset ${off} is typed by schema '${name}': register it first with pile.schema('${name}', zodSchema)`,
          );
        }
        return c.codec.decode(seg.buf, seg.view, p + TYPED_PREFIX, len - TYPED_PREFIX);
      }
      default:
        throw this.corruptError(seg, off, `unknown record kind ${kindOf(w)}`);
    }
  }

  // ------------------------------------------------------------------- catalog and files

  /**
   * Applies `change` to the catalog and persists it; when persisting throws (out of space, too
   * large, an I/O error), the catalog in memory is put back as it was, so a failed call leaves
   * nothing behind that a later save or a reopen would disagree with.
   */
  private changeCatalog(change: (c: Catalog) => void): void {
    const c = this.catalog;
    const before: Catalog = {
      roots: new Map(c.roots),
      structures: c.structures,
      schemas: new Map(c.schemas),
      nextSchemaId: c.nextSchemaId,
    };
    change(c);
    try {
      this.saveCatalog();
    } catch (err) {
      this.catalog = before;
      throw err;
    }
  }

  /** Writes the catalog and makes it current; `freeOld` false keeps the previous record for undoStructures(). */
  private saveCatalog(freeOld = true): void {
    if (this.readonly) throw new PileError('PILE_READONLY', 'the pile is open read-only');
    if (!this.persistent) return;
    this.pKind = KIND_CATALOG;
    const c = this.catalog;
    // Object.fromEntries defines own properties, so any name, '__proto__' included, round-trips.
    const json: CatalogJson = {
      roots: Object.fromEntries(c.roots),
      structures: c.structures,
      schemas: Object.fromEntries(c.schemas),
      nextSchemaId: c.nextSchemaId,
    };
    this.pBytes = Buffer.from(JSON.stringify(json), 'utf8');
    this.pLen = this.pBytes.length;
    let ptr: PilePointer;
    try {
      ptr = this.store(this.pLen, 0);
    } catch (err) {
      if (!(err instanceof PileError) || err.code !== 'PILE_TOO_LARGE') throw err;
      throw new PileError(
        'PILE_TOO_LARGE',
        `the catalog (roots, schemas, msgpack record structures) would take ${this.pLen} bytes, more than one segment of ${this.segmentSize} bytes holds (segmentSize): the catalog is one record (docs/format.md, "Catalog size limit"); the change is undone, and writes that need no new catalog entry go on`,
      );
    }
    const addr = this.fmt.addressOf(ptr);
    const next: CatalogSlot = { seq: (this.slot.seq + 1) >>> 0, addr };
    const which: 0 | 1 = this.slotIndex === 0 ? 1 : 0;
    try {
      this.meta!.writeSlot(which, next);
    } catch (err) {
      // No slot names the new record: it is not the catalog, so it must not stay allocated.
      this.release(addr);
      throw err;
    }
    const old = this.catalogAddr;
    this.slot = next;
    this.slotIndex = which;
    this.catalogAddr = addr;
    if (old !== 0 && freeOld) this.release(old);
  }

  /** Reads the catalog the current slot names; false when the slot's record is not a valid catalog. */
  private readCatalog(slot: CatalogSlot): boolean {
    const segIdx = this.fmt.segmentOf(slot.addr);
    const seg = this.segments[segIdx]?.use();
    const off = slot.addr - segIdx * this.segmentSize;
    if (seg === undefined || off < SEGMENT_HEADER_SIZE || off > this.segmentSize - 32 || (off & 7) !== 0) return false;
    const w = seg.u32[(off >>> 2) + 1]!;
    if (stateOf(w) !== STATE_USED || kindOf(w) !== KIND_CATALOG || !this.alloc.saneSize(off, seg.u32[off >>> 2]!)) return false;
    if (this.checkBlock(seg, off) !== undefined) return false;
    const len = seg.u32[(off >>> 2) + 2]!;
    try {
      const c = JSON.parse(seg.buf.toString('utf8', off + BLOCK_HEADER_SIZE, off + BLOCK_HEADER_SIZE + len)) as Partial<CatalogJson>;
      this.catalog = {
        roots: new Map(Object.entries(c.roots ?? {})),
        structures: c.structures ?? [],
        schemas: new Map(Object.entries(c.schemas ?? {})),
        nextSchemaId: c.nextSchemaId ?? 1,
      };
    } catch {
      return false;
    }
    this.catalogAddr = slot.addr;
    this.slot = slot;
    return true;
  }

  /** Picks the newest catalog slot that names a valid catalog record. */
  private loadCatalog(): void {
    const slots = this.meta!.readSlots();
    const order = ([0, 1] as const).filter((i) => slots[i] !== undefined).sort((a, b) => slots[b]!.seq - slots[a]!.seq);
    for (const i of order) {
      if (this.readCatalog(slots[i]!)) {
        this.slotIndex = i;
        return;
      }
    }
    // No valid slot but written ones: both damaged. Going on with an empty catalog would lose the
    // roots and the msgpack structures that records need to decode.
    if (order.length > 0 || this.meta!.slotsWritten()) {
      throw new PileError(
        'PILE_CORRUPT',
        `meta file ${path.join(this.dir!, META_FILE_NAME)}: no catalog slot names a valid catalog record (offset 64)`,
      );
    }
  }

  /** A read-only pile follows the writer's catalog updates. */
  private refreshCatalog(): void {
    if (this.meta === undefined) return;
    const slots = this.meta.readSlots();
    const best = [slots[0], slots[1]].filter((s): s is CatalogSlot => s !== undefined).sort((a, b) => b.seq - a.seq)[0];
    if (best === undefined || best.seq === this.slot.seq) return;
    this.mapNewSegments(this.fmt.segmentOf(best.addr));
    // New record structures reach msgpackr through getStructures() when it meets an unknown id.
    this.readCatalog(best);
  }

  private mapNewSegments(upTo: number): Segment | undefined {
    if (this.meta === undefined) return undefined;
    const count = Math.min(this.meta.readHeader().segmentCount, MAX_SEGMENTS);
    while (this.segments.length < count && this.segments.length <= upTo) {
      this.segments.push(Segment.open(this.dir!, this.segments.length, this.segmentSize, this.pileId, true));
    }
    return this.segments[upTo];
  }

  private addSegment(): Segment {
    const index = this.segments.length;
    if ((index + 1) * this.segmentSize > this.maxMemory) {
      throw new PileError('PILE_OUT_OF_SPACE', `maxMemory ${this.maxMemory} reached (${index} segments of ${this.segmentSize} bytes)`);
    }
    if (index >= MAX_SEGMENTS) throw new PileError('PILE_OUT_OF_SPACE', `a pile holds at most ${MAX_SEGMENTS} segments`);
    const seg = this.persistent
      ? Segment.create(this.dir!, index, this.segmentSize, this.pileId)
      : Segment.inMemory(index, this.segmentSize, this.pileId);
    this.alloc.initSegment(seg);
    this.segments.push(seg);
    // The file is complete before the meta file counts it, so a counted segment is never half-made.
    this.meta?.writeHeader(this.metaHeader(this.segments.length, false));
    return seg;
  }

  private openFiles(dir: string, options: PileOptions, segmentSize: number, pileId: number, create: boolean) {
    try {
      if (!this.readonly) fs.mkdirSync(dir, { recursive: true });
      else if (!fs.statSync(dir).isDirectory()) throw new Error('not a directory');
    } catch (err) {
      // The system refusing (permissions, a read-only or full file system) is not a bad option.
      if (IO_REFUSALS.has((err as NodeJS.ErrnoException).code ?? '')) throw ioError(err, `can not use directory ${dir}`);
      throw invalid('dir', `can not use directory ${dir}: ${(err as Error).message}`);
    }
    if (!this.readonly) this.lock = DirectoryLock.acquire(dir);
    try {
      this.meta = MetaFile.open(dir, this.readonly);
      if (this.meta === undefined) {
        if (fs.existsSync(path.join(dir, segmentFileName(0)))) {
          throw new PileError('PILE_CORRUPT', `${path.join(dir, META_FILE_NAME)} is missing but ${dir} holds segment files`);
        }
        if (this.readonly || !create) throw invalid('dir', `${dir} is not a pile (no ${META_FILE_NAME})`);
        // Checked before the meta file exists: a refused open must not leave a pile behind.
        if (options.maxMemory !== undefined && options.maxMemory < segmentSize) {
          throw invalid('maxMemory', `${options.maxMemory} is less than one segment (segmentSize ${segmentSize})`);
        }
        this.meta = MetaFile.create(dir, { segmentSize, pileId, segmentCount: 0, clean: false, genFloor: 0 });
        return { existing: false, segmentSize, pileId, clean: false, segmentCount: 0 };
      }
      // Until readers beside a writer are supported, a read-only open and a writer exclude each other.
      if (this.readonly) this.lock = ReaderMark.acquire(dir);
      const h = this.meta.readHeader();
      if (options.segmentSize !== undefined && options.segmentSize !== h.segmentSize) {
        throw invalid('segmentSize', `${options.segmentSize} differs from the pile's ${h.segmentSize} in ${dir}`);
      }
      if (!isSegmentSize(h.segmentSize)) {
        throw new PileError('PILE_CORRUPT', `meta file ${this.meta.file}: bad segment size ${h.segmentSize} at offset 8`);
      }
      if (h.segmentCount > MAX_SEGMENTS)
        throw new PileError('PILE_CORRUPT', `meta file ${this.meta.file}: bad segment count ${h.segmentCount} at offset 16`);
      return { existing: true, segmentSize: h.segmentSize, pileId: h.pileId, clean: h.clean, segmentCount: h.segmentCount };
    } catch (err) {
      this.releaseFiles();
      throw err;
    }
  }

  private metaHeader(segmentCount: number, clean: boolean): MetaHeader {
    return { segmentSize: this.segmentSize, pileId: this.pileId, segmentCount, clean, genFloor: this.alloc.genFloor };
  }

  private load(segmentCount: number, clean: boolean, onProgress: PileOptions['onProgress']): void {
    const dir = this.dir!;
    this.alloc.genFloor = this.meta!.readHeader().genFloor;
    if (!this.readonly && segmentCount > 0 && Segment.isShortAndEmpty(dir, segmentCount - 1, this.segmentSize, this.pileId)) {
      // The last segment's file was never made whole and holds no record: uncount it (the loop
      // below deletes its file) and recover, since a clean state may name its free block.
      segmentCount--;
      this.meta!.writeHeader(this.metaHeader(segmentCount, false));
      this.meta!.sync();
      clean = false;
    }
    for (let i = 0; i < segmentCount; i++) {
      this.segments.push(Segment.open(dir, i, this.segmentSize, this.pileId, this.readonly));
    }
    if (this.readonly) {
      this.loadCatalog();
      this.alloc.countOnly();
      return;
    }
    // Files past the counted segments: left by a crash while adding one, or by an interrupted compact.
    for (let i = segmentCount; fs.existsSync(path.join(dir, segmentFileName(i))); i++) {
      fs.rmSync(path.join(dir, segmentFileName(i)), { force: true });
    }
    // Mark the pile in use before the first write: a crash from now on makes the next open recover.
    this.meta!.writeHeader(this.metaHeader(segmentCount, false));
    this.meta!.sync();
    const state = clean ? this.meta!.readCleanState() : undefined;
    if (state !== undefined && this.alloc.restore(state)) {
      this.loadCatalog();
      return;
    }
    const regions = clean ? undefined : checkpointRegions(this.meta!, this.alloc, this.fmt, segmentCount);
    if (regions !== undefined) {
      this.recover(onProgress, regions);
      return;
    }
    // A full scan may write into any segment: marked first, so that a crash during it scans all again.
    this.meta!.writeMarks(segmentCount, MARK_WHOLE);
    this.recover(onProgress);
  }

  /** After an unclean shutdown: see recoverPile. */
  private recover(onProgress: PileOptions['onProgress'], regions?: Array<[number, number]>): void {
    recoverPile(
      {
        segments: this.segments,
        alloc: this.alloc,
        fmt: this.fmt,
        report: this.lastRecovery,
        applyJournal: (seg, off) => this.applyJournal(seg, off),
        loadCatalog: () => {
          this.loadCatalog();
          return this.catalogAddr;
        },
        linkTarget: (seg, off) => (this.locateBody(seg, off) ? this.addrOf(this.dSeg, this.dOff) : 0),
        setRecovering: (on) => {
          this.recovering = on;
        },
      },
      onProgress,
      regions,
    );
  }

  private releaseFiles(): void {
    this.closed = true;
    if (this.checkpointTimer !== undefined) clearInterval(this.checkpointTimer);
    this.checkpointTimer = undefined;
    this.meta?.close();
    this.meta = undefined;
    this.lock?.release();
    this.lock = undefined;
    // Gives every segment's memory back now; views still held anywhere read zeros from then on.
    for (const seg of this.segments) seg.release();
    this.segments.length = 0;
    this.hSeg = this.dSeg = undefined as unknown as Segment;
    this.rawSegment = EMPTY_BUFFER;
    this.rawView = new DataView(EMPTY_BUFFER.buffer, 0, 0);
    this.rawF64 = new Float64Array(0);
    this.codecs.clear();
    this.storedCodecs.clear();
    this.pValue = undefined;
    this.pBytes = undefined;
    this.packrInstance = undefined;
  }
}

function closedError(): PileError {
  return new PileError('PILE_CLOSED', 'the pile is closed');
}
