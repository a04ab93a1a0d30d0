import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type PilePointer } from '../src';

// close() unmaps every segment at once (through @pile/native): the memory goes back to the system
// without waiting for a GC, and every view of it that is still held anywhere becomes empty.

const MiB = 1 << 20;

/** Resident memory backed by files and anonymous memory, in bytes (Linux). */
function rss(): { file: number; anon: number } {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { file: kb('RssFile'), anon: kb('RssAnon') };
}

describe('closing a pile returns its memory', function () {
  this.timeout(60_000);
  let tmp: string;
  before(function () {
    if (!fs.existsSync('/proc/self/status')) this.skip();
  });
  beforeEach(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-close-')); });
  afterEach(() => { fs.rmSync(tmp, { recursive: true, force: true }); });

  /** Fills about `bytes` of the pile with 256 KiB records. */
  function fill(pile: ReturnType<typeof openPile>, bytes: number): PilePointer[] {
    const chunk = Buffer.alloc(256 * 1024 - 64, 3);
    const ptrs: PilePointer[] = [];
    for (let n = 0; n < bytes; n += chunk.length) ptrs.push(pile.put(chunk));
    return ptrs;
  }

  it('mapped: resident file pages drop at close, before any GC', () => {
    const pile = openPile({ dir: path.join(tmp, 'p'), segmentSize: 16 * MiB });
    fill(pile, 96 * MiB);
    const open = rss().file;
    pile.close();
    // No allocation or GC between the two readings: only the unmapping can free these pages.
    expect(open - rss().file).to.be.greaterThan(64 * MiB);
  });

  it('in memory: resident anonymous pages drop at close, before any GC', () => {
    const pile = openPile({ segmentSize: 16 * MiB });
    fill(pile, 96 * MiB);
    const open = rss().anon;
    pile.close();
    expect(open - rss().anon).to.be.greaterThan(64 * MiB);
  });

  it('compact() unmaps the segments it releases', () => {
    const pile = openPile({ dir: path.join(tmp, 'c'), segmentSize: 16 * MiB });
    try {
      const ptrs = fill(pile, 96 * MiB);
      for (const p of ptrs.slice(ptrs.length / 2)) pile.delete(p);
      const before = rss().file;
      const r = pile.compact();
      expect(r.segmentsAfter).to.be.lessThan(r.segmentsBefore);
      expect(before - rss().file).to.be.greaterThan(32 * MiB);
    } finally {
      pile.close();
    }
  });

  for (const kind of ['mapped', 'in memory'] as const) {
    it(`${kind}: Buffers and views handed out before close are empty after it, never a crash`, () => {
      const pile = openPile({ ...(kind === 'mapped' ? { dir: path.join(tmp, 'v') } : {}), segmentSize: MiB });
      const raw = pile.allocRaw(4096, 9);
      const buf = pile.rawBuffer(raw);
      buf.writeUInt32LE(77, 0);
      const off = pile.rawSeek(raw);
      const seg = pile.rawSegment;
      const view = pile.rawView;
      const f64 = pile.rawF64;
      expect(view.getUint32(off, true)).to.equal(77);
      // Hot accesses first, so an optimised accessor is what meets the unmapped memory.
      let sum = 0;
      for (let i = 0; i < 100_000; i++) sum += buf[i & 4095]! + seg[off + (i & 4095)]! + f64[(off >>> 3) + (i & 511)]!;
      expect(sum).to.be.greaterThan(0);
      pile.close();
      for (const v of [buf, seg, f64]) expect(v.length).to.equal(0);
      expect(buf[0]).to.equal(undefined);
      expect(seg[off]).to.equal(undefined);
      buf[0] = 1;
      expect(() => buf.readUInt32LE(0)).to.throw(RangeError);
      expect(() => view.getUint32(off, true)).to.throw(TypeError);
      // The pile itself refuses.
      expect(() => pile.rawBuffer(raw)).to.throw(/PILE_CLOSED/);
    });
  }
});
