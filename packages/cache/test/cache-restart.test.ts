import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { z } from 'zod';
import { openPile } from '@pile/core';
import { openCache } from '../src';
import { tagOf, TAG_ENTRY } from '../src/EntryFormat';
import { SEG, fakeClock, tempDir } from './helpers';

const CHILD = path.join(__dirname, 'fixtures', 'child.ts');
const userSchema = z.object({ id: z.number(), name: z.string() });

/** What fixtures/child.ts leaves in the users table. */
function expectedUsers(): Map<string, { id: number; name: string }> {
  const m = new Map<string, { id: number; name: string }>();
  for (let i = 0; i < 2000; i++) m.set(`u${i}`, { id: i, name: `name${i}` });
  for (let i = 0; i < 2000; i += 3) m.set(`u${i}`, { id: -i, name: 'again' });
  for (let i = 1; i < 2000; i += 7) m.delete(`u${i}`);
  return m;
}

function runChild(dir: string, mode: 'clean' | 'kill'): void {
  const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', CHILD, dir, mode], {
    cwd: path.join(__dirname, '..'),
    encoding: 'utf8',
  });
  if (mode === 'kill') expect(r.signal, r.stderr).to.equal('SIGKILL');
  else expect(r.status, r.stderr).to.equal(0);
}

/** Raw records tagged as entries of table `id`. */
function entryRecords(dir: string, id: number): number {
  const pile = openPile({ dir, readonly: true });
  let n = 0;
  for (const e of pile.entries()) if (e.kind === 'raw' && pile.rawTag(e.pointer) === tagOf(TAG_ENTRY, id)) n++;
  pile.close();
  return n;
}

describe('cache restart', () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.cleanup());

  it('brings back every table, key, value, priority and remaining age after close and reopen', () => {
    const clock = fakeClock();
    let cache = openCache({ dir: tmp.dir, segmentSize: SEG, clock: clock.now, sweepIntervalSec: 0 });
    const t = cache.table<string>('t', { collisionMode: 'speculative', initialCapacity: 16, minCapacity: 16, maxCapacity: 16 });
    for (let i = 0; i < 16; i++) t.put(i, `v${i}`, { priority: 5 });
    cache.table<number>('d', { collisionMode: 'durable', defaultMaxAgeSec: 10 }).put(1n, 42);
    clock.advance(4_000);
    cache.close();

    cache = openCache({ dir: tmp.dir, clock: clock.now, sweepIntervalSec: 0 });
    expect(cache.recovered).to.equal(false);
    expect(cache.tables()).to.deep.equal(['t', 'd']);
    const t2 = cache.table<string>('t');
    const d2 = cache.table<number>('d');
    expect(t2.count).to.equal(16);
    for (let i = 0; i < 16; i++) expect(t2.get(i)).to.equal(`v${i}`);
    // Priorities came back: a lower one is refused, an equal one overwrites.
    expect(t2.put('low', 'x', { priority: 4 })).to.equal('collision');
    expect(t2.put('eq', 'y', { priority: 5 })).to.equal('overwritten');
    // Remaining age came back: 4 s of 10 were used before the restart.
    clock.advance(5_000);
    expect(d2.get(1n)).to.equal(42);
    clock.advance(1_000);
    expect(d2.get(1n)).to.equal(undefined);
    expect(t2.stats.hits).to.equal(16);
    cache.close();
  });

  it('a new process finds what another process stored, after a clean close', function () {
    this.timeout(60_000);
    runChild(tmp.dir, 'clean');
    const cache = openCache({ dir: tmp.dir, clock: () => 1_700_000_000_000 + 50_000, sweepIntervalSec: 0 });
    expect(cache.recovered).to.equal(false);
    const users = cache.table('users', { schema: userSchema });
    const want = expectedUsers();
    expect(new Map(users.entries() as Iterable<[string, { id: number; name: string }]>)).to.deep.equal(want);
    expect(cache.table<string>('plain').get(99)).to.equal('p99');
    cache.close();
  });

  it('after a SIGKILL the index is exactly as left and nothing is orphaned', function () {
    this.timeout(60_000);
    runChild(tmp.dir, 'kill');
    const cache = openCache({ dir: tmp.dir, clock: () => 1_700_000_000_000, sweepIntervalSec: 0 });
    expect(cache.recovered).to.equal(true);
    const users = cache.table('users', { schema: userSchema });
    const want = expectedUsers();
    expect(users.count).to.equal(want.size);
    expect(new Map(users.entries() as Iterable<[string, { id: number; name: string }]>)).to.deep.equal(want);
    cache.close();
    expect(entryRecords(tmp.dir, 1)).to.equal(want.size);
  });

  it('recovery frees entries an interrupted put wrote but never published', () => {
    const pile = openPile({ dir: tmp.dir, segmentSize: SEG });
    const cache = openCache({ pile, sweepIntervalSec: 0 });
    const t = cache.table<number>('t', { collisionMode: 'durable' });
    for (let i = 0; i < 10; i++) t.put(i, i);
    // What a put that died between writing its record and publishing it leaves behind.
    const entry = [...pile.entries()].find((e) => e.kind === 'raw' && pile.rawTag(e.pointer) === tagOf(TAG_ENTRY, 1))!;
    const orphan = pile.putRaw(Buffer.from(pile.rawBuffer(entry.pointer)), tagOf(TAG_ENTRY, 1));
    const stray = pile.putRaw(Buffer.alloc(64), tagOf(TAG_ENTRY, 77));
    pile.close();
    expect(entryRecords(tmp.dir, 1)).to.equal(11);
    const again = openCache({ dir: tmp.dir, sweepIntervalSec: 0 });
    expect(again.recovered).to.equal(true);
    const t2 = again.table<number>('t');
    expect(t2.count).to.equal(10);
    for (let i = 0; i < 10; i++) expect(t2.get(i)).to.equal(i);
    again.close();
    expect(entryRecords(tmp.dir, 1)).to.equal(10);
    expect(entryRecords(tmp.dir, 77)).to.equal(0);
    expect([orphan, stray]).to.have.length(2);
  });
});
