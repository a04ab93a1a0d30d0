import type { ZodType } from 'zod';
import { PileError, type Pile, type PilePointer, type TypedView } from '@pile/core';

/**
 * Where the values of a list or graph go: typed records of a registered schema (the
 * compiled codec) when a zod schema is given, the pile's generic codec otherwise.
 */
export class ValueStore<T> {
  private readonly view: TypedView<T> | undefined;

  constructor(
    private readonly pile: Pile,
    schemaName: string,
    schema: ZodType<T> | undefined,
  ) {
    this.view = schema === undefined ? undefined : pile.schema(schemaName, schema);
  }

  put(value: T): PilePointer {
    return this.view === undefined ? this.pile.put(value) : this.view.put(value);
  }

  get(ptr: PilePointer): T {
    return this.view === undefined ? this.pile.get<T>(ptr) : this.view.get(ptr);
  }

  set(ptr: PilePointer, value: T): void {
    if (this.view === undefined) this.pile.set(ptr, value);
    else this.view.set(ptr, value);
  }
}

/** Checks a zod schema option. @throws PILE_INVALID_OPTION */
export function checkSchemaOption(name: string, schema: unknown): void {
  if (schema === undefined) return;
  if (schema === null || typeof schema !== 'object' || typeof (schema as { safeParse?: unknown }).safeParse !== 'function') {
    throw new PileError('PILE_INVALID_OPTION', `option ${name}: expected a zod schema`);
  }
}

/** Checks the options object of an open function. @throws PILE_INVALID_OPTION */
export function checkOptions(options: unknown, known: readonly string[]): void {
  if (options === null || typeof options !== 'object') throw new PileError('PILE_INVALID_OPTION', 'option options: expected an object');
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) throw new PileError('PILE_INVALID_OPTION', `option ${k}: unknown option (known: ${known.join(', ')})`);
  }
}

/** Checks a list or graph name. @throws PILE_INVALID_OPTION */
export function checkName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name === '') throw new PileError('PILE_INVALID_OPTION', 'option name: expected a non-empty string');
}
