import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, PileError, type Pile, type PilePointer } from '../src';
import { buildCore } from './fixtures/build-core';
import { sessionChild } from './fixtures/session-child';

// Issue 17, point 4: a block freed while a read session of any open is live is not handed out
// again until every live session began after the free (docs/concurrency.md, "Deferred reuse").
// Real child processes, SIGKILL; no timings.

const VALUE = 'r'.repeat(200);
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function addr(pile: Pile, p: PilePointer): number {
  return pile.fmt.addressOf(p);
}

/** `count` puts of VALUE's size: their addresses. */
function putSome(pile: Pile, count: number): Set<number> {
  const out = new Set<number>();
  for (let i = 0; i < count; i++) out.add(addr(pile, pile.put(VALUE)));
  return out;
}

describe('deferred reuse (issue 17, point 4)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => buildCore());
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-reuse-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('without a session a deleted block is reused at once; a read-only open in a session pins it until the session ends', async () => {
    const first = openPile({ dir });
    const keep = first.put('kept before');
    first.close();
    const w = openPile({ dir });
    const ro = openPile({ dir, readonly: true }); // a segment to walk: opened after the first put
    try {
      const p = w.put(VALUE);
      w.put('a guard, so that the freed block does not join the tail');
      w.delete(p);
      expect(putSome(w, 1).has(addr(w, p)), 'no session: the freed block is the next of its size').to.equal(true);
      await tick();
      const q = w.put(VALUE);
      w.put('guard');
      const walk = ro.entries();
      expect(walk.next().done).to.equal(false);
      w.delete(q);
      expect(() => w.get(q))
        .to.throw(PileError)
        .with.property('code', 'PILE_STALE_POINTER');
      const during = putSome(w, 20);
      expect(during.has(addr(w, q)), 'pinned by the session: puts of its size get other blocks').to.equal(false);
      await tick(); // the writer releases the turn: the session is still live, the block stays retired
      expect(putSome(w, 5).has(addr(w, q))).to.equal(false);
      expect(w.verify().ok).to.equal(true);
      const objects = w.stats.objectCount;
      expect(objects).to.equal(1 + 1 + 2 + 20 + 5); // keep, the first reuse, two guards, 25 puts
      walk.return!();
      await tick(); // released after the session ended: the block goes to the free lists
      expect(putSome(w, 1).has(addr(w, q)), 'reused once the session ended').to.equal(true);
      expect(w.get(keep)).to.equal('kept before');
      expect(w.verify().ok).to.equal(true);
    } finally {
      ro.close();
      w.close();
    }
  });

  for (const how of ['end', 'SIGKILL'] as const) {
    it(`a reader process's session pins deleted blocks; once ${how === 'end' ? 'its session ended' : 'SIGKILLed'} it pins nothing`, async () => {
      const w = openPile({ dir });
      const ptrs = Array.from({ length: 10 }, () => w.put(VALUE));
      w.put('guard');
      await tick();
      const child = sessionChild(dir);
      try {
        await child.next();
        child.say('begin');
        await child.next();
        for (const p of ptrs) w.delete(p);
        const freed = new Set(ptrs.map((p) => addr(w, p)));
        const during = putSome(w, 30);
        expect(
          [...during].filter((a) => freed.has(a)),
          'pinned by the other process',
        ).to.deep.equal([]);
        await tick();
        expect([...putSome(w, 10)].filter((a) => freed.has(a))).to.deep.equal([]);
        if (how === 'end') {
          child.say('end');
          expect(await child.next()).to.deep.equal({ ended: true });
        } else {
          child.proc.kill('SIGKILL');
          await child.exited;
        }
        // Takes the turn; the release that ends this event-loop turn finds the session ended, or the
        // dead reader by its byte lock, and frees the retired blocks. The release of the turn of the
        // ten puts above may have freed them already: it runs at the end of the event-loop turn (a
        // microtask) in which the child was told to end, and the child may end its session before it
        // (measured: the release ran 0.4-0.8 ms after the 'end' line was written, the session had
        // ended). Freed then, the ten adjacent blocks merge into one, and a small put here would take
        // its front (the ten puts below then land 32 bytes on). A value larger than the ten blocks
        // goes to the tail whichever release frees them.
        w.put('t'.repeat(4000));
        await tick();
        const after = putSome(w, 10);
        expect([...after].filter((a) => freed.has(a)).length, 'the ten blocks are reused').to.equal(10);
        expect(w.verify().ok).to.equal(true);
        expect(w.stats.objectCount).to.equal(1 + 30 + 10 + 1 + 10);
      } finally {
        child.proc.kill('SIGKILL');
        await child.exited;
        w.close();
      }
    });
  }

  it("a writer's own walk pins what it deletes during the walk, and hands it back when the walk ends", () => {
    const w = openPile({ dir });
    try {
      const ptrs = Array.from({ length: 50 }, () => w.put(VALUE));
      w.put('guard');
      const before = w.stats;
      let seen = 0;
      for (const e of w.entries()) {
        if (e.size !== VALUE.length) continue;
        seen++;
        w.delete(e.pointer);
        // Another size (a block class of its own): not counted, whether the walk yields it or not.
        w.put(VALUE + '!'.repeat(16));
      }
      expect(seen, 'every record present for the whole walk, once').to.equal(50);
      const after = w.stats;
      expect(after.objectCount).to.equal(51 + 50 - 50);
      expect(w.verify().ok).to.equal(true);
      // Handed back at the walk's end: the 50 blocks are free, not retired.
      const freed = new Set(ptrs.map((p) => addr(w, p)));
      expect([...putSome(w, 50)].filter((a) => freed.has(a)).length).to.equal(50);
      expect(before.objectCount).to.equal(51);
    } finally {
      w.close();
    }
  });

  // Deferred reuse makes a pile grow more often (retired space is not reused at once), which
  // showed this: a link read by a read-only open to a body in a segment it had not mapped yet was
  // reported PILE_CORRUPT ("link to a block that is not a live body") by list-readers.test.ts.
  it('a read-only open follows a link to a body in a segment added since it opened', () => {
    const w = openPile({ dir, segmentSize: 1 << 20 });
    const small = w.put('small');
    w.put('guard');
    const ro = openPile({ dir, readonly: true });
    try {
      expect(ro.get(small)).to.equal('small');
      const big = 'B'.repeat(300_000);
      for (let i = 0; i < 4; i++) w.put(big);
      w.set(small, big);
      expect(w.fmt.segmentOf(w.fmt.addressOf(small))).to.equal(0);
      expect(ro.get(small)).to.equal(big);
    } finally {
      ro.close();
      w.close();
    }
  });

  // The pin decision (docs/concurrency.md, "Deferred reuse"): a writer with no room left waits a
  // bounded time for the session, then hands the retired blocks back anyway and tells the session.
  // LMDB would fail the put (MDB_MAP_FULL); before this the put failed with PILE_OUT_OF_SPACE.
  it("a writer with no room left gives a live reader's pin up: the puts succeed, the reader's session is told it is broken", async () => {
    const opts = { dir, segmentSize: 1 << 20, maxMemory: 2 << 20 };
    const w = openPile(opts);
    const big = 'b'.repeat(4000);
    const ptrs: PilePointer[] = [];
    for (;;) {
      try {
        ptrs.push(w.put(big));
      } catch (err) {
        expect((err as { code?: string }).code).to.equal('PILE_OUT_OF_SPACE');
        break;
      }
    }
    await tick();
    const child = sessionChild(dir);
    try {
      await child.next();
      child.say('begin');
      expect(await child.next()).to.include({ begun: true, yielded: true });
      child.say('broken');
      expect(await child.next(), 'a session no writer pressed').to.deep.equal({ broken: false });
      const half = ptrs.splice(0, ptrs.length >> 1);
      for (const p of half) w.delete(p);
      const freed = new Set(half.map((p) => addr(w, p)));
      // Pinned: the first put that needs room waits for the session, then gives the pin up.
      const again = Array.from({ length: half.length }, () => w.put(big));
      expect(again.filter((p) => freed.has(addr(w, p))).length, 'the freed blocks reused').to.be.above(0);
      child.say('broken');
      expect(await child.next(), 'the session is told').to.deep.equal({ broken: true });
      for (const p of ptrs) expect(w.get(p)).to.equal(big);
      for (const p of half)
        expect(() => w.get(p))
          .to.throw(PileError)
          .with.property('code', 'PILE_STALE_POINTER');
      expect(w.verify().ok).to.equal(true);
      expect(w.stats.objectCount).to.equal(ptrs.length + again.length);
      child.say('end');
      await child.next();
      child.say('broken');
      expect(await child.next(), 'outside a session').to.deep.equal({ broken: false });
      child.say('begin');
      await child.next();
      child.say('broken');
      expect(await child.next(), 'a new session is whole').to.deep.equal({ broken: false });
    } finally {
      child.proc.kill('SIGKILL');
      await child.exited;
      w.close();
    }
  });

  for (const live of [false, true]) {
    it(`a writer SIGKILLed with retired blocks: ${live ? 'the live writer beside it repairs' : 'the next open recovers'}; verify().ok, exact counts, the blocks reusable`, async () => {
      const seed = openPile({ dir });
      seed.put('first');
      seed.close();
      const ro = openPile({ dir, readonly: true });
      const beside = live ? openPile({ dir }) : undefined;
      const writer = sessionChild(dir, { PILE_WRITABLE: '1' });
      let w: Pile | undefined;
      try {
        await writer.next();
        const walk = ro.entries();
        walk.next();
        writer.say('put 40');
        const { ptrs } = (await writer.next()) as { ptrs: number[] };
        // Beside a live writer, killed holding the turn: the live one repairs (HolderRepair), keeping the retired blocks.
        writer.say(`${live ? 'deleteHold' : 'delete'} ${ptrs.slice(0, 20).join(',')}`);
        await writer.next();
        writer.proc.kill('SIGKILL');
        await writer.exited;
        w = beside ?? openPile({ dir });
        const freed = new Set(ptrs.slice(0, 20).map((p) => addr(w!, p as PilePointer)));
        // Every put below is of one size: an unclean open's recovery merges the freed run, which puts of that size cut again.
        const used = [addr(w, w.put(VALUE))];
        expect(w.lastRecovery.ran, 'a repair or recovery ran').to.equal(true);
        expect(w.verify().ok).to.equal(true);
        expect(w.stats.objectCount).to.equal(1 + 20 + 1);
        for (const p of ptrs.slice(20)) expect(w.get(p as PilePointer)).to.equal(VALUE);
        for (const p of ptrs.slice(0, 20))
          expect(() => w!.get(p as PilePointer))
            .to.throw(PileError)
            .with.property('code', 'PILE_STALE_POINTER');
        if (live) {
          // The list survived the repair: still pinned by the session of the read-only open.
          expect(used.filter((a) => freed.has(a))).to.deep.equal([]);
          expect([...putSome(w, 20)].filter((a) => freed.has(a))).to.deep.equal([]);
        }
        walk.return!();
        used.push(addr(w, w.put(VALUE)));
        await tick();
        const reused = [...used, ...putSome(w, 40)].filter((a) => freed.has(a));
        expect(reused.length, 'every block the dead writer retired is reusable').to.equal(20);
        expect(w.verify().ok).to.equal(true);
      } finally {
        writer.proc.kill('SIGKILL');
        await writer.exited;
        ro.close();
        w?.close();
        if (w !== beside) beside?.close();
      }
    });
  }
});
