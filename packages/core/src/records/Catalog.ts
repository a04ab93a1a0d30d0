import * as path from 'node:path';
import { BLOCK_HEADER_SIZE, KIND_CATALOG, SEGMENT_HEADER_SIZE, STATE_USED, kindOf, stateOf } from '../storage/BlockFormat';
import { blockDamage } from '../storage/Checksum';
import { faultPoints } from '../recovery/FaultPoints';
import { META_FILE_NAME, type CatalogSlot } from '../storage/MetaFile';
import { PileError } from '../PileError';
import type { PilePointer } from './PilePointer';
import type { PointerFormat } from './PointerFormat';
import { compileDescriptor, isCompatibleEvolution, type CompiledSchema, type SchemaDescriptor } from '../schema/SchemaCompiler';
import { isSameLayout, schemaDifference } from '../schema/SchemaDescriptor';
import type { Segment } from '../storage/Segment';
import { mapNewSegments, type SegmentHost } from '../storage/SegmentTable';
import type { StructureStore } from './ValueEncoding';
import { corruptError } from '../recovery/Verify';

/** A schema as the catalog keeps it. */
export interface SchemaEntry {
  id: number;
  fingerprint: string;
  descriptor: SchemaDescriptor;
}

/** The catalog as stored (docs/format.md, kind 6). */
interface CatalogJson {
  roots: Record<string, number>;
  structures: unknown[];
  schemas: Record<string, SchemaEntry>;
  nextSchemaId: number;
}

/** What the catalog needs of its pile (the RecordStore). */
export interface CatalogHost extends SegmentHost {
  readonly readonly: boolean;
  readonly fmt: PointerFormat;
  readonly values: { forgetStructures(): void };
  /** Stores `bytes` as a committed catalog record and returns its pointer. */
  storeCatalog(bytes: Uint8Array): PilePointer;
  /** Frees the block at `addr`. */
  release(addr: number): void;
  /** A read-write pile of several processes takes up what the others published (roots, schemas, structures). */
  follow(): void;
}

/**
 * The pile's catalog: roots, schemas and msgpackr's shared record structures, stored as one JSON
 * record that one of the meta file's two catalog slots names (docs/format.md). A change writes a
 * new record, then the other slot, then frees the old record: a crash at any point leaves one
 * slot naming a whole catalog. Names are user strings: Maps, so that a root called 'constructor'
 * or '__proto__' is just a name.
 */
export class Catalog implements StructureStore {
  roots = new Map<string, number>();
  structures: unknown[] = [];
  schemas = new Map<string, SchemaEntry>();
  nextSchemaId = 1;
  /** Address of the current catalog record (0: none yet). */
  private addr = 0;
  private slot: CatalogSlot = { seq: 0, addr: 0 };
  private slotIndex: 0 | 1 = 1;
  /**
   * The catalog as it was before the generic value in progress added record structures to it:
   * kept (its record not freed yet) until the value's write succeeds, put back if it fails.
   * The generic put and set test it after each value (see RecordStore.put).
   */
  structuresUndo: { structures: unknown[]; addr: number } | undefined;
  /** Codecs compiled from stored layouts by inspect(), for schemas not registered here. */
  readonly storedCodecs = new Map<number, CompiledSchema<unknown>>();

  constructor(private readonly host: CatalogHost) {}

  /** Address of the current catalog record (0: none); recovery keeps it and frees older ones. */
  get address(): number {
    return this.addr;
  }

  /** The sequence number of the catalog slot in use (published in pile.coord). */
  get seq(): number {
    return this.slot.seq;
  }

  /**
   * Applies `change` and persists the catalog; when persisting throws (out of space, too large,
   * an I/O error), the catalog in memory is put back as it was, so a failed call leaves nothing
   * behind that a later save or a reopen would disagree with.
   */
  change(change: (c: Catalog) => void): void {
    const roots = new Map(this.roots);
    const structures = this.structures;
    const schemas = new Map(this.schemas);
    const nextSchemaId = this.nextSchemaId;
    change(this);
    try {
      this.save();
    } catch (err) {
      this.roots = roots;
      this.structures = structures;
      this.schemas = schemas;
      this.nextSchemaId = nextSchemaId;
      throw err;
    }
  }

  /** Writes the catalog and makes it current; `freeOld` false keeps the previous record for undoStructures(). */
  save(freeOld = true): void {
    const host = this.host;
    if (host.readonly) throw new PileError('PILE_READONLY', 'the pile is open read-only');
    if (!host.persistent) return;
    // Object.fromEntries defines own properties, so any name, '__proto__' included, round-trips.
    const json: CatalogJson = {
      roots: Object.fromEntries(this.roots),
      structures: this.structures,
      schemas: Object.fromEntries(this.schemas),
      nextSchemaId: this.nextSchemaId,
    };
    const bytes = Buffer.from(JSON.stringify(json), 'utf8');
    // Not logged (UndoLog.ts): pile.meta's slot names the new record; the repair frees the stale one in what the turn stamped.
    host.alloc.undo.distrust();
    let ptr: PilePointer;
    try {
      ptr = host.storeCatalog(bytes);
    } catch (err) {
      if (!(err instanceof PileError) || err.code !== 'PILE_TOO_LARGE') throw err;
      throw new PileError(
        'PILE_TOO_LARGE',
        `the catalog (roots, schemas, msgpack record structures) would take ${bytes.length} bytes, more than one segment of ${host.segmentSize} bytes holds (segmentSize): the catalog is one record (docs/format.md, "Catalog size limit"); the change is undone, and writes that need no new catalog entry go on`,
      );
    }
    const addr = host.fmt.addressOf(ptr);
    const next: CatalogSlot = { seq: (this.slot.seq + 1) >>> 0, addr };
    const which: 0 | 1 = this.slotIndex === 0 ? 1 : 0;
    const old = this.addr;
    try {
      faultPoints.hit?.('catalog-written');
      // A death between the slot write and the old record's release leaves that record behind;
      // recovery and a holder's repair free every catalog record but the current one only in the
      // segments they rescan, so its segment is marked written (and touched by this turn) first.
      if (old !== 0) this.touchRecord(old);
      host.meta!.writeSlot(which, next);
    } catch (err) {
      // No slot names the new record: it is not the catalog, so it must not stay allocated.
      host.release(addr);
      throw err;
    }
    faultPoints.hit?.('catalog-named');
    this.slot = next;
    this.slotIndex = which;
    this.addr = addr;
    if (old !== 0 && freeOld) host.release(old);
  }

  /** Marks the segment of the catalog record at `addr` as written by this turn (Allocator.touch). */
  private touchRecord(addr: number): void {
    const { fmt, alloc } = this.host;
    const segIdx = fmt.segmentOf(addr);
    alloc.touch(segIdx, addr - segIdx * fmt.segmentSize);
  }

  /** Reads the catalog `slot` names; false when the slot's record is not a valid catalog. */
  private read(slot: CatalogSlot): boolean {
    const { fmt, segments, alloc } = this.host;
    const segIdx = fmt.segmentOf(slot.addr);
    const seg = segments[segIdx]?.use();
    const off = slot.addr - segIdx * fmt.segmentSize;
    if (seg === undefined || off < SEGMENT_HEADER_SIZE || off > fmt.segmentSize - 32 || (off & 7) !== 0) return false;
    const w = seg.u32[(off >>> 2) + 1]!;
    if (stateOf(w) !== STATE_USED || kindOf(w) !== KIND_CATALOG || !alloc.saneSize(off, seg.u32[off >>> 2]!)) return false;
    if (blockDamage(seg.buf, seg.u32, off) !== undefined) return false;
    const len = seg.u32[(off >>> 2) + 2]!;
    try {
      const c = JSON.parse(seg.buf.toString('utf8', off + BLOCK_HEADER_SIZE, off + BLOCK_HEADER_SIZE + len)) as Partial<CatalogJson>;
      const roots = new Map(Object.entries(c.roots ?? {}));
      const schemas = new Map(Object.entries(c.schemas ?? {}));
      this.roots = roots;
      this.structures = c.structures ?? [];
      this.schemas = schemas;
      this.nextSchemaId = c.nextSchemaId ?? 1;
    } catch {
      return false;
    }
    this.addr = slot.addr;
    this.slot = slot;
    return true;
  }

  /**
   * Picks the newest catalog slot that names a valid catalog record.
   * @throws PILE_CORRUPT when slots were written but none names a valid catalog
   */
  load(): void {
    const meta = this.host.meta!;
    const slots = meta.readSlots();
    const order = ([0, 1] as const).filter((i) => slots[i] !== undefined).sort((a, b) => slots[b]!.seq - slots[a]!.seq);
    for (const i of order) {
      if (this.read(slots[i]!)) {
        this.slotIndex = i;
        return;
      }
    }
    // No valid slot but written ones: both damaged. Going on with an empty catalog would lose the
    // roots and the msgpack structures that records need to decode.
    if (order.length > 0 || meta.slotsWritten()) {
      throw new PileError(
        'PILE_CORRUPT',
        `meta file ${path.join(this.host.dir!, META_FILE_NAME)}: no catalog slot names a valid catalog record (offset 64)`,
      );
    }
  }

  /** A read-only pile follows the writer's catalog updates. */
  refresh(): void {
    const meta = this.host.meta;
    if (meta === undefined) return;
    const slots = meta.readSlots();
    const best = [slots[0], slots[1]].filter((s): s is CatalogSlot => s !== undefined).sort((a, b) => b.seq - a.seq)[0];
    if (best === undefined || best.seq === this.slot.seq) return;
    mapNewSegments(this.host, this.host.fmt.segmentOf(best.addr));
    // New record structures reach msgpackr through getStructures() when it meets an unknown id.
    this.read(best);
  }

  /**
   * The id of schema `name` for `codec`: a new schema is added, a compatible evolution (optional
   * fields appended) replaces the stored layout, anything else is refused. Persisted at once.
   * @throws PILE_SCHEMA_MISMATCH, PILE_READONLY, PILE_OUT_OF_SPACE
   */
  register(name: string, codec: CompiledSchema<unknown>): number {
    const readonly = this.host.readonly;
    if (readonly) this.refresh();
    const known = this.schemas.get(name);
    let id: number;
    if (known === undefined) {
      if (readonly) throw new PileError('PILE_READONLY', `schema '${name}' is not in this read-only pile`);
      id = this.nextSchemaId;
      if (id > 0xffff) throw new PileError('PILE_OUT_OF_SPACE', 'a pile holds at most 65535 schemas');
      this.change((c) => {
        c.nextSchemaId = id + 1;
        c.schemas.set(name, { id, fingerprint: codec.fingerprint, descriptor: codec.descriptor });
      });
    } else {
      id = known.id;
      // The same layout is the same fingerprint: compared as descriptors, so that reopening a pile
      // does not hash the schema (the first SHA-256 of a process is most of a millisecond).
      if (!isSameLayout(known.descriptor, codec.descriptor) && known.fingerprint !== codec.fingerprint) {
        if (!isCompatibleEvolution(known.descriptor, codec.descriptor)) {
          throw new PileError(
            'PILE_SCHEMA_MISMATCH',
            `schema '${name}' does not match the one stored in the pile: ${schemaDifference(known.descriptor, codec.descriptor) ?? 'the layouts differ'} (fingerprint ${known.fingerprint}, given ${codec.fingerprint}); only optional fields appended at the end are a compatible change`,
          );
        }
        if (readonly) throw new PileError('PILE_READONLY', `schema '${name}' would be evolved, but the pile is read-only`);
        this.change((c) => c.schemas.set(name, { id, fingerprint: codec.fingerprint, descriptor: codec.descriptor }));
      }
    }
    return id;
  }

  /** The codec of the layout stored for schema `id`, compiled once per pile (see Pile.inspect()). */
  storedCodec(id: number, seg: Segment, off: number): CompiledSchema<unknown> {
    let codec = this.storedCodecs.get(id);
    if (codec === undefined) {
      const stored = this.storedSchema(id)?.[1];
      if (stored === undefined) throw corruptError(seg, off, `typed record of schema id ${id}, which the pile's catalog does not list`);
      codec = compileDescriptor(stored.descriptor) as CompiledSchema<unknown>;
      this.storedCodecs.set(id, codec);
    }
    return codec;
  }

  /** Name and entry of the schema with this id; a read-only pile first follows the writer's catalog. */
  storedSchema(id: number): [string, SchemaEntry] | undefined {
    const find = (): [string, SchemaEntry] | undefined => [...this.schemas].find(([, s]) => s.id === id);
    let hit = find();
    if (hit === undefined) {
      if (this.host.readonly) this.refresh();
      else this.host.follow();
      hit = find();
    }
    return hit;
  }

  /** msgpackr's getStructures. */
  getStructures(): unknown[] {
    if (this.host.readonly) this.refresh();
    else this.host.follow();
    // A copy: msgpackr appends new shapes to the array it holds before saveStructures
    // persists them, and the catalog must only ever list persisted ones.
    return [...this.structures];
  }

  /** msgpackr's saveStructures: persists new shapes, keeping the catalog before them until the value is written. */
  saveStructures(structures: unknown[]): boolean {
    if (this.host.readonly) return false;
    const before = this.structures;
    const oldAddr = this.addr;
    this.structures = [...structures];
    try {
      this.save(this.structuresUndo !== undefined);
    } catch (err) {
      // Not persisted: msgpackr must forget the new shape, or later records would use an id
      // that a reopened pile does not know.
      this.structures = before;
      this.host.values.forgetStructures();
      throw err;
    }
    if (this.structuresUndo === undefined) this.structuresUndo = { structures: before, addr: oldAddr };
    return true;
  }

  /** The write of the value that added record structures succeeded: the catalog before it goes. */
  keepStructures(): void {
    const addr = this.structuresUndo!.addr;
    this.structuresUndo = undefined;
    if (addr !== 0) this.host.release(addr);
  }

  /**
   * The write of the value that added record structures failed: the catalog before it becomes
   * current again (its record was kept), so neither memory nor the files keep the new shapes.
   */
  undoStructures(): void {
    const host = this.host;
    const undo = this.structuresUndo!;
    this.structuresUndo = undefined;
    const added = this.structures;
    this.structures = undo.structures;
    host.values.forgetStructures();
    if (!host.persistent) return;
    try {
      if (undo.addr === 0) {
        // No catalog record before this value: save one without the new shapes.
        this.save();
        return;
      }
      const which: 0 | 1 = this.slotIndex === 0 ? 1 : 0;
      const next: CatalogSlot = { seq: (this.slot.seq + 1) >>> 0, addr: undo.addr };
      host.meta!.writeSlot(which, next);
      const addedAddr = this.addr;
      this.slot = next;
      this.slotIndex = which;
      this.addr = undo.addr;
      host.release(addedAddr);
    } catch {
      // The files could not be put back: the saved catalog stays current, listing shapes that no
      // record uses, and memory keeps agreeing with it.
      this.structures = added;
      if (undo.addr !== 0 && undo.addr !== this.addr) host.release(undo.addr);
    }
  }
}
