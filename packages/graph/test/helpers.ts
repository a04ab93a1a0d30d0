import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { isPileError, openPile, type Pile, type PileErrorCode } from '@pile/core';

/** A fresh directory under the OS temp dir; remove it with {@link removeDir}. */
export function tempDir(prefix = 'pile-graph-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Asserts that `fn` throws a PileError with `code`. */
export function expectPileError(fn: () => unknown, code: PileErrorCode, message?: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(isPileError(thrown, code), `expected ${code}, got ${String(thrown)}`).to.equal(true);
  if (message !== undefined) expect((thrown as Error).message).to.match(message);
}

export const SEGMENT = 1 << 20;

/**
 * Gives each test of the enclosing describe a new in-memory pile (as `holder.pile`), closed after
 * the test. Call it in the describe's body.
 */
export function eachMemoryPile(segmentSize = SEGMENT): { readonly pile: Pile } {
  const holder = { pile: undefined as unknown as Pile };
  beforeEach(() => {
    holder.pile = openPile({ segmentSize });
  });
  afterEach(() => holder.pile.close());
  return holder;
}

/** Gives each test of the enclosing describe a new temp directory (as `holder.dir`), removed after it. */
export function eachTempDir(): { readonly dir: string } {
  const holder = { dir: '' };
  beforeEach(() => {
    holder.dir = tempDir();
  });
  afterEach(() => removeDir(holder.dir));
  return holder;
}
