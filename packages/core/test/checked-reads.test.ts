import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { isPileError, openPile, type Pile } from '../src';
import { buildCore } from './fixtures/build-core';
import { killedChild } from './fixtures/holder-kills';

// Issue 17's bar for reads without locks (docs/concurrency.md, "Checked reads"): a writer process
// sets records in place while two read-only processes read them by every read path. The values
// check themselves (fixtures/checked-values.js), so a torn read is counted, never missed; no record
// is deleted, so every PILE_STALE_POINTER is false. PILE_CHECKED_READS_MS sets how long the writer
// writes (10 s by default, the bar). Without the second load of the change sequence (the check
// after the read) the readers count thousands of torn values in the first second.

const FIXTURES = path.join(__dirname, 'fixtures');
const { shape, valueOf } = require('./fixtures/checked-values.js') as {
  shape: import('zod').ZodType<{ n: number; a: number[]; s: string }>;
  valueOf: (k: number) => { n: number; a: number[]; s: string };
};

interface Line {
  [key: string]: unknown;
}

function child(script: string, env: Record<string, string>): { proc: ChildProcess; lines: AsyncIterator<string> } {
  const proc = spawn(process.execPath, [path.join(FIXTURES, script)], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  return { proc, lines };
}

async function nextLine(c: { lines: AsyncIterator<string> }): Promise<Line> {
  const r = await c.lines.next();
  if (r.done === true) throw new Error('the child ended without reporting');
  return JSON.parse(r.value) as Line;
}

describe('checked reads beside a writer in another process', function () {
  let dir: string;
  before(() => buildCore());
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-checked-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Puts 64 generic and 64 typed records, then runs `writers` processes that set them in place for
   * `ms` while two reader processes (read-only opens, or read-write opens that only read) read them
   * by every path; checks that no read was torn or falsely stale and that the pile verifies after.
   */
  async function readBesideWriters(ms: number, writers: number, readerOptions: string): Promise<void> {
    const pile = openPile({ dir, segmentSize: 4 << 20 });
    const view = pile.schema('checked', shape);
    const generic: number[] = [];
    const typed: number[] = [];
    for (let i = 0; i < 64; i++) generic.push(pile.put(valueOf(0)));
    for (let i = 0; i < 64; i++) typed.push(view.put(valueOf(0)));
    pile.put('marker');
    pile.close();
    const env = { PILE_DIR: dir, PILE_PTRS: JSON.stringify(generic), PILE_TYPED: JSON.stringify(typed), PILE_MS: String(ms) };

    // Plain opens, readers first: a read-only open and live writers may be open together.
    const readers = [0, 1].map(() => child('checked-reader.js', { ...env, PILE_READER_OPTIONS: readerOptions }));
    for (const r of readers) expect(await nextLine(r), 'opened, its reads checked').to.deep.equal({ opened: true, checks: true });
    const writing = Array.from({ length: writers }, () => child('checked-writer.js', env));
    const written = await Promise.all(writing.map((w) => nextLine(w)));
    for (const r of readers) r.proc.stdin!.end();
    const reports = await Promise.all(readers.map((r) => nextLine(r)));
    console.log(`      writers: ${JSON.stringify(written)}; readers (${readerOptions}): ${JSON.stringify(reports)}`);
    for (const report of reports) {
      expect(report.reads as number).to.be.above(0);
      expect(report.entriesPasses as number).to.be.above(0);
      expect({
        torn: report.torn,
        stale: report.stale,
        errors: report.errors,
        badEntries: report.badEntries,
        first: report.firstProblem,
      }).to.deep.equal({
        torn: 0,
        stale: 0,
        errors: 0,
        badEntries: 0,
        first: undefined,
      });
    }
    for (const w of written) expect(w.sets as number).to.be.above(0);

    // Every record holds a whole version, and the pile verifies.
    const after = openPile({ dir });
    const afterView = after.schema('checked', shape);
    for (const p of generic) expect(after.get<{ n: number }>(p as never).n).to.be.a('number');
    for (const p of typed) expect(afterView.get(p as never).a.every((x) => x === afterView.get(p as never).n)).to.equal(true);
    expect(after.verify().ok).to.equal(true);
    after.close();
  }

  it('two read-only processes read no torn value and no false stale pointer while a writer sets in place', async () => {
    await readBesideWriters(Number(process.env.PILE_CHECKED_READS_MS ?? 10_000), 1, 'readonly');
  });

  it('two read-write processes that read check their reads while two other read-write processes set in place', async () => {
    await readBesideWriters(Number(process.env.PILE_CHECKED_READS_MS ?? 10_000) / 2, 2, 'readwrite');
  });
});

describe('checked reads: the change sequence', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-checked-seq-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The change sequence word of segment 0 (byte 20 of its file, docs/format.md). */
  function seqOf(p: Pile): number {
    return (p as unknown as { segments: { u32: Uint32Array }[] }).segments[0]!.u32[5]!;
  }

  it('moves by two around each set in place, delete and growth into a link; not on put', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const a = pile.put(valueOf(1), { preallocate: 400 });
    const b = pile.put('b');
    const s0 = seqOf(pile);
    expect(s0 % 2).to.equal(0);
    pile.put('c');
    expect(seqOf(pile)).to.equal(s0);
    pile.set(a, valueOf(2));
    const s1 = seqOf(pile);
    expect(s1 > s0 && s1 % 2 === 0).to.equal(true);
    pile.set(b, 'x'.repeat(200));
    const s2 = seqOf(pile);
    expect(s2 > s1 && s2 % 2 === 0).to.equal(true);
    pile.delete(a);
    expect(seqOf(pile) > s2 && seqOf(pile) % 2 === 0).to.equal(true);
    pile.close();
  });

  it('a deleted record still reads as PILE_STALE_POINTER, a live one as its value', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const view = pile.schema('checked', shape);
    const a = pile.put(valueOf(1));
    const t = view.put(valueOf(2));
    pile.delete(a);
    pile.delete(t);
    for (const read of [() => pile.get(a), () => view.get(t), () => view.field(t, 's'), () => pile.sizeOf(a)]) {
      expect(() => read())
        .to.throw()
        .that.satisfies((e: unknown) => isPileError(e, 'PILE_STALE_POINTER'));
    }
    expect(pile.has(a)).to.equal(false);
    pile.close();
  });

  // No writer comes: each read waits ReadRetry's STUCK_MS (1 s) for one to repair, then names the death.
  it('a writer SIGKILLed in the middle of a delete beside a read-only reader, and no writer after it: the read ends with PILE_LOCKED naming the death, and reads again after the next writer repairs', () => {
    const setup = openPile({ dir, segmentSize: 1 << 20 });
    const view = setup.schema('checked', shape);
    const kept = setup.put(valueOf(1));
    const typed = view.put(valueOf(2));
    const doomed = setup.put(valueOf(3));
    setup.close();
    const reader = openPile({ dir, readonly: true });
    try {
      const rView = reader.schema('checked', shape);
      // The victim opens the pile beside the reader, and dies at the first store its delete logs, inside the change.
      killedChild(path.join(FIXTURES, 'undo-victim.js'), dir, { PILE_OP: 'delete', PILE_PTR: String(doomed), PILE_KILL_AT: 'undo-logged' });
      expect(seqOf(reader) % 2, 'the dead delete left its segment marked as being changed').to.equal(1);
      for (const read of [() => reader.get(kept), () => rView.get(typed), () => rView.field(typed, 'n'), () => [...reader.entries()]]) {
        expect(() => read())
          .to.throw(/left open by a writer that died holding the writer turn/)
          .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
      }
      const writer = openPile({ dir, checkpointInterval: 0 });
      try {
        writer.put('after');
        expect(writer.lastRecovery.ran, 'the writer repaired the dead delete').to.equal(true);
        expect(seqOf(reader) % 2).to.equal(0);
        expect(reader.get(kept)).to.deep.equal(valueOf(1));
        expect(rView.field(typed, 'n')).to.equal(valueOf(2).n);
        expect(writer.verify().ok).to.equal(true);
      } finally {
        writer.close();
      }
    } finally {
      reader.close();
    }
  });

  // What a server of several processes meets: one dies inside a write while another reads what it
  // was changing. The read waits (it does not fail at once) and returns the value once a writer of
  // another process has taken the turn and repaired.
  it('a read that meets the change a SIGKILLed writer left open waits, and returns the value once another process repairs', async () => {
    const setup = openPile({ dir, segmentSize: 1 << 20 });
    const kept = setup.put(valueOf(1));
    const doomed = setup.put(valueOf(3));
    setup.close();
    const reader = child('dead-change-reader.js', { PILE_DIR: dir, PILE_PTR: String(kept) });
    try {
      expect(await nextLine(reader)).to.deep.equal({ opened: true });
      killedChild(path.join(FIXTURES, 'undo-victim.js'), dir, { PILE_OP: 'delete', PILE_PTR: String(doomed), PILE_KILL_AT: 'undo-logged' });
      reader.proc.stdin!.write('read\n');
      expect(await nextLine(reader)).to.deep.equal({ reading: true });
      // Let the read meet the open change and begin to wait (its eager attempts take microseconds).
      await new Promise((r) => setTimeout(r, 100));
      const writer = openPile({ dir, checkpointInterval: 0 });
      try {
        writer.put('after');
        expect(writer.lastRecovery.ran, 'the writer repaired the dead delete').to.equal(true);
        expect(await nextLine(reader), 'the read waited for the repair').to.deep.equal({ value: valueOf(1) });
        expect(writer.verify().ok).to.equal(true);
      } finally {
        writer.close();
      }
    } finally {
      reader.proc.stdin!.end();
      reader.proc.kill('SIGKILL');
    }
  });

  it('a mark left odd by a dead writer stalls a read-only reader with PILE_LOCKED, and the next writable open clears it', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const view = pile.schema('checked', shape);
    const a = pile.put(valueOf(1));
    const t = view.put(valueOf(2));
    pile.close();
    // What a writer killed between the two stores of a change leaves.
    const file = path.join(dir, 'seg-000000.pile');
    const fd = fs.openSync(file, 'r+');
    const word = Buffer.alloc(4);
    fs.readSync(fd, word, 0, 4, 20);
    word.writeUInt32LE(word.readUInt32LE(0) + 1);
    fs.writeSync(fd, word, 0, 4, 20);
    fs.closeSync(fd);

    const reader = openPile({ dir, readonly: true });
    const rView = reader.schema('checked', shape);
    for (const read of [() => reader.get(a), () => rView.get(t), () => rView.field(t, 'n')]) {
      expect(() => read())
        .to.throw(/being changed by a writer/)
        .that.satisfies((e: unknown) => isPileError(e, 'PILE_LOCKED'));
    }
    reader.close();

    const writer = openPile({ dir });
    expect(writer.get(a)).to.deep.equal(valueOf(1));
    expect(seqOf(writer) % 2).to.equal(0);
    writer.close();
    const again = openPile({ dir, readonly: true });
    expect(again.schema('checked', shape).field(t, 'n')).to.equal(valueOf(2).n);
    again.close();
  });
});
