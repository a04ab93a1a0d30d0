import { fixedSize, type LayoutField, type LayoutNode, type LiteralValue } from './SchemaLayout';

/**
 * JavaScript source of a specialised codec for one top-level object layout, plus the constants it
 * refers to. Compiled once per schema by `compileSchema`, so that measuring, encoding and decoding a
 * record runs straight-line code with no per-field dispatch.
 *
 * Record layout (all integers little endian, offsets relative to the record start so records can move):
 *   [u16 fieldCount] [fixed section] [variable section]
 * The fixed section holds every top-level field in declaration order at an offset known at compile time;
 * nested objects are inlined into it. Per kind, the fixed slot is:
 *   float64 / date (ms)             8 bytes   setFloat64
 *   int32                           4 bytes   -2^31 stands for -0 (int32 is only used when the bounds exclude -2^31)
 *   int64 / uint64                  8 bytes
 *   boolean                         1 byte    0 / 1
 *   enum                            1 byte (<= 256 values) or 2 bytes: index of the value
 *   string / bytes                  u32 offset, u32 byte length -> UTF-8 / raw bytes in the variable section
 *   array                           u32 offset, u32 count -> count fixed slots of the element (stride = its fixed
 *                                   size) in the variable section, followed by the elements' own variable data
 *   maybe (optional / nullable)     u8 tag (0 undefined, 1 null, 2 present) then the inner slot (zeroed if absent)
 *   object                          its fields' slots, back to back
 * fieldCount lets a newer schema (extra optional fields appended) read older records: slots past it are absent.
 */
export interface GeneratedCodec {
  readonly source: string;
  readonly constants: unknown[];
  /** Per top-level field, its read as inlinable source when it is a fixed-slot scalar. */
  readonly inline: readonly (InlineRead | undefined)[];
}

/**
 * The read of a fixed-slot scalar field (number, integer, bigint, boolean, Date) as source that
 * another generated function can inline: statements that leave it in `const value`, reading `view` and `buf`
 * at the record's codec start `o`. Valid only for a record that has all `fieldCount` fields and
 * at least `minLength` bytes (its whole fixed section); others take the field's reader.
 */
export interface InlineRead {
  readonly source: string;
  readonly fieldCount: number;
  readonly minLength: number;
}

/** Kinds whose decode needs no bounds check, constant or helper: only the fixed slot. */
export const INLINE_KINDS = new Set<LayoutNode['kind']>(['float64', 'date', 'int32', 'int64', 'uint64', 'boolean']);

type PathPart = string | { readonly v: string };
type Path = readonly PathPart[];
export interface Pos {
  readonly base: string;
  readonly off: number;
}

/** Values of enums above this size are looked up in a Map instead of a switch. */
const SWITCH_LIMIT = 16;

/**
 * Buffer#utf8Write / #utf8Slice skip the encoding-name handling of write()/toString() (about 10-20% on
 * short strings); they are long-standing but undocumented, so fall back if a runtime lacks them.
 */
const HAS_FAST_UTF8 =
  typeof (Buffer.prototype as unknown as Record<string, unknown>)['utf8Write'] === 'function' &&
  typeof (Buffer.prototype as unknown as Record<string, unknown>)['utf8Slice'] === 'function';
const UTF8_WRITE = (str: string, off: string, max: string): string =>
  HAS_FAST_UTF8 ? `buf.utf8Write(${str}, ${off}, ${max})` : `buf.write(${str}, ${off}, ${max}, "utf8")`;
const UTF8_SLICE = (start: string, end: string): string =>
  HAS_FAST_UTF8 ? `buf.utf8Slice(${start}, ${end})` : `buf.toString("utf8", ${start}, ${end})`;
const ZERO_UNROLL = 16;

function lit(v: LiteralValue): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  return String(v);
}

function at(p: Pos, extra = 0): string {
  const off = p.off + extra;
  return off === 0 ? p.base : `${p.base} + ${off}`;
}

function shift(p: Pos, extra: number): Pos {
  return { base: p.base, off: p.off + extra };
}

function childPath(path: Path, name: string): Path {
  return path.length === 0 ? [name] : [...path, `.${name}`];
}

function indexPath(path: Path, i: string): Path {
  return [...path, '[', { v: i }, ']'];
}

/** JS expression building the human path; only evaluated when a violation is reported. */
function renderPath(path: Path): string {
  if (path.length === 0) return '"(root)"';
  const out: string[] = [];
  let text = '';
  for (const part of path) {
    if (typeof part === 'string') text += part;
    else {
      if (text !== '') out.push(JSON.stringify(text));
      text = '';
      out.push(part.v);
    }
  }
  if (text !== '') out.push(JSON.stringify(text));
  return out.join(' + ');
}

function describeExpected(node: LayoutNode): string {
  switch (node.kind) {
    case 'float64':
      return 'number';
    case 'int32':
      return `integer in [${node.min}, ${node.max}]`;
    case 'int64':
    case 'uint64':
    case 'bigint':
      return 'bigint';
    case 'date':
      return 'Date';
    case 'bytes':
      return node.buffer ? 'Buffer' : 'Uint8Array';
    case 'enum':
      return `one of ${node.values.map(lit).join(', ')}`;
    case 'maybe': {
      const extra = [node.nullable ? 'null' : '', node.optional ? 'undefined' : ''].filter(Boolean).join(' | ');
      return `${describeExpected(node.of)} | ${extra}`;
    }
    default:
      return node.kind;
  }
}

export function isOmittable(node: LayoutNode): boolean {
  return node.kind === 'maybe' && node.optional;
}

/** Emits the source of measure, encode and decode for layout nodes; {@link CodecSources} assembles it into modules. */
export class Generator {
  readonly constants: unknown[] = [];
  private counter = 0;

  private id(prefix: string): string {
    return `${prefix}${this.counter++}`;
  }

  /**
   * The start of measure's and encode's code for an array `x` (at path expression `P`): the check
   * that it is one, and its length in a new variable. Returns that variable's name and the code.
   */
  private arrayHead(x: string, P: string): [string, string] {
    const n = this.id('n');
    return [n, `if (!Array.isArray(${x})) fail(${P}, "array", ${x});\nconst ${n} = ${x}.length;\n`];
  }

  private constant(value: unknown): string {
    this.constants.push(value);
    return `K${this.constants.length - 1}`;
  }

  /**
   * Statements that type-check `x` and add its variable-section bytes to `s`; with `bound`, an
   * upper bound of them that skips the UTF-8 length scan of strings (3 bytes per UTF-16 unit).
   */
  measure(node: LayoutNode, x: string, path: Path, bound = false, sizes = true): string {
    const P = renderPath(path);
    switch (node.kind) {
      case 'float64':
        return `if (typeof ${x} !== "number") fail(${P}, "number", ${x});\n`;
      case 'int32':
        return (
          `if (typeof ${x} !== "number") fail(${P}, "number", ${x});\n` +
          `else if ((${x} | 0) !== ${x} || ${x} < ${node.min} || ${x} > ${node.max}) failValue(${P}, ${JSON.stringify(describeExpected(node))}, ${x});\n`
        );
      case 'int64':
      case 'uint64': {
        const [lo, hi] = node.kind === 'int64' ? ['-9223372036854775808n', '9223372036854775807n'] : ['0n', '18446744073709551615n'];
        return (
          `if (typeof ${x} !== "bigint") fail(${P}, "bigint", ${x});\n` +
          `else if (${x} < ${lo} || ${x} > ${hi}) failValue(${P}, "bigint in ${node.kind} range", ${x});\n`
        );
      }
      case 'bigint':
        return `if (typeof ${x} !== "bigint") fail(${P}, "bigint", ${x});\n${sizes ? `s += bigSize(${x});\n` : ''}`;
      case 'boolean':
        return `if (typeof ${x} !== "boolean") fail(${P}, "boolean", ${x});\n`;
      case 'string':
        return `if (typeof ${x} !== "string") fail(${P}, "string", ${x});\n${sizes ? `s += ${bound ? `${x}.length * 3` : `byteLength(${x})`};\n` : ''}`;
      case 'date':
        return `if (!(${x} instanceof Date)) fail(${P}, "Date", ${x});\n`;
      case 'bytes': {
        const cls = node.buffer ? 'Buffer' : 'Uint8Array';
        return `if (!(${x} instanceof ${cls})) fail(${P}, "${cls}", ${x});\n${sizes ? `s += ${x}.byteLength;\n` : ''}`;
      }
      case 'enum': {
        const expected = JSON.stringify(describeExpected(node));
        if (node.values.length > SWITCH_LIMIT) {
          const map = this.constant(new Map(node.values.map((v, i) => [v, i])));
          return `if (!${map}.has(${x})) failValue(${P}, ${expected}, ${x});\n`;
        }
        return `switch (${x}) { ${node.values.map((v) => `case ${lit(v)}:`).join(' ')} break; default: failValue(${P}, ${expected}, ${x}); }\n`;
      }
      case 'maybe': {
        const expected = JSON.stringify(describeExpected(node));
        return (
          `if (${x} === undefined) { ${node.optional ? '' : `fail(${P}, ${expected}, ${x});`} }\n` +
          `else if (${x} === null) { ${node.nullable ? '' : `fail(${P}, ${expected}, ${x});`} }\n` +
          `else {\n${this.measure(node.of, x, path, bound)}}\n`
        );
      }
      case 'array': {
        const [n, head] = this.arrayHead(x, P);
        const i = this.id('i');
        const e = this.id('e');
        const stride = fixedSize(node.of);
        return (
          head +
          (stride > 0 ? `s += ${n} * ${stride};\n` : '') +
          `for (let ${i} = 0; ${i} < ${n}; ${i}++) {\nconst ${e} = ${x}[${i}];\n${this.measure(node.of, e, indexPath(path, i), bound)}}\n`
        );
      }
      case 'object': {
        let code = `if (typeof ${x} !== "object" || ${x} === null || Array.isArray(${x})) fail(${P}, "object", ${x});\n`;
        for (const f of node.fields) {
          const fv = this.id('f');
          code += `const ${fv} = ${x}[${JSON.stringify(f.name)}];\n${this.measure(f.type, fv, childPath(path, f.name), bound)}`;
        }
        return code;
      }
    }
  }

  private zero(p: Pos, size: number): string {
    if (size === 0) return '';
    if (size <= ZERO_UNROLL) {
      let code = '';
      for (let k = 0; k < size; k++) code += `buf[${at(p, k)}] = 0; `;
      return code;
    }
    return `buf.fill(0, ${at(p)}, ${at(p, size)}); `;
  }

  /**
   * Statements writing `x` at fixed position `p`, appending variable data at `v`, never past `end`.
   * The value was measured before, but a getter, proxy or transform may give something else when
   * read again here: each value read is checked once more (type, range, and room left before
   * `end`), so what is written is exactly what was read, and a value that grew between the two
   * reads fails with PILE_INVALID_VALUE instead of writing over the next block.
   */
  encode(node: LayoutNode, x: string, p: Pos, path: Path, root = false): string {
    const P = renderPath(path);
    switch (node.kind) {
      case 'float64':
        return `${this.measure(node, x, path)}view.setFloat64(${at(p)}, ${x}, true);\n`;
      case 'date':
        return `${this.measure(node, x, path)}view.setFloat64(${at(p)}, ${x}.getTime(), true);\n`;
      case 'int32':
        // -0 would be lost as an int32; the reserved -2^31 keeps the round trip exact.
        return `${this.measure(node, x, path)}view.setInt32(${at(p)}, ${x} === 0 && 1 / ${x} < 0 ? -2147483648 : ${x}, true);\n`;
      case 'int64':
        return `${this.measure(node, x, path)}view.setBigInt64(${at(p)}, ${x}, true);\n`;
      case 'uint64':
        return `${this.measure(node, x, path)}view.setBigUint64(${at(p)}, ${x}, true);\n`;
      case 'boolean':
        return `${this.measure(node, x, path)}buf[${at(p)}] = ${x} ? 1 : 0;\n`;
      case 'string': {
        const w = this.id('w');
        // utf8Write encodes straight into the segment and reports the byte count, so no temporary Buffer.
        // It stops at `end`, short of a whole character: only a write that came within 3 bytes of
        // `end` can have been cut. The checks after it (written) run only when the byte count is not
        // the string's length, or when the write came that close and a written byte is not ASCII.
        // As many bytes as UTF-16 units, all of them ASCII, means every unit was written (so no
        // cut) and the string is well-formed (a lone surrogate takes 3 bytes): isWellFormed() and
        // a second UTF-8 measure are not paid for the common ASCII string, even when it ends
        // exactly at `end` (a cache value, whose room is its measured size). A refused string has
        // been written into the new block by then, like the fields before it: the caller gives it back.
        return (
          this.measure(node, x, path, false, false) +
          `view.setUint32(${at(p)}, v - o, true);\n` +
          `const ${w} = ${x}.length === 0 ? 0 : ${UTF8_WRITE(x, 'v', 'end - v')};\n` +
          `if (${w} !== ${x}.length || (${w} > end - v - 4 && !ascii(buf, v, ${w}))) written(${P}, ${x}, ${w}, end - v, end - o);\n` +
          `view.setUint32(${at(p, 4)}, ${w}, true); v += ${w};\n`
        );
      }
      case 'bigint': {
        const n = this.id('n');
        return (
          this.measure(node, x, path, false, false) +
          `const ${n} = bigSize(${x});\n` +
          `if (${n} > end - v) overflow(${P}, end - o);\n` +
          `view.setUint32(${at(p)}, v - o, true); view.setUint32(${at(p, 4)}, ${n}, true);\n` +
          `bigWrite(buf, view, v, ${x}, ${n}); v += ${n};\n`
        );
      }
      case 'bytes':
        return (
          this.measure(node, x, path, false, false) +
          `if (${x}.byteLength > end - v) overflow(${P}, end - o);\n` +
          `view.setUint32(${at(p)}, v - o, true); view.setUint32(${at(p, 4)}, ${x}.byteLength, true);\n` +
          `buf.set(${x}, v); v += ${x}.byteLength;\n`
        );
      case 'enum': {
        const wide = fixedSize(node) === 2;
        const expected = JSON.stringify(describeExpected(node));
        const store = (idx: string): string => (wide ? `view.setUint16(${at(p)}, ${idx}, true);` : `buf[${at(p)}] = ${idx};`);
        if (node.values.length > SWITCH_LIMIT) {
          const map = this.constant(new Map(node.values.map((v, i) => [v, i])));
          const k = this.id('k');
          return `const ${k} = ${map}.get(${x});\nif (${k} === undefined) failValue(${P}, ${expected}, ${x});\n${store(k)}\n`;
        }
        return `switch (${x}) { ${node.values.map((v, i) => `case ${lit(v)}: ${store(String(i))} break;`).join(' ')} default: failValue(${P}, ${expected}, ${x}); }\n`;
      }
      case 'maybe': {
        const innerSize = fixedSize(node.of);
        const absent = (tag: number): string => `buf[${at(p)}] = ${tag}; ${this.zero(shift(p, 1), innerSize)}`;
        let code = '';
        if (node.optional) code += `if (${x} === undefined) { ${absent(0)}}\nelse `;
        if (node.nullable) code += `if (${x} === null) { ${absent(1)}}\nelse `;
        return `${code}{\nbuf[${at(p)}] = 2;\n${this.encode(node.of, x, shift(p, 1), path)}}\n`;
      }
      case 'array': {
        const [n, head] = this.arrayHead(x, P);
        const b = this.id('b');
        const i = this.id('i');
        const q = this.id('q');
        const e = this.id('e');
        const stride = fixedSize(node.of);
        return (
          head +
          `if (${n} * ${stride} > end - v) overflow(${P}, end - o);\n` +
          `view.setUint32(${at(p)}, v - o, true); view.setUint32(${at(p, 4)}, ${n}, true);\n` +
          `const ${b} = v;\n` +
          (stride > 0 ? `v += ${n} * ${stride};\n` : '') +
          `for (let ${i} = 0; ${i} < ${n}; ${i}++) {\nconst ${q} = ${b} + ${i} * ${stride}, ${e} = ${x}[${i}];\n` +
          `${this.encode(node.of, e, { base: q, off: 0 }, indexPath(path, i))}}\n`
        );
      }
      case 'object': {
        // The root's check is encode()'s, outside the body encodeMeasured() shares (see generateCodec).
        let code = root ? '' : `if (typeof ${x} !== "object" || ${x} === null || Array.isArray(${x})) fail(${P}, "object", ${x});\n`;
        let off = 0;
        for (const f of node.fields) {
          const fv = this.id('f');
          code += `const ${fv} = ${x}[${JSON.stringify(f.name)}];\n${this.encode(f.type, fv, shift(p, off), childPath(path, f.name))}`;
          off += fixedSize(f.type);
        }
        return code;
      }
    }
  }

  /** Pushes the statements needed to decode the value at `p` onto `out` and returns its expression. */
  decode(node: LayoutNode, p: Pos, out: string[], bytesCtor: { u8: string; buffer: string }): string {
    switch (node.kind) {
      case 'float64':
        return `view.getFloat64(${at(p)}, true)`;
      case 'date':
        return `new Date(view.getFloat64(${at(p)}, true))`;
      case 'int32': {
        const t = this.id('t');
        out.push(`const ${t} = view.getInt32(${at(p)}, true);`);
        return `(${t} === -2147483648 ? -0 : ${t})`;
      }
      case 'int64':
        return `view.getBigInt64(${at(p)}, true)`;
      case 'uint64':
        return `view.getBigUint64(${at(p)}, true)`;
      case 'boolean':
        return `(buf[${at(p)}] !== 0)`;
      case 'bigint': {
        const s = this.id('p');
        const l = this.id('l');
        out.push(
          `const ${s} = o + view.getUint32(${at(p)}, true), ${l} = view.getUint32(${at(p, 4)}, true);`,
          `if (${s} + ${l} > end || (${l} !== 8 && (${l} < 9 || buf[${s}] > 1))) corrupt(o, length);`,
        );
        // The int64 range, the common case, is one DataView read.
        return `(${l} === 8 ? view.getBigInt64(${s}, true) : bigRead(buf, view, ${s}, ${l}))`;
      }
      case 'string':
      case 'bytes': {
        const s = this.id('p');
        const l = this.id('l');
        out.push(
          `const ${s} = o + view.getUint32(${at(p)}, true), ${l} = view.getUint32(${at(p, 4)}, true);`,
          `if (${s} + ${l} > end) corrupt(o, length);`,
        );
        if (node.kind === 'string') return `(${l} === 0 ? "" : ${UTF8_SLICE(s, `${s} + ${l}`)})`;
        return `${node.kind === 'bytes' && node.buffer ? bytesCtor.buffer : bytesCtor.u8}(buf, ${s}, ${l})`;
      }
      case 'enum': {
        const values = this.constant(node.values);
        const t = this.id('t');
        const read = fixedSize(node) === 2 ? `view.getUint16(${at(p)}, true)` : `buf[${at(p)}]`;
        out.push(`const ${t} = ${read};`, `if (${t} >= ${node.values.length}) corrupt(o, length);`);
        return `${values}[${t}]`;
      }
      case 'maybe': {
        const r = this.id('r');
        const g = this.id('g');
        const inner: string[] = [];
        const expr = this.decode(node.of, shift(p, 1), inner, bytesCtor);
        out.push(
          `let ${r}; const ${g} = buf[${at(p)}];`,
          `if (${g} === 2) {\n${inner.join('\n')}\n${r} = ${expr};\n}` +
            (node.nullable ? ` else if (${g} === 1) ${r} = null;` : '') +
            (node.optional ? ` else if (${g} !== 0) corrupt(o, length);` : ' else corrupt(o, length);'),
        );
        return r;
      }
      case 'array': {
        const s = this.id('p');
        const n = this.id('n');
        const a = this.id('a');
        const i = this.id('i');
        const q = this.id('q');
        const stride = fixedSize(node.of);
        const inner: string[] = [];
        const expr = this.decode(node.of, { base: q, off: 0 }, inner, bytesCtor);
        out.push(
          `const ${s} = o + view.getUint32(${at(p)}, true), ${n} = view.getUint32(${at(p, 4)}, true);`,
          `if (${s} + ${n} * ${stride} > end) corrupt(o, length);`,
          `const ${a} = [];`,
          `for (let ${i} = 0; ${i} < ${n}; ${i}++) {\nconst ${q} = ${s} + ${i} * ${stride};\n${inner.join('\n')}\n${a}.push(${expr});\n}`,
        );
        return a;
      }
      case 'object':
        return this.buildObject(node.fields, p, out, bytesCtor, undefined);
    }
  }

  /**
   * Decodes an object's fields and builds it, leaving out optional fields that are absent so a decoded
   * value deep-equals the original. `guard(i)` (top level of an older record) wraps field `i`'s reads.
   */
  buildObject(
    fields: readonly LayoutField[],
    p: Pos,
    out: string[],
    bytesCtor: { u8: string; buffer: string },
    guard: ((index: number, name: string, omittable: boolean) => { pre: string; post: string; absent: string }) | undefined,
  ): string {
    const exprs: string[] = [];
    let off = 0;
    fields.forEach((f, index) => {
      if (guard === undefined) {
        exprs.push(this.decode(f.type, shift(p, off), out, bytesCtor));
      } else {
        const g = guard(index, f.name, isOmittable(f.type));
        const inner: string[] = [];
        const expr = this.decode(f.type, shift(p, off), inner, bytesCtor);
        const r = this.id('u');
        out.push(`let ${r};`, `${g.pre}\n${inner.join('\n')}\n${r} = ${expr};\n${g.post}${g.absent}`);
        exprs.push(r);
      }
      off += fixedSize(f.type);
    });
    const firstOmittable = fields.findIndex((f) => isOmittable(f.type));
    const prop = (i: number): string => `${JSON.stringify(fields[i]?.name)}: ${exprs[i]}`;
    if (firstOmittable < 0) return `{ ${fields.map((_, i) => prop(i)).join(', ')} }`;
    const obj = this.id('obj');
    const head = fields.slice(0, firstOmittable).map((_, i) => prop(i));
    out.push(`const ${obj} = { ${head.join(', ')} };`);
    for (let i = firstOmittable; i < fields.length; i++) {
      const f = fields[i];
      if (f === undefined) continue;
      const assign = `${obj}[${JSON.stringify(f.name)}] = ${exprs[i]};`;
      out.push(isOmittable(f.type) ? `if (${exprs[i]} !== undefined) ${assign}` : assign);
    }
    return obj;
  }
}
