import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PileError } from '@pile/core';

export const SEG = 1 << 20;

/** A fresh temp dir, removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-cache-'));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Runs `fn`, expecting a PileError with `code` (and `text` in its message). */
export function expectPileError(fn: () => unknown, code: string, text?: string): PileError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(PileError);
    const e = err as PileError;
    expect(e.code).to.equal(code);
    if (text !== undefined) expect(e.message).to.contain(text);
    return e;
  }
  expect.fail(`expected ${code}`);
}

/** A clock tests move by hand. */
export function fakeClock(start = 1_700_000_000_000): { now: () => number; advance: (ms: number) => void; set: (ms: number) => void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
    set: (ms) => {
      t = ms;
    },
  };
}
