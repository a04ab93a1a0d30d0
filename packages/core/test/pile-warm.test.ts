import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile, type PilePointer } from '../src';
import { buildCore } from './fixtures/build-core';

// openPile({ dir, warm: true }) faults the pages of the pile's records into the process on the
// libuv pool after the open, reporting progress, while gets go on (Warm.ts).

const MiB = 1 << 20;
const SEGMENT = 4 * MiB;
const RECORD = 64 * 1024 - 64;

/** Resident file-backed memory of this process, in bytes (Linux). */
function rssFile(): number {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  return Number(/^RssFile:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) * 1024;
}

/** Record i: RECORD bytes, each a function of i and its position, so a wrong record or offset shows. */
function recordBytes(i: number): Buffer {
  const b = Buffer.alloc(RECORD);
  for (let j = 0; j < RECORD; j += 4) b.writeUInt32LE((i * 2654435761 + j) >>> 0, j);
  return b;
}

type Progress = { phase: string; done: number; total: number };

describe('warm option: pages faulted in after the open', function () {
  this.timeout(120_000);
  let tmp: string;
  let dir: string;
  let ptrs: PilePointer[];
  before(function () {
    if (!fs.existsSync('/proc/self/status')) this.skip();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-warm-'));
    dir = path.join(tmp, 'p');
    // About 40 MiB of records over ten 4 MiB segments, the last one partly filled.
    const pile = openPile({ dir, segmentSize: SEGMENT });
    ptrs = [];
    for (let i = 0; i < 620; i++) ptrs.push(pile.put(recordBytes(i)));
    pile.close();
  });
  after(() => {
    if (tmp !== undefined) fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** Opens the pile with warm: true; resolves with the pile and the warm events once done reaches total. */
  function openWarm(onEvent?: (p: Progress, pile: Pile) => void): { pile: Pile; finished: Promise<Progress[]> } {
    const events: Progress[] = [];
    let resolve!: (e: Progress[]) => void;
    const finished = new Promise<Progress[]>((r) => (resolve = r));
    const pile: Pile = openPile({
      dir,
      warm: true,
      onProgress: (p) => {
        if (p.phase !== 'warm') return;
        events.push(p);
        onEvent?.(p, pile);
        if (p.done === p.total) resolve(events);
      },
    });
    return { pile, finished };
  }

  it('brings the pages of every record into the process, with progress in order up to the total', async () => {
    const before = rssFile();
    const { pile, finished } = openWarm();
    try {
      const events = await finished;
      const stats = pile.stats;
      // Everything up to the tail: all segments but the free end of the last one.
      expect(events[events.length - 1]!.total).to.be.within(stats.allocatedBytes, stats.segmentCount * SEGMENT);
      expect(events.length).to.be.greaterThan(1);
      for (let i = 1; i < events.length; i++) expect(events[i]!.done).to.be.greaterThan(events[i - 1]!.done);
      // Nothing was read: only the warm-up can have made these pages resident.
      expect(rssFile() - before).to.be.greaterThan(stats.allocatedBytes * 0.9);
    } finally {
      pile.close();
    }
    // The control: an open without warm maps nothing and faults nothing in.
    const coldBefore = rssFile();
    const cold = openPile({ dir });
    await new Promise((r) => setTimeout(r, 200));
    expect(rssFile() - coldBefore).to.be.lessThan(4 * MiB);
    cold.close();
  });

  it('serves gets and puts with the right data while it warms', async () => {
    let between = 0;
    const { pile, finished } = openWarm((p, pl) => {
      if (p.done === p.total) return;
      between++;
      for (let i = between % 7; i < ptrs.length; i += 7) expect(pl.get(ptrs[i]!)).to.deep.equal(recordBytes(i));
    });
    try {
      // Before any chunk is done: the open returned at once and gets are served.
      for (let i = 0; i < ptrs.length; i += 3) expect(pile.get(ptrs[i]!)).to.deep.equal(recordBytes(i));
      const extra = pile.put('written while warming');
      await finished;
      expect(between).to.be.greaterThan(2);
      expect(pile.get(extra)).to.equal('written while warming');
      pile.delete(extra);
      for (let i = 0; i < ptrs.length; i++) expect(pile.get(ptrs[i]!)).to.deep.equal(recordBytes(i));
    } finally {
      pile.close();
    }
  });

  it('reports one event of nothing for a pile without records', async () => {
    const empty = path.join(tmp, 'empty');
    openPile({ dir: empty }).close();
    const events: Progress[] = [];
    const pile = openPile({ dir: empty, warm: true, onProgress: (p) => events.push(p) });
    await new Promise((r) => setTimeout(r, 50));
    pile.close();
    expect(events).to.deep.equal([{ phase: 'warm', done: 0, total: 0 }]);
  });

  describe('closing while it warms', () => {
    before(() => buildCore());

    function child(mode: string): { eventsAfterClose: number; events: number; mapped: number; worker: unknown } {
      const r = spawnSync(process.execPath, [path.join(__dirname, 'fixtures', 'warm-close.js'), dir, mode, String(ptrs[5])], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.signal, r.stderr).to.equal(null);
      expect(r.status, r.stderr).to.equal(0);
      expect(r.stderr).to.equal('');
      return JSON.parse(r.stdout) as ReturnType<typeof child>;
    }

    afterEach(() => {
      // The files are as they were: every record reads back and verify finds nothing wrong.
      const pile = openPile({ dir });
      try {
        expect(pile.verify().ok).to.equal(true);
        for (let i = 0; i < ptrs.length; i += 11) expect(pile.get(ptrs[i]!)).to.deep.equal(recordBytes(i));
      } finally {
        pile.close();
      }
    });

    it('at once after the open: the job in flight ends, no progress follows, nothing stays mapped', () => {
      const out = child('at-once');
      expect(out.events).to.equal(0);
      expect(out.mapped).to.equal(0);
    });

    it('at its first progress event: no progress follows, nothing stays mapped', () => {
      const out = child('first-progress');
      expect(out.events).to.equal(1);
      expect(out.eventsAfterClose).to.equal(0);
      expect(out.mapped).to.equal(0);
    });

    it('in worker threads: a reader terminated while it warms harms nothing; another warms to the end', () => {
      const out = child('worker');
      const w = out.worker as { done: number; total: number; value: string };
      expect(w.done).to.equal(w.total);
      expect(w.total).to.be.greaterThan(600 * RECORD);
      expect(w.value).to.equal(recordBytes(5).toString('base64'));
    });
  });
});
