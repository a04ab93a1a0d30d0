/**
 * Generated code, compiled once per distinct source for the life of the process. A function
 * made by `new Function` is new code for V8: it starts cold in the interpreter, and call sites
 * that meet it next to an earlier copy turn polymorphic. Piles opened one after the other with
 * the same geometry, and schemas registered again with the same shape, get closures of one
 * compiled factory instead, which share its optimised code and its type feedback.
 */
const factories = new Map<string, (...args: never[]) => unknown>();
/** Distinct sources kept; past it, code is compiled without being kept (a process minting shapes without end). */
const MAX_FACTORIES = 4096;

/** `new Function(...params, source)`, made once per distinct parameter list and source. */
export function compileCached<F extends (...args: never[]) => unknown>(params: readonly string[], source: string): F {
  const key = `${params.join(',')}\n${source}`;
  let factory = factories.get(key);
  if (factory === undefined) {
    factory = new Function(...params, source) as F;
    if (factories.size < MAX_FACTORIES) factories.set(key, factory);
  }
  return factory as F;
}
