import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, type Pile } from '../src';
import { COORD } from '../src/concurrency/CoordFile';
import { NO_READER, type ReaderTable } from '../src/concurrency/ReaderTable';
import { buildCore } from './fixtures/build-core';
import { sessionChild } from './fixtures/session-child';

// Issue 17, point 4: the reader table of pile.coord. Read sessions of other processes are seen by a
// writer; a dead reader (SIGKILL) pins nothing, found by its byte lock, not by its pid. No timings.

function reader(dir: string, wrap: string[] = []): ReturnType<typeof sessionChild> {
  return sessionChild(dir, {}, wrap);
}

function table(pile: Pile): ReaderTable {
  return pile.readers!;
}

/** Slot `i`'s session flag and pid as pile.coord holds them. */
function slotWords(dir: string, i: number): { flag: number; pid: number } {
  const b = fs.readFileSync(path.join(dir, 'pile.coord')).subarray(COORD.READERS + i * COORD.READER_SLOT_SIZE);
  return { flag: b.readUInt32LE(8), pid: b.readUInt32LE(12) };
}

describe('reader table (issue 17, point 4)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => buildCore());
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-readers-'));
    const p = openPile({ dir });
    for (let i = 0; i < 10; i++) p.put(`record ${i}`);
    p.close();
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("a reader process's session is seen by a writer with the epoch it began at, and ends with it", async () => {
    const writer = openPile({ dir });
    const child = reader(dir);
    try {
      const opened = await child.next();
      expect(opened.opened).to.equal(true);
      expect(opened.slot, 'a read-only open claims a slot').to.be.at.least(0);
      expect(table(writer).oldest(), 'no session yet').to.equal(NO_READER);
      writer.put('x'); // takes the turn: the epoch moves on
      child.say('begin');
      const begun = await child.next();
      expect(begun.yielded).to.equal(true);
      expect(table(writer).sessions).to.equal(1);
      expect(table(writer).oldest()).to.equal(begun.epoch);
      writer.put('y');
      expect(table(writer).epoch, 'the writer moved the epoch past the session').to.be.above(begun.epoch as number);
      expect(table(writer).oldest(), 'the session still holds its epoch').to.equal(begun.epoch);
      child.say('end');
      expect((await child.next()).ended).to.equal(true);
      expect(table(writer).oldest()).to.equal(NO_READER);
      expect(table(writer).sessions).to.equal(0);
      child.say('close');
      await child.next();
    } finally {
      child.proc.kill('SIGKILL');
      await child.exited;
      writer.close();
    }
  });

  it('a reader SIGKILLed in a session pins nothing: its byte lock is gone, and the writer clears its slot', async () => {
    const writer = openPile({ dir });
    const child = reader(dir);
    try {
      const { slot } = await child.next();
      child.say('begin');
      const begun = await child.next();
      expect(table(writer).oldest()).to.equal(begun.epoch);
      child.proc.kill('SIGKILL');
      await child.exited;
      expect(slotWords(dir, slot as number).flag, 'the dead reader left its flag set').to.equal(1);
      expect(table(writer).oldest()).to.equal(NO_READER);
      expect(slotWords(dir, slot as number).flag, 'cleared by the writer that found it dead').to.equal(0);
      expect(table(writer).sessions).to.equal(0);
    } finally {
      writer.close();
    }
  });

  it("a dead reader's slot is taken by the next open, which counts the dead session out", async () => {
    const first = reader(dir);
    const { slot } = await first.next();
    first.say('begin');
    await first.next();
    first.proc.kill('SIGKILL');
    await first.exited;
    const ro = openPile({ dir, readonly: true });
    try {
      expect(table(ro).slot, 'the lowest slot whose byte lock is free').to.equal(slot);
      expect(table(ro).sessions).to.equal(0);
      expect(slotWords(dir, slot as number).flag).to.equal(0);
    } finally {
      ro.close();
    }
  });

  it('a slot left in a session by a dead process whose pid number a live reader has again is found dead', async function () {
    // Both children run as pid 1, each in a pid namespace of its own (unshare needs the right to make them).
    if (spawnSync('unshare', ['--pid', '--fork', 'true']).status !== 0) this.skip();
    const wrap = ['unshare', '--pid', '--fork', '--kill-child'];
    const writer = openPile({ dir });
    const dead = reader(dir, wrap);
    const alive = reader(dir, wrap);
    try {
      const d = await dead.next();
      const a = await alive.next();
      expect([d.pid, a.pid]).to.deep.equal([1, 1]);
      dead.say('begin');
      const begun = await dead.next();
      expect(table(writer).oldest()).to.equal(begun.epoch);
      dead.proc.kill('SIGKILL');
      await dead.exited;
      expect(slotWords(dir, d.slot as number)).to.deep.equal({ flag: 1, pid: 1 });
      expect(slotWords(dir, a.slot as number).pid, 'a live reader with the same pid number').to.equal(1);
      expect(table(writer).oldest()).to.equal(NO_READER);
      alive.say('begin');
      const later = await alive.next();
      expect(table(writer).oldest(), 'the live one is seen').to.equal(later.epoch);
      alive.say('end');
      await alive.next();
    } finally {
      dead.proc.kill('SIGKILL');
      alive.proc.kill('SIGKILL');
      await Promise.all([dead.exited, alive.exited]);
      writer.close();
    }
  });

  it('opens of one process have slots of their own: a writer sees the session of a read-only open beside it, and nests its own', () => {
    const writer = openPile({ dir });
    const ro = openPile({ dir, readonly: true });
    try {
      expect(table(ro).slot).to.not.equal(table(writer).slot);
      writer.put('moves the epoch');
      const walk = ro.entries();
      walk.next();
      const epoch = table(writer).epoch;
      writer.put('after');
      expect(table(writer).oldest()).to.equal(epoch);
      // The writer's own walks: its slot is counted without a lock check (its own lock does not show).
      const own = writer.entries();
      own.next();
      const inner = writer.entries();
      inner.next();
      expect(table(writer).sessions).to.equal(2);
      walk.return!();
      inner.return!();
      expect(table(writer).oldest(), 'the outer walk still holds the slot').to.be.at.least(epoch);
      expect(table(writer).oldest()).to.not.equal(NO_READER);
      own.return!();
      expect(table(writer).oldest()).to.equal(NO_READER);
      expect(table(writer).sessions).to.equal(0);
      // A walk run to its end ends its session too, and one cut by close() leaves nothing behind.
      expect([...ro.entries()].length).to.equal(12);
      expect(table(writer).sessions).to.equal(0);
      const cut = ro.entries();
      cut.next();
      ro.close();
      expect(table(writer).sessions).to.equal(0);
    } finally {
      ro.close();
      writer.close();
    }
  });
});
