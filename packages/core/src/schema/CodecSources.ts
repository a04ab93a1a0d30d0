import { Generator, INLINE_KINDS, isOmittable, type GeneratedCodec, type InlineRead, type Pos } from './SchemaCodegen';
import { fixedSize, type LayoutField, type LayoutNode } from './SchemaLayout';

/*
 * The modules a schema's codec is made of, each generated on first use (see SchemaCodegen for the
 * record layout and the per-node source).
 */

/** Header: u16 field count. */
export const HEADER_SIZE = 2;

/** The layout facts both halves of a codec are generated from. */
interface Frame {
  readonly m: number;
  readonly fixedEnds: readonly number[];
  readonly total: number;
  readonly rootPos: Pos;
  readonly bytesCtor: { u8: string; buffer: string };
}

function frame(fields: readonly LayoutField[]): Frame {
  const fixedEnds: number[] = [HEADER_SIZE];
  for (const f of fields) fixedEnds.push((fixedEnds[fixedEnds.length - 1] ?? 0) + fixedSize(f.type));
  return {
    m: fields.length,
    fixedEnds,
    total: fixedEnds[fields.length] ?? HEADER_SIZE,
    rootPos: { base: 'o', off: HEADER_SIZE },
    bytesCtor: { u8: 'copyU8', buffer: 'copyBuffer' },
  };
}

/** A generated function of the statements `lines` that returns `expr`; `head` is its `function name(params)`. */
function functionSource(head: string, lines: readonly string[], expr: string): string {
  return `${head} {\n${lines.join('\n')}\nreturn ${expr};\n}`;
}

/**
 * A module of generated source: the generator's constants bound to names, then `body`, returning
 * the functions named in `exported`.
 */
function moduleOf(g: Generator, body: string, exported: string, inline: GeneratedCodec['inline'] = []): GeneratedCodec {
  const constants = g.constants.map((_, i) => `const K${i} = K[${i}];`).join('\n');
  return { source: `"use strict";\n${constants}\n${body}\nreturn { ${exported} };\n`, constants: g.constants, inline };
}

/**
 * Generates the decode of a record written with all the fields (the common case): a module that
 * receives the helpers as parameters and returns `{ decode }`; an older or short record goes to the
 * helper `decodeOld` ({@link generateOldDecodeCodec}). The parts of a codec are generated apart
 * ({@link generateFieldCodec}, {@link generateWriteCodec}) and each on first use, because a
 * process that reopens a pile to read it needs only this one before its first record: the
 * generator runs cold in a fresh process, about as long as the rest of a schema's registration.
 */
export function generateDecodeCodec(fields: readonly LayoutField[]): GeneratedCodec {
  const g = new Generator();
  const { m, total, rootPos, bytesCtor } = frame(fields);
  const fast: string[] = [];
  const fastExpr = g.buildObject(fields, rootPos, fast, bytesCtor, undefined);
  const check = `if (length < ${total} || view.getUint16(o, true) < ${m}) return decodeOld(buf, view, o, length);`;
  return moduleOf(
    g,
    functionSource('function decode(buf, view, o, length)', [check, 'const end = o + length;', ...fast], fastExpr),
    'decode',
  );
}

/**
 * Generates the decode of a record written with fewer fields (by an older compatible schema) or
 * too short for them: a module returning `{ decodeOld }` (see {@link generateDecodeCodec}).
 */
export function generateOldDecodeCodec(fields: readonly LayoutField[]): GeneratedCodec {
  const g = new Generator();
  const { m, fixedEnds, rootPos, bytesCtor } = frame(fields);
  const old: string[] = [];
  const oldExpr = g.buildObject(fields, rootPos, old, bytesCtor, (index, name, omittable) => ({
    pre: `if (n > ${index}) {`,
    post: '}',
    absent: omittable ? '' : ` else mismatch(o, n, ${JSON.stringify(name)});`,
  }));
  const checks = [
    'const end = o + length;',
    'if (length < 2) corrupt(o, length);',
    'const n = view.getUint16(o, true);',
    `if (length < FIXED_ENDS[n < ${m} ? n : ${m}]) corrupt(o, length);`,
  ];
  const decodeOld = functionSource('function decodeOld(buf, view, o, length)', [...checks, ...old], oldExpr);
  return moduleOf(g, `const FIXED_ENDS = [${fixedEnds.join(', ')}];\n${decodeOld}`, 'decodeOld');
}

/**
 * Generates the reads of single top-level fields: a module returning `{ readers }`, where
 * readers[i] reads field i alone, and in `inline` the reads of fixed-slot scalars as source.
 */
export function generateFieldCodec(fields: readonly LayoutField[]): GeneratedCodec {
  const g = new Generator();
  const { m, fixedEnds, total, bytesCtor } = frame(fields);
  const slotOf = (index: number): number => fixedEnds[index] ?? HEADER_SIZE;

  const inline = fields.map((f, index): InlineRead | undefined => {
    if (!INLINE_KINDS.has(f.type.kind)) return undefined;
    const body: string[] = [];
    const expr = new Generator().decode(f.type, { base: 'o', off: slotOf(index) }, body, bytesCtor);
    return { source: `${body.join('\n')}\nconst value = ${expr};`, fieldCount: m, minLength: total };
  });

  const readers = fields.map((f, index) => {
    const body: string[] = [];
    const expr = g.decode(f.type, { base: 'o', off: slotOf(index) }, body, bytesCtor);
    const absent = isOmittable(f.type) ? 'return undefined;' : `mismatch(o, view.getUint16(o, true), ${JSON.stringify(f.name)});`;
    const checks = [
      'const end = o + length;',
      `if (length < ${fixedEnds[index + 1]}) { if (length < 2 || view.getUint16(o, true) > ${index}) corrupt(o, length); }`,
      `if (view.getUint16(o, true) <= ${index}) ${absent}`,
    ];
    return functionSource('function (buf, view, o, length)', [...checks, ...body], expr);
  });

  return moduleOf(g, `const readers = [${readers.join(',\n')}];`, 'readers', inline);
}

/**
 * Generates the write half of the codec: a module that receives the helpers as parameters and
 * returns `{ measure, measureBound, encode, encodeMeasured }` (see {@link generateDecodeCodec}).
 */
export function generateWriteCodec(fields: readonly LayoutField[]): GeneratedCodec {
  const g = new Generator();
  const root: LayoutNode = { kind: 'object', fields };
  const { m, total, rootPos } = frame(fields);

  // measure: the top-level object check is shared with nested objects.
  const measureBody = g.measure(root, 'x', []);
  const boundBody = g.measure(root, 'x', [], true);
  // The body without the root's check: encodeMeasured(), which the pile's and the cache's writes call
  // right after measure() or measureBound() checked the same value (whether a value is a non-array
  // object can not change between two reads). Their typed put inlines it whole, where the check as
  // a call of encode's own (to keep encode under TurboFan's 460-byte inlining limit) was a call per
  // put that TurboFan did not inline once the put's budget was spent (44 instructions a mapped put,
  // benchmarks/results/comparisons.md, the section on the mapped put and get in instructions).
  const encodeBody = g.encode(root, 'x', rootPos, [], true);

  const body = `function measure(x) {
let s = ${total};
${measureBody}return s;
}
function measureBound(x) {
let s = ${total};
${boundBody}return s;
}
function encodeMeasured(x, buf, view, o, end) {
view.setUint16(o, ${m}, true);
let v = o + ${total};
${encodeBody}return v;
}
function encode(x, buf, view, o, end) {
if (typeof x !== "object" || x === null || Array.isArray(x)) fail("(root)", "object", x);
return encodeMeasured(x, buf, view, o, end);
}`;
  return moduleOf(g, body, 'measure, measureBound, encode, encodeMeasured');
}
