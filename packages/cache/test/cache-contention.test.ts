import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { lineChild, writerBesideReaders } from '../../core/test/fixtures/line-child';
import { isPileError, openPile } from '@pile/core';
import { buildCore } from '../../core/test/fixtures/build-core';
import { killedChild } from '../../core/test/fixtures/holder-kills';
import { openCache } from '../src';
import { DROP_KEYS, DROP_TABLE, roundValue } from './fixtures/drop-values';

// Issue 17's "cache under contention" bar (docs/concurrency.md, "Cache tables beside a writer"):
// a writer process fills a table past two grows and evicts under maxMemory (and deletes keys,
// which shifts entries back) while three read-only processes get random keys. Every value is
// derived from its key and write number (fixtures/contention-values.ts), so a reader recognises
// any value never put for the key it asked for, and any torn one. PILE_CACHE_CONTENTION_MS sets
// how long the writer writes at least (4 s by default). With the checks after the read removed
// (CheckedRead: the seqlock's second load, rawSettled, find's FIND_AGAIN; the index still re-read
// on a new version) the readers counted 7 wrong values (another key's value) in 5 s; with the
// whole checked path removed they keep the index of their open and see almost nothing.

const FIXTURES = path.join(__dirname, 'fixtures');

/** A child running `script` (in fixtures/) with ts-node; `next()` is its next JSON line on stdout. */
const child = (script: string, env: Record<string, string>): ReturnType<typeof lineChild> => lineChild(path.join(FIXTURES, script), env);

describe('cache tables read by other processes while one writes', function () {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-cache-contention-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('three read-only processes get no wrong value while a writer grows the table twice and evicts', async () => {
    const ms = Number(process.env.PILE_CACHE_CONTENTION_MS ?? 4000);
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    cache.table<string>('kv', { initialCapacity: 1024, minCapacity: 1024 });
    cache.close();
    const env = { PILE_DIR: dir, PILE_MS: String(ms) };

    // Plain opens, readers first: read-only opens may be open beside a live writer.
    const readers = [1, 2, 3].map((seed) => child('contention-reader.ts', { ...env, PILE_SEED: String(seed) }));
    for (const r of readers) expect(await r.next()).to.deep.equal({ opened: true });
    const writer = child('contention-writer.ts', env);
    expect(await writer.next()).to.deep.equal({ opened: true });
    for (const r of readers) r.proc.stdin!.write('go\n');
    const written = await writer.next();
    for (const r of readers) r.proc.stdin!.end();
    const reports = await Promise.all(readers.map((r) => r.next()));
    console.log(`      writer: ${JSON.stringify(written)}; readers: ${JSON.stringify(reports)}`);
    expect(written.grows as number).to.be.at.least(2);
    expect(written.evicted as number).to.be.above(0);
    for (const report of reports) {
      expect(report.hits as number).to.be.above(0);
      expect({ wrong: report.wrong, errors: report.errors, first: report.firstProblem }).to.deep.equal({
        wrong: 0,
        errors: 0,
        first: undefined,
      });
    }
  });

  it('a seqlock a writer left odd stalls a reader with PILE_LOCKED, and the next writable open clears it', () => {
    const words = (t: unknown): Uint32Array => (t as { seqWords: Uint32Array }).seqWords;
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    const t = cache.table<string>('kv');
    t.put('a', 'A');
    // What a writer killed in the middle of a backward shift or a rehash leaves (TableSeqlock).
    words(t)[5]!++;
    cache.close();

    const reader = openCache({ dir, readonly: true });
    expect(() => reader.table<string>('kv').get('a'))
      .to.throw(/being changed by a writer/)
      .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
    reader.close();

    const writer = openCache({ dir, sweepIntervalSec: 0 });
    expect(words(writer.table<string>('kv'))[5]! % 2).to.equal(0);
    writer.close();
    const again = openCache({ dir, readonly: true });
    expect(again.table<string>('kv').get('a')).to.equal('A');
    expect(again.table<string>('kv').has('a')).to.equal(true);
    again.close();
  });

  // A writer killed in the middle of a change of a segment (not of the table: a delete of a record
  // beside its entries) leaves the segment's mark odd and the table's seqlock even. A count (a raw
  // read of the header, watching the seqlock) waited out ReadRetry's 10 s give-up, since its 1 s
  // check of a mark stuck odd looked at the seqlock; a get waited 2 s (two reads of 1 s each). Each
  // read now waits 1 s from the moment it finds the turn's holder dead (for a writer of another
  // process to repair), then names the death.
  it('a writer SIGKILLed in the middle of a change of the segment holding the entries, and no writer after it: a read-only reader gets PILE_LOCKED naming the death, and reads after the next writer repairs', () => {
    buildCore(); // the victim runs the core's dist/
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const cache = openCache({ pile, sweepIntervalSec: 0 });
    cache.table<string>('kv').put('a', 'A');
    const doomed = pile.put('beside the entries');
    cache.close();
    pile.close();
    const reader = openCache({ dir, readonly: true });
    try {
      const kv = reader.table<string>('kv');
      const victim = path.join(__dirname, '..', '..', 'core', 'test', 'fixtures', 'undo-victim.js');
      // It opens the pile beside the reader, and dies at the first store its delete logs, inside the segment's change.
      killedChild(victim, dir, { PILE_OP: 'delete', PILE_PTR: String(doomed), PILE_KILL_AT: 'undo-logged' });
      for (const read of [() => kv.get('a'), () => kv.count, () => [...kv.keys()], () => reader.table<string>('kv')]) {
        expect(() => read())
          .to.throw(/left open by a writer that died holding the writer turn/)
          .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
      }
      const writer = openCache({ dir, sweepIntervalSec: 0 });
      try {
        expect(writer.table<string>('kv').get('a')).to.equal('A');
        expect(kv.get('a')).to.equal('A');
        expect(kv.count).to.equal(1);
      } finally {
        writer.close();
      }
    } finally {
      reader.close();
    }
  });

  // Point 6 of issue 17 for the rest of a table's read API: keys(), entries(), count, capacity,
  // loadFactor, stats, tableBytes, tableInfo and cache.stats of read-only processes beside a writer
  // that inserts, replaces, evicts under maxMemory, grows, deletes every key (backward shifts and
  // shrinks) and lets entries expire (fixtures/churn-writer.ts, iteration-reader.ts). With walkTable
  // in place of the checked walk the readers counted wrong entries and errors (stale pointers) in
  // every run tried.
  // Each walk holds a read session (deferred reuse): the evicting writer, out of room, waits for the
  // sessions that pin what it evicted or gives their pin up (pinsGivenUp), and never fails for lack
  // of room; the walks stay right either way.
  it('three read-only processes iterate and count with no wrong entry while a writer grows, shrinks and evicts', async () => {
    const ms = Number(process.env.PILE_CACHE_CONTENTION_MS ?? 4000);
    openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 }).close();
    const { written, reports } = await writerBesideReaders(
      path.join(FIXTURES, 'churn-writer.ts'),
      path.join(FIXTURES, 'iteration-reader.ts'),
      3,
      { PILE_DIR: dir, PILE_MS: String(ms) },
    );
    expect(written.grows as number).to.be.at.least(2);
    expect(written.shrinks as number).to.be.at.least(1);
    expect(written.evicted as number).to.be.above(0);
    expect(written.stableKept).to.equal(50);
    for (const report of reports) {
      expect(report.walks as number).to.be.above(0);
      expect(report.entries as number).to.be.above(0);
      expect({ wrong: report.wrong, errors: report.errors, problems: report.problems }).to.deep.equal({
        wrong: 0,
        errors: 0,
        problems: [],
      });
    }
  });

  it('a reader iterating waits for a live writer that holds the seqlock, and fails at once with PILE_CORRUPT on a damaged index', async () => {
    const words = (t: unknown): Uint32Array => (t as { seqWords: Uint32Array }).seqWords;
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    const t = cache.table<string>('kv');
    for (let i = 0; i < 100; i++) t.put(`k${i}`, `v${i}`);
    cache.close();

    // A live writer in the middle of a rehash: the seqlock odd and the version moved, for 300 ms.
    const holder = child('seqlock-holder.ts', { PILE_DIR: dir, PILE_HOLD_MS: '300' });
    expect(await holder.next()).to.deep.equal({ holding: true });
    const reader = openCache({ dir, readonly: true });
    const rt = reader.table<string>('kv');
    expect(words(rt)[5]! % 2).to.equal(1);
    const seen = new Map(rt.entries());
    expect(words(rt)[5]! % 2).to.equal(0); // the walk waited for the change to end
    expect(seen.size).to.equal(100);
    for (const [k, v] of seen) expect(v).to.equal(`v${(k as string).slice(1)}`);
    expect(rt.count).to.equal(100);
    expect(await holder.next()).to.deep.equal({ released: true });
    reader.close();

    // An index that names a freed record (damage, no writer anywhere): PILE_CORRUPT naming the table
    // and the slot at once, where the reader used to retry 10 s and throw PILE_LOCKED.
    const w = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    const wt = w.table<string>('kv') as unknown as { idx: { capacity: number; ptr(i: number): number } };
    let slot = 0;
    while (wt.idx.ptr(slot) <= 0) slot++;
    const victim = wt.idx.ptr(slot);
    const pile = (w as unknown as { pile: { delete(p: number): void } }).pile;
    pile.delete(victim);
    w.close();
    const damaged = openCache({ dir, readonly: true });
    const dt = damaged.table<string>('kv');
    const corrupt = (e: unknown): boolean => isPileError(e, 'PILE_CORRUPT') && new RegExp(`'kv'.*slot ${slot}`).test((e as Error).message);
    expect(() => [...dt.keys()])
      .to.throw()
      .that.satisfies(corrupt);
    expect(() => [...dt.entries()])
      .to.throw()
      .that.satisfies(corrupt);
    let failed = 0;
    for (let i = 0; i < 100; i++) {
      try {
        dt.get(`k${i}`);
      } catch (e) {
        expect(e).to.satisfy(corrupt);
        failed++;
      }
    }
    expect(failed).to.equal(1);
    damaged.close();
  });

  // A read that met a change and found its table still there at its first retry, then saw the table
  // dropped while it waited: it checked for the drop only before its first retry, so it went on
  // waiting on the seqlock words of the freed header block, which the table made again under the name
  // is mostly given (its seqlock then). In the drop test below, under load, a reader so waited 10 s
  // and threw PILE_LOCKED ("change sequence 10": where every table filled there ends); here, where the
  // freed words stay odd, it threw PILE_LOCKED after 1 s. Every retry now checks for the drop.
  it('a read-only process waiting for a change of a table the writer then drops gets PILE_CLOSED, not PILE_LOCKED', async () => {
    const words = (t: unknown): Uint32Array => (t as { seqWords: Uint32Array }).seqWords;
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    const t = cache.table<string>(DROP_TABLE, { initialCapacity: 64 });
    for (let i = 0; i < DROP_KEYS; i++) t.put(`k${i}`, roundValue(0, i));
    const reader = child('drop-waiter.ts', { PILE_DIR: dir });
    try {
      expect(await reader.next()).to.deep.equal({ opened: true });
      // A backward shift under way, as removeSlot makes it: readers wait for its end (no miss).
      Atomics.add(words(t), 5, 1);
      reader.proc.stdin!.write('go\n');
      expect(await reader.next()).to.deep.equal({ reading: true });
      // The reader's get meets the odd seqlock, finds the table there and waits; then the drop.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(cache.dropTable(DROP_TABLE)).to.equal(true);
      const result = await reader.next();
      expect(result.code, String(result.message)).to.equal('PILE_CLOSED');
    } finally {
      reader.proc.stdin!.end();
      cache.close();
    }
  });

  // A reader reads a table's index again (at its first read, and after a resize) from the chunk list
  // of the catalog, then maps the chunks. A drop between the two frees them without moving the
  // seqlock (a resize moves it), and the failed mapping was reported as damage: PILE_CORRUPT "cache
  // index chunk 0 ... is not readable", in 3 of 6 runs of the drop test below with 200 rounds once
  // reads checked for the drop at every retry (0 of 31 runs before: why it became frequent is not
  // established; readers that learn of a drop sooner open the next table while it is written).
  it('a read-only open whose table is dropped between its catalog read and the mapping of the index gets PILE_CLOSED', () => {
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    cache.table<string>(DROP_TABLE).put('a', 'A');
    const reader = openCache({ dir, readonly: true });
    try {
      const rt = reader.table<string>(DROP_TABLE);
      // The writer's drop lands right after the reader's catalog read, as it can from another process.
      const host = reader as unknown as { storedIndex(id: number): unknown };
      const readCatalog = host.storedIndex.bind(reader);
      let dropped = false;
      host.storedIndex = (id: number): unknown => {
        const stored = readCatalog(id);
        if (!dropped) dropped = cache.dropTable(DROP_TABLE);
        return stored;
      };
      expect(() => rt.get('a'))
        .to.throw()
        .that.satisfies((e: unknown) => isPileError(e, 'PILE_CLOSED'));
      expect(dropped).to.equal(true);
    } finally {
      reader.close();
      cache.close();
    }
  });

  // dropTable beside readers: the dropped table's header, index and entries are freed and reused by
  // the table made again under the same name. Before the drop was checked for, a reader's
  // cache.table(name) kept giving the dropped table (PILE_CLOSED for ever, the new table never
  // found), and reads of the freed blocks could raise PILE_CORRUPT, PILE_INVALID_POINTER or
  // PILE_LOCKED instead of PILE_CLOSED.
  it('two read-only processes get no wrong value and no error but PILE_CLOSED while the writer drops a table and makes it again, and find the new one', async () => {
    const ROUNDS = Number(process.env.PILE_DROP_ROUNDS ?? 25);
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    const fill = (round: number): void => {
      const t = cache.table<string>(DROP_TABLE, { initialCapacity: 64 }); // grows while it fills
      for (let i = 0; i < DROP_KEYS; i++) t.put(`k${i}`, roundValue(round, i));
    };
    fill(0);
    const env = { PILE_DIR: dir, PILE_LAST_ROUND: String(ROUNDS) };
    const readers = [0, 3].map((seed) => child('drop-reader.ts', { ...env, PILE_SEED: String(seed) }));
    try {
      for (const r of readers) expect(await r.next()).to.deep.equal({ opened: true });
      for (const r of readers) r.proc.stdin!.write('go\n');
      for (let round = 1; round <= ROUNDS; round++) {
        // A pause between rounds lets the readers meet both the table and its drop.
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(cache.dropTable(DROP_TABLE)).to.equal(true);
        fill(round);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      for (const r of readers) r.proc.stdin!.end();
    }
    const reports = await Promise.all(readers.map((r) => r.next()));
    console.log(`      readers: ${JSON.stringify(reports)}`);
    cache.close();
    for (const report of reports) {
      expect({ wrong: report.wrong, errors: report.errors, first: report.firstProblem }).to.deep.equal({
        wrong: 0,
        errors: 0,
        first: undefined,
      });
      expect(report.final, 'the table made again last, found by name and read whole').to.deep.equal({
        round: ROUNDS,
        hits: DROP_KEYS,
        wrong: 0,
      });
    }
  });
});
