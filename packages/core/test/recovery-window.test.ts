import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile, type PilePointer } from '../src';
import { checkpointState } from '../src/alloc/AllocatorCheckpoint';
import { ROW } from '../src/alloc/SegmentRows';
import type { Allocator } from '../src/alloc/Allocator';
import { fileRegions } from '../src/recovery/FileRegions';
import { recoveryWindows } from '../src/recovery/Recovery';
import type { Segment } from '../src/storage/Segment';

/**
 * A recovery from a checkpoint reads and writes the regions written since through windows of their
 * segments (Segment.window) instead of mapping them whole. The copy of a directory taken while its
 * writer is alive is what a SIGKILL would leave (see crash-snapshot.test.ts); each case recovers
 * copies of the same files with windows and without (recoveryWindows.bytes 0, every segment mapped),
 * and both must come to the same allocator state, keep every record and write on from there alike.
 */

const SEG = 8 << 20;
const inside = (pile: Pile): { segments: Segment[]; alloc: Allocator } => pile as unknown as { segments: Segment[]; alloc: Allocator };
const valueOf = (i: number): string => `record-${i}`.padEnd(32 + (i % 50), '.');

/**
 * A copy of a pile directory as a SIGKILL would leave it (without the lock, whose pid is alive), and
 * without pile.coord, as after a crash of the machine (whose rows a later boot does not trust): the
 * copy recovers from pile.meta's checkpoint, which these windows serve, not from pile.coord's rows.
 */
function killCopy(from: string, to: string): void {
  fs.mkdirSync(to);
  for (const f of fs.readdirSync(from)) if (f !== 'pile.lock' && f !== 'pile.coord') fs.copyFileSync(path.join(from, f), path.join(to, f));
}

interface Recovered {
  state: number[];
  stats: unknown;
  /** Indexes of the segments mapped right after the open. */
  mapped: number[];
  full: boolean;
  blocks: number;
  regions: number;
  torn: number;
}

describe('recovery from a checkpoint through windows of the segments', function () {
  this.timeout(120_000);
  let tmp: string;
  let saved: number;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-window-'));
    saved = recoveryWindows.bytes;
  });
  afterEach(() => {
    recoveryWindows.bytes = saved;
    fileRegions.on = true;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /**
   * A pile of `before` records closed cleanly, reopened, `after` more put; `damage` may change the
   * files of the copy then. Returns the copy's directory and every record.
   */
  function crashed(before: number, after: number, damage?: (pile: Pile) => void): { dir: string; records: Map<PilePointer, string> } {
    const dir = path.join(tmp, 'pile');
    const records = new Map<PilePointer, string>();
    let pile = openPile({ dir, segmentSize: SEG });
    for (let i = 0; i < before; i++) records.set(pile.put(valueOf(i)), valueOf(i));
    pile.close();
    pile = openPile({ dir, checkpointInterval: 0 });
    for (let i = before; i < before + after; i++) records.set(pile.put(valueOf(i)), valueOf(i));
    damage?.(pile);
    const copy = path.join(tmp, 'crashed');
    killCopy(dir, copy);
    pile.close();
    return { dir: copy, records };
  }

  /** Opens a new copy of `dir` with `bytes` of windows, checks every record and verify(), then writes on. */
  function recover(dir: string, bytes: number, records: Map<PilePointer, string>): Recovered {
    const copy = `${dir}-${bytes}`;
    killCopy(dir, copy);
    recoveryWindows.bytes = bytes;
    // Without windows, the segments mapped whole (not read from their files, FileRegions): what both variants are compared with.
    fileRegions.on = bytes !== 0;
    const pile = openPile({ dir: copy });
    try {
      const { segments, alloc } = inside(pile);
      const r = pile.lastRecovery;
      expect(r.source).to.equal('checkpoint');
      const out: Recovered = {
        state: [...checkpointState(alloc), ...alloc.rows.subarray(0, segments.length * ROW)],
        stats: pile.stats,
        mapped: segments.filter((s) => s.mapped).map((s) => s.index),
        full: r.full,
        blocks: r.blocksScanned,
        regions: r.regionsScanned,
        torn: r.tornRecords,
      };
      for (const [p, v] of records) {
        if (pile.get(p) !== v) throw new Error(`record ${p}: expected ${v}, got ${String(pile.get(p))}`);
      }
      expect(pile.verify().ok).to.equal(true);
      // Writing on from the recovered tail: the records land where they would without windows.
      const more = Array.from({ length: 50 }, (_, i) => pile.put(valueOf(i)));
      out.state.push(...more);
      return out;
    } finally {
      pile.close();
    }
  }

  /** Recovers copies of `dir` with `bytes` of windows and with none: both from the checkpoint, to the same state. */
  function both(dir: string, records: Map<PilePointer, string>, bytes = saved): { windowed: Recovered; whole: Recovered } {
    const windowed = recover(dir, bytes, records);
    const whole = recover(dir, 0, records);
    expect(windowed.full).to.equal(false);
    expect(windowed.state).to.deep.equal(whole.state);
    expect(windowed.stats).to.deep.equal(whole.stats);
    return { windowed, whole };
  }

  it('maps only a window of the tail segment, and recovers as a whole mapping does', () => {
    // About 5 MiB in the first segment: the tail lies well inside it.
    const { dir, records } = crashed(60_000, 3_000);
    const { windowed, whole } = both(dir, records);
    expect(windowed.blocks).to.equal(3_001);
    expect(windowed.mapped, 'segments mapped by the open').to.deep.equal([]);
    expect(whole.mapped).to.deep.equal([0]);
  });

  it('walks again with the segment mapped when the window does not hold the region', () => {
    // 3,000 records of 48 to 88 bytes: more than the one 64 KiB window allowed.
    const { dir, records } = crashed(60_000, 3_000);
    const { windowed } = both(dir, records, 64 << 10);
    expect(windowed.mapped).to.deep.equal([0]);
  });

  it('maps no segment added since the checkpoint (read from its file, FileRegions)', () => {
    // The records written since the checkpoint run from the first segment into the second. The
    // free end of the first goes on a free list, whose links are written through the segment's
    // own views: that one is mapped; the new segment, where the tail is, is not (a whole segment
    // added since is read from its file).
    const { dir, records } = crashed(100_000, 20_000);
    const { windowed, whole } = both(dir, records);
    expect(windowed.regions).to.equal(2);
    expect(whole.mapped).to.deep.equal([0, 1]);
    expect(windowed.mapped).to.deep.equal([0]);
  });

  it('hands a torn record in a window over to the general passes, which free it as without windows', () => {
    const { dir, records } = crashed(60_000, 3_000, (pile) => {
      // One more record whose payload then changed after its commit: its checksum no longer holds.
      const { segments, alloc } = inside(pile);
      const off = alloc.tailAddr % SEG;
      pile.put('the record a crash tore'.padEnd(40, '!'));
      segments[0]!.buf[off + 20]! ^= 1;
    });
    const { windowed } = both(dir, records);
    expect(windowed.torn).to.equal(1);
  });
});
