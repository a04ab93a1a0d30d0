import type { Packr, Unpackr } from 'msgpackr';
import {
  BLOCK_HEADER_SIZE,
  KIND_BUFFER,
  KIND_BYTES,
  KIND_CATALOG,
  KIND_MSGPACK,
  KIND_RAW,
  KIND_STRING,
  KIND_TYPED,
  RAW_PREFIX,
  TYPED_PREFIX,
  kindOf,
} from '../storage/BlockFormat';
import { encodeGuard } from './EncodeGuard';
import { PileError } from '../PileError';
import type { CompiledSchema } from '../schema/SchemaCompiler';
import type { Segment } from '../storage/Segment';
import { genericValueFault, illFormedString, refuseFunction } from './ValueCheck';
import { corruptError } from '../recovery/Verify';

/** Module-local: a reference to the import itself is a property load on each use. */
const GUARD = encodeGuard;

/**
 * Record ids a msgpack record can name: one byte (0x40-0x7f) for ids 0-63, a second byte for
 * the rest, up to 63 + 255 * 32; ids of a first byte under 32 with a second byte are negative.
 */
const RECORD_IDS = 64 + 255 * 32;
const NEGATIVE_IDS = 32 + 255 * 32;

/** What the stand-in structure of an id the loaded list lacks throws (see readStructures). */
class UnknownStructure extends Error {}

/**
 * The stand-in: msgpackr calls a structure's `read` when a record names it. Shared, so that a
 * record defining its own structure at that id gets it back after the read (msgpackr's rules).
 */
const UNKNOWN: unknown[] & { read?: () => never; isShared?: boolean } = [];
UNKNOWN.read = () => {
  throw new UnknownStructure('the record names a msgpack record structure that the catalog does not list');
};
UNKNOWN.isShared = true;

/** Where msgpackr's shared record structures are kept: the pile's catalog (see Catalog). */
export interface StructureStore {
  /** The persisted structures as loaded now, unchanged (replaced, never edited, when they change). */
  readonly structures: unknown[];
  /** The persisted structures (a copy msgpackr may append to). */
  getStructures(): unknown[];
  /** Persists `structures`; false when the pile can not (read-only). */
  saveStructures(structures: unknown[]): boolean;
}

/**
 * How record values become bytes and back: strings as UTF-8, Uint8Array/Buffer as themselves,
 * typed records through their compiled codec, anything else through msgpackr with shared record
 * structures. One per pile; its hot methods are called from the one RecordStore, so their call
 * sites stay monomorphic.
 *
 * prepare*() leaves what a put or set is about to write in the fields below, and write() writes
 * it: a store sizes its block from `len` between the two. They are fields rather than a result
 * object so that a generic put allocates nothing but its encoded bytes; every prepare sets all
 * that write() reads, so a value never leaks into the next record.
 */
export class ValueEncoding {
  /** The block kind of the prepared value. */
  kind = 0;
  /** Its payload length in bytes (prefix included for raw and typed records). */
  len = 0;
  private value: unknown;
  private bytes: Uint8Array | undefined;
  /** Where the payload starts in `bytes` (msgpackr's own buffer holds other packs around it). */
  private bytesStart = 0;
  private codec: CompiledSchema<unknown> | undefined;
  private schemaId = 0;
  private packrInstance: Packr | undefined;
  private unpackrInstance: Unpackr | undefined;
  /**
   * The structures decode() reads with: the catalog's at every id it lists, the stand-in at every
   * other. msgpackr meets no id it does not have, so it never loads structures in the middle of
   * a read: that load copies the source up to the record's end (its saveState), which for a
   * record read from the mapped segment is the segment up to the record, on the first get after
   * an open and after each change of the catalog.
   */
  private readStructures: unknown[] & { sharedLength?: number } = [];
  /** The catalog list readStructures holds, and its length. */
  private readFrom: unknown[] | undefined;
  private readLength = 0;
  /** The bytes of the record decode() unpacks, as msgpackr's options (one object, reused). */
  private readonly range = { start: 0, end: 0 };
  /** msgpackr's REUSE_BUFFER_MODE, read with the module (see prepare). */
  private reuseBuffer = 0;
  /** The codecs of the schemas registered in this process, by id. */
  readonly codecs = new Map<number, { name: string; codec: CompiledSchema<unknown> }>();

  constructor(
    private readonly structures: StructureStore,
    /** The name the catalog gives schema `id` (an unregistered typed record's error names it). */
    private readonly schemaName: (id: number) => string | undefined,
  ) {}

  /**
   * The generic codec, made on first use: msgpackr is loaded only by piles that store
   * generic values, which keeps the start of typed-only processes short.
   */
  private get packr(): Packr {
    if (this.packrInstance !== undefined) return this.packrInstance;
    const { Packr: MsgPackr, REUSE_BUFFER_MODE } = require('msgpackr') as typeof import('msgpackr');
    this.reuseBuffer = REUSE_BUFFER_MODE;
    const store = this.structures;
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
      writeFunction: refuseFunction('PILE_INVALID_VALUE'),
      getStructures: () => store.getStructures() as never,
      saveStructures: (structures: unknown) => store.saveStructures(structures as unknown[]),
    } as never);
    this.packrInstance = packr;
    return packr;
  }

  /** The generic decoder, made on first use, as the packer (and for the same reason). */
  private get unpackr(): Unpackr {
    if (this.unpackrInstance !== undefined) return this.unpackrInstance;
    const { Unpackr: MsgUnpackr } = require('msgpackr') as typeof import('msgpackr');
    const list: unknown[] & { sharedLength?: number } & Record<number, unknown> = new Array(RECORD_IDS).fill(UNKNOWN);
    for (let id = 1; id <= NEGATIVE_IDS; id++) list[-id] = UNKNOWN;
    // msgpackr drops ids past sharedLength before each read.
    list.sharedLength = RECORD_IDS;
    this.readStructures = list;
    this.readFrom = undefined;
    this.readLength = 0;
    const unpackr = new MsgUnpackr({ copyBuffers: true, moreTypes: true } as never);
    (unpackr as unknown as { structures: unknown[] }).structures = list;
    this.unpackrInstance = unpackr;
    return unpackr;
  }

  /** Loads msgpackr and the catalog's structures for decode(), as its first msgpack record would. */
  prepareReads(): void {
    const unpackr = this.unpackr;
    const from = this.structures.structures;
    this.syncReadStructures(from);
    // One record of the first structure, a short string then nils: V8 compiles msgpackr's read
    // paths and msgpackr makes that structure's reader here, not in the first get (5 ms of it on
    // a loaded machine).
    const keys = from[0];
    if (!Array.isArray(keys) || keys.length === 0) return;
    const bytes = Buffer.alloc(2 + keys.length, 0xc0);
    bytes[0] = 0x40;
    bytes[1] = 0xa1;
    bytes[2] = 0x61;
    try {
      unpackr.unpack(bytes);
    } catch {
      // Not a record this structure can read as such (it never is a wrong one): the first get compiles instead.
    }
  }

  /** Puts the catalog's `from` into readStructures (what changed of it: a catalog only grows, but for an undo). */
  private syncReadStructures(from: unknown[]): void {
    const list = this.readStructures;
    const n = Math.min(from.length, RECORD_IDS);
    for (let id = 0; id < n; id++) {
      const s = from[id] as (unknown[] & { isShared?: boolean; highByte?: number }) | null;
      if (list[id] === s) continue;
      if (Array.isArray(s)) {
        // As msgpackr's own load marks them.
        s.isShared = true;
        if (id >= 32) s.highByte = (id - 32) >> 5;
        list[id] = s;
      } else {
        list[id] = UNKNOWN;
      }
    }
    for (let id = n; id < this.readLength; id++) list[id] = UNKNOWN;
    this.readLength = n;
    this.readFrom = from;
  }

  /** Unpacks the msgpack record `p`..`end` of `seg` with the catalog's structures as they are now. */
  private unpack(seg: Segment, p: number, end: number): unknown {
    const unpackr = this.unpackr;
    const from = this.structures.structures;
    if (from !== this.readFrom) this.syncReadStructures(from);
    // From the segment itself, bounded by the record: no subarray per get. msgpackr refuses a
    // record that does not end exactly at `end`, as it did the subarray's end.
    const range = this.range;
    range.start = p;
    range.end = end;
    try {
      return unpackr.unpack(seg.buf, range);
    } catch (err) {
      if (!(err instanceof UnknownStructure)) throw err;
    }
    // Another process may have added structures since this one last took up the catalog.
    this.structures.getStructures();
    this.syncReadStructures(this.structures.structures);
    range.start = p;
    range.end = end;
    return unpackr.unpack(seg.buf, range);
  }

  /** msgpackr reloads the persisted structures on its next pack (its own list may hold unsaved ones). */
  forgetStructures(): void {
    if (this.packrInstance === undefined) return;
    const fresh: unknown[] & { uninitialized?: boolean; sharedLength?: number } = [];
    fresh.uninitialized = true;
    fresh.sharedLength = 0;
    (this.packrInstance as unknown as { structures: unknown }).structures = fresh;
  }

  /** Prepares `value` of a generic put or set: its kind, length and what write() needs. */
  prepare(value: unknown): void {
    this.bytes = undefined;
    this.value = value;
    if (typeof value === 'string') {
      const bad = illFormedString(value);
      if (bad !== undefined) throw new PileError('PILE_INVALID_VALUE', `value: ${bad}`);
      this.kind = KIND_STRING;
      this.len = Buffer.byteLength(value, 'utf8');
    } else if (value instanceof Uint8Array) {
      this.kind = Buffer.isBuffer(value) ? KIND_BUFFER : KIND_BYTES;
      this.len = value.length;
    } else {
      // pack() may persist new record structures through the catalog, which stores a record of
      // its own (prepareBytes): the fields are set after it.
      let bytes: Buffer & { start?: number; end?: number };
      // msgpackr's packing state is one per process: a pack inside a getter of the value being
      // packed would garble both. Writes are refused meanwhile (see EncodeGuard).
      GUARD.depth++;
      try {
        const bad = genericValueFault(value, true);
        if (bad !== undefined) throw new PileError('PILE_INVALID_VALUE', bad);
        // In this mode pack() hands back its whole buffer with start and end instead of a new
        // subarray: one Buffer object less per put, a tenth of a generic put's time in a profile
        // (fresh in-memory pile, benchmarks/compare). A pack that saved structures still hands back
        // a subarray, which has no start of its own.
        bytes = this.packr.pack(value, this.reuseBuffer);
      } catch (err) {
        // A pack that threw may have minted a structure it never saved; a later record of that
        // shape would name an id the catalog does not list.
        this.forgetStructures();
        if (err instanceof PileError) throw err;
        throw new PileError('PILE_INVALID_VALUE', `value: can not be encoded by msgpackr: ${(err as Error).message}`);
      } finally {
        GUARD.depth--;
      }
      this.kind = KIND_MSGPACK;
      this.bytes = bytes;
      this.value = value;
      const start = bytes.start;
      if (start === undefined) {
        this.bytesStart = 0;
        this.len = bytes.length;
      } else {
        this.bytesStart = start;
        this.len = bytes.end! - start;
      }
    }
  }

  /** Prepares a typed record of schema `id` (measured exactly: a set writes into a block it already has). */
  prepareTyped(id: number, codec: CompiledSchema<unknown>, value: unknown): void {
    GUARD.depth++;
    let len: number;
    try {
      len = TYPED_PREFIX + codec.measure(value);
    } finally {
      GUARD.depth--;
    }
    this.kind = KIND_TYPED;
    this.len = len;
    this.value = value;
    this.codec = codec;
    this.schemaId = id;
  }

  /** Prepares a raw block owned by `tag`: `bytes` as its content, or `size` zero bytes. */
  prepareRaw(tag: number, size: number, bytes: Uint8Array | undefined): void {
    this.kind = KIND_RAW;
    this.len = RAW_PREFIX + size;
    this.value = tag;
    this.bytes = bytes;
  }

  /** Prepares a record of `kind` whose payload is `bytes` as they are (the catalog's JSON). */
  prepareBytes(kind: number, bytes: Uint8Array): void {
    this.kind = kind;
    this.len = bytes.length;
    this.value = undefined;
    this.bytes = bytes;
  }

  /** Writes the prepared payload at `p` of `seg`. */
  write(seg: Segment, p: number): void {
    switch (this.kind) {
      case KIND_STRING:
        seg.buf.write(this.value as string, p, this.len, 'utf8');
        break;
      case KIND_BYTES:
      case KIND_BUFFER:
        seg.buf.set(this.value as Uint8Array, p);
        break;
      case KIND_MSGPACK:
        (this.bytes as Buffer).copy(seg.buf, p, this.bytesStart, this.bytesStart + this.len);
        break;
      case KIND_CATALOG:
        seg.buf.set(this.bytes!, p);
        break;
      case KIND_TYPED:
        seg.view.setUint16(p, this.schemaId, true);
        GUARD.depth++;
        try {
          this.codec!.encodeMeasured(this.value, seg.buf, seg.view, p + TYPED_PREFIX, p + this.len);
        } finally {
          GUARD.depth--;
        }
        break;
      case KIND_RAW:
        seg.u32[p >>> 2] = this.value as number;
        seg.u32[(p >>> 2) + 1] = 0;
        if (this.bytes !== undefined) seg.buf.set(this.bytes, p + RAW_PREFIX);
        else seg.buf.fill(0, p + RAW_PREFIX, p + this.len);
        break;
      default:
        throw new Error(`unexpected kind ${this.kind}`);
    }
  }

  /** Decodes the record whose block is at `off` of `seg`, as the kind it was put. */
  decode(seg: Segment, off: number): unknown {
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
          return this.unpack(seg, p, p + len);
        } catch (err) {
          throw corruptError(seg, off, `msgpack decode failed: ${(err as Error).message}`);
        }
      case KIND_TYPED: {
        const id = seg.view.getUint16(p, true);
        const c = this.codecs.get(id);
        if (c === undefined) {
          const name = this.schemaName(id);
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
        throw corruptError(seg, off, `unknown record kind ${kindOf(w)}`);
    }
  }

  /** Drops what a closed pile must not keep alive: the last value, the codecs, msgpackr. */
  clear(): void {
    this.codecs.clear();
    this.value = undefined;
    this.bytes = undefined;
    this.codec = undefined;
    this.packrInstance = undefined;
    this.unpackrInstance = undefined;
    this.readStructures = [];
    this.readFrom = undefined;
    this.readLength = 0;
  }
}

/** Payload bytes of the record at `off` of `seg` as the API counts them (sizeOf): without a typed or raw prefix. */
export function payloadSize(seg: Segment, off: number): number {
  const w = seg.u32[(off >>> 2) + 1]!;
  const len = seg.u32[(off >>> 2) + 2]!;
  const kind = kindOf(w);
  return kind === KIND_TYPED ? len - TYPED_PREFIX : kind === KIND_RAW ? len - RAW_PREFIX : len;
}
