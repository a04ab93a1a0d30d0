import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { native } from '@pile/native';
import { openPile, type Pile, type PilePointer, type RecoveryReport } from '../src';
import type { Allocator } from '../src/alloc/Allocator';
import { STATE_DAMAGED, STATE_RESERVED, STATE_SHIFT, genCheck, sizeCheck } from '../src/storage/BlockFormat';
import { fileRegions, walkFile } from '../src/recovery/FileRegions';
import { walkPlainRegions, type PlainRegions } from '../src/recovery/PlainRegions';
import { Segment } from '../src/storage/Segment';
import { copyDir, dropCoord, metaFile, prng } from './fixtures/pile-files';

/**
 * Issue 19: a recovery from a checkpoint reads a whole segment from its file (@pile/native's
 * plainFile, FileRegions.ts) instead of mapping it. That walk must accept exactly what the
 * JavaScript walk of PlainRegions accepts over the mapped segment, find the same counts and free
 * runs, and the recovery must leave the same bytes in every file as the one through the mapping.
 */

const SEG = 1 << 20;
const WRITER = path.join(__dirname, 'fixtures', 'segment-writer.js');
const inside = (pile: Pile): { segments: Segment[]; alloc: Allocator } => pile as unknown as { segments: Segment[]; alloc: Allocator };

/** The runs of a JavaScript walk as [start, end, generation, inner offsets], and its counts. */
function jsFound(p: PlainRegions): unknown {
  const runs: unknown[] = [];
  for (let i = 0; i < p.runs.length; i += 6)
    runs.push([p.runs[i + 1], p.runs[i + 2], p.runs[i + 3], p.inner.slice(p.runs[i + 4], p.runs[i + 5])]);
  return { blocks: p.blocks, objects: p.objectCount, allocated: p.allocatedBytes, utilized: p.utilizedBytes, runs };
}

/** The same of a walk from the file (plainFile's answer: 8 numbers, 11 per run, then the inner offsets). */
function fileFound(f: NonNullable<ReturnType<typeof walkFile>>): unknown {
  const r = f.found;
  const innerAt = 8 + r[6]! * 11;
  const runs: unknown[] = [];
  for (let j = 0, at = 8; j < r[6]!; j++, at += 11)
    runs.push([r[at], r[at + 1], r[at + 2], Array.from(r.subarray(innerAt + r[at + 3]!, innerAt + r[at + 4]!))]);
  return { blocks: f.blocks, objects: f.objects, allocated: f.allocated, utilized: f.utilized, runs };
}

describe('recovery reads whole segments from their files (FileRegions, issue 19)', function () {
  this.timeout(300_000);
  let tmp: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-fileregions-'));
  });
  after(() => {
    fileRegions.on = true;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** The damage a case applies to its segment after the writes. */
  const DAMAGE = ['none', 'torn record', 'reserved block', 'free check word', 'damaged block', 'grown set'] as const;

  it('plainFile accepts a segment exactly when the walk over the mapping does, and finds the same runs (120 random segments)', () => {
    const seen = { same: 0, bothRefuse: 0, mappedOnly: 0 };
    for (let seed = 1; seed <= 120; seed++) {
      const r = prng(seed);
      const rand = (n: number): number => Math.floor(r() * n);
      const damage = DAMAGE[seed % DAMAGE.length]!;
      const dir = path.join(tmp, `walk-${seed}`);
      const pile = openPile({ dir, segmentSize: SEG });
      const ptrs: PilePointer[] = [];
      // Strings of every size class up to CRC32's, raw blocks (mutable and sealed), Buffers; then
      // deletes, some side by side (their blocks merge into one run).
      while (ptrs.length < 600) {
        const k = rand(10);
        if (k < 6) ptrs.push(pile.put('x'.repeat(rand(k === 0 ? 3000 : 200))));
        else if (k === 6) ptrs.push(pile.allocRaw(rand(300), 5));
        else if (k === 7) ptrs.push(pile.putRaw(new Uint8Array(rand(1500)).fill(seed), 6));
        else ptrs.push(pile.put(Buffer.alloc(rand(100), 3)));
      }
      for (let i = 0; i < 150; i++) {
        const at = rand(ptrs.length - 1);
        for (const j of rand(3) === 0 ? [at, at + 1] : [at]) {
          if (ptrs[j] === 0) continue;
          pile.delete(ptrs[j]!);
          ptrs[j] = 0;
        }
      }
      const { segments, alloc } = inside(pile);
      const seg = segments[0]!.use();
      const blocks: number[] = [];
      for (let off = 64; off < SEG; off += seg.u32[off >>> 2]!) blocks.push(off);
      const used = blocks.filter((off) => seg.u32[(off >>> 2) + 1]! >>> STATE_SHIFT === 1);
      const free = blocks.filter((off) => seg.u32[(off >>> 2) + 1]! >>> STATE_SHIFT === 0 && off + seg.u32[off >>> 2]! < SEG);
      const h = (off: number): number => off >>> 2;
      if (damage === 'torn record') {
        const off = used[rand(used.length)]!;
        seg.buf[off + 8 + rand(seg.u32[h(off)]! - 8)]! ^= 1 << rand(8);
      } else if (damage === 'reserved block') {
        // An unfinished put: a reserved block whose check words hold, which the walks merge as free.
        const off = used[rand(used.length)]!;
        const size = seg.u32[h(off)]!;
        const gen = seg.u32[h(off) + 1]! & 0x3fffff;
        seg.u32[h(off) + 2] = sizeCheck(size);
        seg.u32[h(off) + 3] = genCheck(gen);
        seg.u32[h(off) + 1] = (gen | (STATE_RESERVED << STATE_SHIFT)) >>> 0;
      } else if (damage === 'free check word' && free.length > 0) {
        // Its size check cleared (as a merge leaves an absorbed header): the mapped walk confirms its size by its neighbours.
        seg.u32[h(free[rand(free.length)]!) + 2] = 0;
      } else if (damage === 'damaged block') {
        const off = used[rand(used.length)]!;
        seg.u32[h(off) + 1] = (seg.u32[h(off) + 1]! | (STATE_DAMAGED << STATE_SHIFT)) >>> 0;
      } else if (damage === 'grown set') {
        const p = ptrs.find((x) => x !== 0)!;
        pile.set(p, 'y'.repeat(400));
      }
      // The same file, as a segment that is not mapped: what an open has before recovery.
      const unmapped = Segment.open(dir, 0, SEG, seg.u32[4]!, false);
      const fromFile = walkFile(unmapped, 64, SEG);
      const mapped = walkPlainRegions(segments, alloc, SEG, [[0, 64]]);
      const what = `seed ${seed}, ${damage}`;
      if (fromFile !== undefined) {
        expect(mapped, what).to.not.equal(undefined);
        expect(fileFound(fromFile), what).to.deep.equal(jsFound(mapped as PlainRegions));
        seen.same++;
      } else if (mapped === undefined) seen.bothRefuse++;
      else {
        // Only a free block whose own check words fail is left to the mapped walk, which may confirm its size.
        expect(damage, what).to.equal('free check word');
        seen.mappedOnly++;
      }
      pile.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(seen.same).to.be.greaterThan(30);
    expect(seen.bothRefuse).to.be.greaterThan(30);
    expect(seen.mappedOnly).to.be.greaterThan(5);
  });

  it('plainFile refuses a file that ends early and a misaligned start', () => {
    const dir = path.join(tmp, 'short');
    const pile = openPile({ dir, segmentSize: SEG });
    // Records past the half of the segment where the file is cut (a free block's body is never read).
    for (let i = 0; i < 12_000; i++) pile.put(`record ${i}`.padEnd(40, '.'));
    const pileId = inside(pile).segments[0]!.use().u32[4]!;
    pile.close();
    const seg = Segment.open(dir, 0, SEG, pileId, false);
    fs.truncateSync(path.join(dir, 'seg-000000.pile'), SEG / 2);
    expect(() => walkFile(seg, 64, SEG)).to.throw(/is 524288 bytes, expected 1048576/);
    const fd = fs.openSync(path.join(dir, 'seg-000000.pile'), 'r');
    expect(native.plainFile(fd, 64, SEG, 'x')[0]).to.equal(2);
    expect(() => native.plainFile(fd, 68, SEG, 'x')).to.throw(RangeError);
    fs.closeSync(fd);
  });

  /** Every file of a pile directory's segments and meta, by name. */
  const filesOf = (dir: string): Record<string, Buffer> =>
    Object.fromEntries(
      fs
        .readdirSync(dir)
        .filter((f) => f.startsWith('seg-') || f === 'pile.meta')
        .map((f) => [f, fs.readFileSync(path.join(dir, f))]),
    );

  /** The blocks of a segment file other than free ones, as [offset, size, state word], in order. */
  const notFree = (b: Buffer): number[][] => {
    const u32 = new Uint32Array(b.buffer, b.byteOffset, b.length >>> 2);
    const out: number[][] = [];
    for (let off = 64; off < b.length; off += u32[off >>> 2]!) {
      expect(u32[off >>> 2], `block size at ${off}`).to.be.greaterThan(0);
      if (u32[(off >>> 2) + 1]! >>> STATE_SHIFT !== 0) out.push([off, u32[off >>> 2]!, u32[(off >>> 2) + 1]!]);
    }
    return out;
  };

  it('a recovery through the files leaves the bytes, counters and report of one through the mappings, also when run twice; one from pile.coord differs in free space alone (8 seeds)', () => {
    for (let seed = 1; seed <= 8; seed++) {
      const r = prng(100 + seed);
      const rand = (n: number): number => Math.floor(r() * n);
      const built = path.join(tmp, `built-${seed}`);
      const pile = openPile({ dir: built, segmentSize: SEG });
      const ptrs: PilePointer[] = [];
      const lengths: number[] = [];
      for (let i = 0; i < 12000; i++) {
        lengths.push(20 + rand(200));
        ptrs.push(pile.put('v'.repeat(lengths[i]!)));
      }
      pile.close();
      // A writer killed after deletes (some side by side), same-length sets and puts all over the pile.
      const ops: unknown[] = [];
      for (let i = 0; i < 400; i++) {
        const k = rand(3);
        const p = rand(ptrs.length - 1);
        if (k === 0) ops.push(['del', ptrs[p]], ...(rand(2) === 0 ? [['del', ptrs[p + 1]]] : []));
        else if (k === 1) ops.push(['set', ptrs[p], lengths[p]]);
        else ops.push(['put', 20 + rand(300)]);
      }
      const seen = new Set<number>();
      const unique = ops.filter((op) => {
        const [kind, p] = op as [string, number];
        if (kind === 'put') return true;
        if (seen.has(p)) return false;
        seen.add(p);
        return true;
      });
      fs.writeFileSync(`${built}.json`, JSON.stringify(unique));
      const child = spawnSync(process.execPath, [WRITER], {
        env: { ...process.env, PILE_DIR: built, PILE_OPS: `${built}.json` },
        encoding: 'utf8',
      });
      expect(child.signal, child.stderr).to.equal('SIGKILL');
      // Every record the writer left: the built ones, less its deletes, with its sets and puts.
      const left = new Map<number, string>(ptrs.map((p, i) => [p, 'v'.repeat(lengths[i]!)]));
      const puts = JSON.parse(child.stdout.trim()) as number[];
      for (const op of unique) {
        const [kind, a, b] = op as [string, number, number];
        if (kind === 'del') left.delete(a);
        else if (kind === 'set') left.set(a, 's'.repeat(b));
        else left.set(puts.shift()!, 'p'.repeat(a));
      }
      const results: Array<{ files: Record<string, Buffer>; report: RecoveryReport; stats: unknown; tail: number[] }> = [];
      // The first three recover from pile.meta's checkpoint (pile.coord removed, as after a machine
      // crash: FileRegions serves that path alone); the last from pile.coord, as the same boot does.
      for (const [on, twice, coord] of [
        [true, false, false],
        [false, false, false],
        [true, true, false],
        [true, false, true],
      ] as const) {
        const dir = path.join(tmp, `case-${seed}-${on}-${twice}-${coord}`);
        copyDir(built, dir);
        if (!coord) dropCoord(dir);
        fileRegions.on = on;
        const open = (): Pile => openPile({ dir, verifyOnRead: true });
        if (twice) {
          // Recovered once and killed before its checkpoint: the next open finds the old pile.meta
          // over segments whose runs hold their final headers and links already.
          const meta = fs.readFileSync(metaFile(dir));
          const first = open();
          expect(first.lastRecovery.source).to.equal('checkpoint');
          first.close();
          fs.writeFileSync(metaFile(dir), meta);
          dropCoord(dir);
        }
        const p = open();
        try {
          expect(p.lastRecovery.ran).to.equal(true);
          expect(p.lastRecovery.full).to.equal(false);
          expect(p.lastRecovery.source).to.equal(coord ? 'coord' : 'checkpoint');
          for (const [q, v] of left) expect(p.get(q as PilePointer), `seed ${seed}, record ${q}`).to.equal(v);
          expect(p.stats.objectCount).to.equal(left.size);
          const v = p.verify();
          expect(v.ok, JSON.stringify(v)).to.equal(true);
          const { alloc } = inside(p);
          results.push({ files: {}, report: { ...p.lastRecovery }, stats: p.stats, tail: [alloc.tailAddr, alloc.tailEnd, alloc.tailGen] });
        } finally {
          p.close();
        }
        results[results.length - 1]!.files = filesOf(dir);
      }
      fileRegions.on = true;
      const [fromFiles, mapped, twice, coord] = results;
      expect(fromFiles!.report, `seed ${seed}`).to.deep.equal(mapped!.report);
      expect(fromFiles!.stats, `seed ${seed}`).to.deep.equal(mapped!.stats);
      expect(twice!.stats, `seed ${seed}`).to.deep.equal(mapped!.stats);
      for (const name of Object.keys(mapped!.files)) {
        expect(fromFiles!.files[name]!.equals(mapped!.files[name]!), `seed ${seed}: ${name}`).to.equal(true);
        if (name !== 'pile.meta')
          expect(twice!.files[name]!.equals(mapped!.files[name]!), `seed ${seed}, run twice: ${name}`).to.equal(true);
      }
      // From pile.coord: fewer regions scanned, the same records, counters and tail. Its segments
      // differ from pile.meta's path in free space alone: it keeps the free lists as the writer left
      // them (free() merges only forward, so two free blocks may lie side by side), where a rescan
      // merges such runs and lists them anew. So every block that is not free is the same, at the same
      // offset with the same bytes, and the segment headers are equal; free blocks' headers and links may differ.
      expect(coord!.report.regionsScanned, `seed ${seed}`).to.be.below(mapped!.report.regionsScanned);
      expect(coord!.stats, `seed ${seed}`).to.deep.equal(mapped!.stats);
      expect(coord!.tail, `seed ${seed}`).to.deep.equal(mapped!.tail);
      for (const name of Object.keys(mapped!.files).filter((f) => f.startsWith('seg-'))) {
        const ours = coord!.files[name]!;
        const theirs = mapped!.files[name]!;
        expect(ours.subarray(0, 64).equals(theirs.subarray(0, 64)), `seed ${seed}: ${name} header`).to.equal(true);
        const blocks = notFree(ours);
        expect(blocks, `seed ${seed}: ${name} blocks`).to.deep.equal(notFree(theirs));
        for (const [off, size] of blocks)
          expect(ours.subarray(off!, off! + size!).equals(theirs.subarray(off!, off! + size!)), `seed ${seed}: ${name} at ${off}`).to.equal(
            true,
          );
      }
    }
  });
});
