import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { isPileError, type PileErrorCode } from '@pile/core';

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
