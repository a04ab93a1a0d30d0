import { PileError } from './PileError';

/**
 * Checks for values that the pile's encodings would change without a word: Pile refuses them
 * rather than give back something else (docs/guide.md, "What round-trips").
 */

interface MaybeWellFormed {
  isWellFormed?: () => boolean;
}

/**
 * Index of the first lone surrogate of `s` (a UTF-16 unit D800-DFFF without its pair), or -1.
 * UTF-8 has no encoding for one: it would be stored as U+FFFD.
 */
export function loneSurrogateAt(s: string): number {
  // V8 answers a one-byte string at once and scans two-byte strings natively.
  const wf = (s as unknown as MaybeWellFormed).isWellFormed;
  if (wf !== undefined && wf.call(s)) return -1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
    }
    return i;
  }
  return -1;
}

/** Why `s` can not be stored as UTF-8 unchanged, or undefined when it can. */
export function illFormedString(s: string): string | undefined {
  const at = loneSurrogateAt(s);
  return at < 0 ? undefined : `a string with a lone surrogate (U+${s.charCodeAt(at).toString(16).toUpperCase()} at index ${at}) can not be stored as UTF-8 unchanged; it would read back as U+FFFD`;
}

/**
 * Why a generic (MessagePack) value would not read back as it was put, judged at its top level,
 * or undefined. Functions anywhere in a value are refused by the packer itself (see
 * {@link refuseFunction}).
 */
export function unstorableValue(value: unknown): string | undefined {
  if (value instanceof String || value instanceof Number || value instanceof Boolean) {
    return `a boxed ${value.constructor.name} object would read back as a plain object; store its primitive (value.valueOf())`;
  }
  return undefined;
}

/** msgpackr's writeFunction: a function would be stored as undefined, so it is refused. */
export function refuseFunction(code: 'PILE_INVALID_OPTION' | 'PILE_SCHEMA_VIOLATION'): (fn: unknown) => never {
  return (fn: unknown) => {
    const name = typeof fn === 'function' && fn.name !== '' ? ` (${fn.name})` : '';
    throw new PileError(code, `value: a function${name} can not be stored: it would read back as undefined`);
  };
}
