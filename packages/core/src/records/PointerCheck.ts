import { BLOCK_HEADER_SIZE, MIN_BLOCK_SIZE, SEGMENT_HEADER_SIZE, TYPED_PREFIX } from '../storage/BlockFormat';
import { SEQ_BYTE, SEQ_WORD } from '../concurrency/ChangeSeq';
import { compileCached } from '../schema/CodeCache';
import type { InlineRead } from '../schema/SchemaCodegen';
import type { FieldReader } from '../schema/SchemaCompiler';
import { SEGMENT_DIV, type PointerFormat } from './PointerFormat';
import type { Segment } from '../storage/Segment';

/** The constants a pile's pointers are decoded with (a {@link PointerFormat}); fixed for the life of an open pile. */
export type PointerGeometry = Pick<PointerFormat, 'segmentSize' | 'offsetDiv' | 'tagMask'>;

/**
 * Source of the pile's fast pointer check, compiled with the geometry as literals (the
 * hot read paths then load no pile fields to decode a pointer). The statements read `ptr`,
 * `segments`, `want` and `mask`, and either run `miss` or leave `seg`, `off` (header offset),
 * `h` (its u32 index), `u32`, `seq` (the segment's change sequence, loaded first and even) and
 * `len` (payload length) for a block that is live, unlinked,
 * whose word1 equals `want` plus the pointer's tag in the bits of `mask`, and whose size
 * and length fit the segment. Anything else (a stale, foreign or linked pointer, a segment not
 * mapped yet, a closed pile) takes `miss`, where the full check decides and names the error.
 *
 * The multiplications by inverses of powers of two are exact, and much cheaper than
 * dividing or taking a float modulo. Generated rather than written as a method of the pile: the
 * typed get, `view.field()` and `rawSeek` would otherwise load the geometry from the pile on every
 * call (`node benchmarks/dist/run.js codec` measures the typed reads, `cache` rawSeek; docs/benchmarks.md).
 */
function checkSource(g: PointerGeometry, want: string, mask: string, miss: string, checked: boolean): string {
  return `
if (!(ptr > 0 && ptr <= ${Number.MAX_SAFE_INTEGER})) ${miss}
const rest = Math.floor(ptr * ${1 / g.offsetDiv});
const off = (ptr - rest * ${g.offsetDiv}) * 8;
const tag = Math.floor(rest * ${1 / SEGMENT_DIV});
const seg = segments[rest - tag * ${SEGMENT_DIV}];
if (seg === undefined || !seg.mapped || off < ${SEGMENT_HEADER_SIZE} || off > ${g.segmentSize - MIN_BLOCK_SIZE} || tag > ${g.tagMask} || off !== (off & ~7)) ${miss}
const u32 = seg.u32;${
    checked
      ? `
// The segment's change sequence, before anything of the block is read (ChangeSeq.ts): odd while a
// writer changes a block of it; the caller loads it again after its read (ChangeSeq.ts, SEQ_BYTE).
const seq = u32[${SEQ_WORD}];
if ((seq & 1) !== 0) ${miss}`
      : ''
  }
const h = off >>> 2;
const size = u32[h];
const len = u32[h + 2];
// Generation bits above the tag are not in the pointer; kind, state and flags must be exact.
if ((u32[h + 1] & ${mask}) !== (tag | ${want}) || len > size - ${BLOCK_HEADER_SIZE} || size > ${g.segmentSize} - off) ${miss}
`;
}

/**
 * The header offset of the block `ptr` names when it passes the fast check (see checkSource),
 * with the store's segment field (`fields.seg`) set to its segment and `fields.seqWords`,
 * `fields.seq` to the change sequence the caller must load again after its read; -1 when the full check must
 * decide. Called as a method of the store, whose segments (`fields.segments`) it reads: one
 * function serves every pile of the same geometry, so the call sites that use it stay
 * monomorphic however many piles a process opens.
 */
export type QuickLocate = (ptr: number, want: number, mask: number) => number;

/**
 * The names of the fields a {@link QuickLocate} reads and writes on the store it is called on.
 * The owner of the fields passes them (RecordStore's LOCATE_FIELDS, checked against its class),
 * so that the generated code never names a field the compiler does not know of.
 */
export interface LocateFields {
  readonly segments: string;
  readonly seg: string;
  readonly seqWords: string;
  readonly seq: string;
}

export function compileQuickLocate(g: PointerGeometry, fields: LocateFields, checked: boolean): QuickLocate {
  const seqs = checked ? `this.${fields.seqWords} = u32;\nthis.${fields.seq} = seq;\n` : '';
  const source = `const segments = this.${fields.segments};${checkSource(g, 'want', 'mask', 'return -1;', checked)}this.${fields.seg} = seg;
${seqs}return off;`;
  return compileCached<QuickLocate>(['ptr', 'want', 'mask'], source);
}

/** What {@link compileFieldAccess} compiles: called with the pile's segments, the field's reader and the general path. */
export type FieldAccessCode = (ptr: number, segments: readonly Segment[], read: FieldReader, slow: (ptr: number) => unknown) => unknown;

/**
 * `view.field(ptr, key)` of one schema and field for one pile geometry: the pointer check, the
 * schema id check and the field's read in one function, so a field read costs little more than
 * the memory it touches. Whatever the fast check does not settle goes to `slow`, the general
 * path, which throws the precise error. The function is shared by every view of the same schema
 * and field in piles of the same geometry (the pile comes in as `segments`), so TypedView.field
 * calls one function and V8 inlines it, whichever pile or view is used. `fieldName` undefined: the
 * whole record (`read` is the codec's decode), which a checked pile's typed get reads this way.
 */
export function compileFieldAccess(
  g: PointerGeometry,
  typedWord: number,
  typedMask: number,
  schemaId: number,
  fieldName: string | undefined,
  inline: InlineRead | undefined,
  checked: boolean,
): FieldAccessCode {
  // Checked (a read-only open, see ReadState.checkReads): the change sequence is loaded again after
  // the read (checkSource loaded it first); a read that met a writer's change, or failed because of
  // one, is made again by `slow`, which retries.
  const settled = `seg.view.getUint32(${SEQ_BYTE}, true) === seq`; // not Atomics.load: see SEQ_BYTE
  const give = checked ? `if (${settled}) return value;\nreturn slow(ptr);` : 'return value;';
  // A scalar field of a record with all the schema's fields is read in place: the schema id and
  // the record's field count are one u32 after the header, so one comparison checks both.
  const direct =
    inline === undefined
      ? ''
      : `if (u32[h + 4] === ${((inline.fieldCount << 16) | schemaId) >>> 0} && len >= ${TYPED_PREFIX + inline.minLength}) {
const o = off + ${BLOCK_HEADER_SIZE + TYPED_PREFIX};
const view = seg.view;
const buf = seg.buf;
${inline.source}
${give}
}
`;
  const read = `read(seg.buf, seg.view, off + ${BLOCK_HEADER_SIZE + TYPED_PREFIX}, len - ${TYPED_PREFIX})`;
  // The field's name makes the code of each field its own, so each call of `read` stays monomorphic.
  const source = `const FIELD = ${fieldName === undefined ? 'undefined' : JSON.stringify(fieldName)};
${checkSource(g, String(typedWord), String(typedMask), 'return slow(ptr);', checked)}
${direct}if ((u32[h + 4] & 0xffff) !== ${schemaId}) return slow(ptr);
${
  checked
    ? `let value;
try {
  value = ${read};
} catch (err) {
  if (${settled}) throw err;
  return slow(ptr);
}
${give}`
    : `return ${read};`
}`;
  return compileCached<FieldAccessCode>(['ptr', 'segments', 'read', 'slow'], source);
}
