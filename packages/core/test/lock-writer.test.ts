import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, PileError, isPileError } from '../src';
import { buildCore } from './fixtures/build-core';

const HOLDER = path.join(__dirname, 'fixtures', 'lock-holder.js');
const LOCK = 'pile.lock';

/** A child process holding a pile open; talks JSON lines. */
class Holder {
  private lines: string[] = [];
  private waiters: ((line: string) => void)[] = [];
  private buf = '';
  readonly exited: Promise<void>;

  constructor(readonly child: ChildProcessByStdio<Writable, Readable, null>) {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      this.buf += c;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        const w = this.waiters.shift();
        if (w !== undefined) w(line);
        else this.lines.push(line);
      }
    });
    this.exited = new Promise((resolve) => child.on('close', () => resolve()));
  }

  static start(dir: string, mode: 'write' | 'read'): Holder {
    return new Holder(
      spawn(process.execPath, [HOLDER], { env: { ...process.env, PILE_DIR: dir, PILE_MODE: mode }, stdio: ['pipe', 'pipe', 'inherit'] }),
    );
  }

  next(): Promise<Record<string, unknown>> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(JSON.parse(line) as Record<string, unknown>);
    return new Promise((resolve) => this.waiters.push((l) => resolve(JSON.parse(l) as Record<string, unknown>)));
  }

  async send(cmd: unknown): Promise<Record<string, unknown>> {
    this.child.stdin.write(`${JSON.stringify(cmd)}\n`);
    return this.next();
  }

  async stop(): Promise<void> {
    this.child.stdin.end();
    await this.exited;
  }

  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

describe('writers of one directory', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => buildCore());
  beforeEach(() => {
    dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pile-lock-')), 'pile');
    openPile({ dir, segmentSize: 1 << 20 }).close();
  });
  afterEach(() => fs.rmSync(path.dirname(dir), { recursive: true, force: true }));

  it('a second openPile in the same thread gets PILE_LOCKED; the first goes on writing', () => {
    const a = openPile({ dir });
    try {
      let err: unknown;
      try {
        openPile({ dir: path.join(dir, '..', 'pile') });
      } catch (e) {
        err = e;
      }
      expect(isPileError(err, 'PILE_LOCKED')).to.equal(true);
      expect((err as Error).message)
        .to.include(dir)
        .and.include('this thread');
      // The refused open must not take anything of the first's: it still writes and closes cleanly.
      expect(a.get(a.put('still'))).to.equal('still');
    } finally {
      a.close();
    }
    expect(fs.existsSync(path.join(dir, LOCK)), 'writers no longer make pile.lock').to.equal(false);
    const again = openPile({ dir });
    expect(again.lastRecovery.ran).to.equal(false);
    again.close();
  });

  it('a second process opens beside a writer; each reads what the other wrote, the last to close marks it clean', async () => {
    const a = openPile({ dir });
    const h = Holder.start(dir, 'write');
    expect((await h.next()).opened).to.equal(true);
    const mine = a.put('from the test process');
    // Two records of 600 kB in segments of 1 MiB: the second is in a segment the other process added.
    expect((await h.send({ putBig: 600_000 })).ptr).to.be.a('number');
    const theirs = (await h.send({ putBig: 600_000 })).ptr as number;
    expect(
      Buffer.from(a.get(theirs as never) as Uint8Array).equals(Buffer.alloc(600_000, 7)),
      'a segment the other process added',
    ).to.equal(true);
    expect((await h.send({ get: mine })).value).to.equal('from the test process');
    expect((await h.send({ root: ['r', theirs] })).ok).to.equal(true);
    expect(a.getRoot('r')).to.equal(theirs);
    await h.stop();
    a.close();
    const b = openPile({ dir });
    expect(b.lastRecovery.ran).to.equal(false);
    expect(b.stats.objectCount).to.equal(3);
    expect(b.stats.segmentCount).to.equal(2);
    expect(b.verify().ok).to.equal(true);
    b.close();
  });

  it('a writer killed with SIGKILL: the next open recovers what it wrote', async () => {
    const h = Holder.start(dir, 'write');
    expect((await h.next()).opened).to.equal(true);
    const ptr = (await h.send({ put: 'held' })).ptr as number;
    await h.kill();
    const pile = openPile({ dir });
    try {
      expect(pile.lastRecovery.ran).to.equal(true);
      expect(pile.get(ptr as never)).to.equal('held');
    } finally {
      pile.close();
    }
  });

  it('a pile.lock naming a dead pid is removed; a live pid (a writer of a single-writer build) is respected', () => {
    fs.writeFileSync(path.join(dir, LOCK), String(deadPid()));
    // Leftovers of a taker that died between its steps are cleaned up too.
    fs.writeFileSync(path.join(dir, `${LOCK}.${deadPid()}.tmp`), '1');
    openPile({ dir }).close();
    expect(fs.readdirSync(dir).filter((f) => f.startsWith(LOCK))).to.deep.equal([]);
    const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    try {
      fs.writeFileSync(path.join(dir, LOCK), String(sleeper.pid));
      let err: unknown;
      try {
        openPile({ dir });
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(PileError);
      expect((err as PileError).code).to.equal('PILE_LOCKED');
      expect((err as Error).message)
        .to.include(String(sleeper.pid))
        .and.include(path.join(dir, LOCK));
      expect(fs.readFileSync(path.join(dir, LOCK), 'utf8')).to.equal(String(sleeper.pid));
    } finally {
      sleeper.kill('SIGKILL');
      fs.rmSync(path.join(dir, LOCK), { force: true });
    }
  });

  it('processes opening at once beside a stale pile.lock all open and write', async () => {
    for (let round = 0; round < 3; round++) {
      fs.writeFileSync(path.join(dir, LOCK), String(deadPid()));
      const racers = Array.from({ length: 4 }, () => Holder.start(dir, 'write'));
      const results = await Promise.all(racers.map((r) => r.next()));
      expect(
        results.filter((r) => r.opened === true),
        `round ${round}: ${JSON.stringify(results)}`,
      ).to.have.length(4);
      const ptrs = await Promise.all(racers.map(async (r, i) => (await r.send({ put: `racer ${i}` })).ptr as number));
      await Promise.all(racers.map((r) => r.stop()));
      expect(fs.existsSync(path.join(dir, LOCK))).to.equal(false);
      const pile = openPile({ dir });
      expect(pile.lastRecovery.ran).to.equal(false);
      ptrs.forEach((p, i) => expect(pile.get(p as never)).to.equal(`racer ${i}`));
      expect(pile.stats.objectCount).to.equal(4 * (round + 1));
      pile.close();
    }
  });

  it('a read-only open beside live writers opens and reads what they wrote (another process and this one), new segments and roots as soon as the write returned', async () => {
    const w = Holder.start(dir, 'write');
    expect((await w.next()).opened).to.equal(true);
    const p1 = (await w.send({ put: { n: 1 } })).ptr as number;
    const reader = openPile({ dir, readonly: true });
    const r = Holder.start(dir, 'read');
    const other = Holder.start(dir, 'write');
    try {
      expect((await r.next()).opened).to.equal(true);
      expect((await other.next()).opened).to.equal(true);
      expect(reader.get(p1 as never)).to.deep.equal({ n: 1 });
      expect((await r.send({ get: p1 })).value).to.deep.equal({ n: 1 });
      // Two values of 600 KB in 1 MiB segments: the second goes to a segment made after the readers opened.
      await w.send({ putBig: 600_000 });
      const big = (await w.send({ putBig: 600_000 })).ptr as number;
      expect((await w.send({ root: ['big', big] })).ok).to.equal(true);
      expect((reader.get(big as never) as Buffer).length).to.equal(600_000);
      expect(reader.getRoot('big')).to.equal(big);
      expect((await r.send({ getRoot: 'big' })).value).to.equal(big);
      expect((await other.send({ getRoot: 'big' })).value).to.equal(big);
      expect(((await other.send({ get: big })).value as { data: number[] }).data).to.have.length(600_000);
      expect(fs.readdirSync(dir).filter((n) => n.startsWith('pile.reader.'))).to.deep.equal([]);
    } finally {
      reader.close();
      await Promise.all([r.stop(), other.stop(), w.stop()]);
    }
    const here = openPile({ dir, segmentSize: 1 << 20 });
    const local = openPile({ dir, readonly: true });
    const p2 = here.put('here');
    expect(local.get(p2)).to.equal('here');
    local.close();
    here.close();
  });

  it('a writer opens beside a live read-only open; readers leave no mark, and marks left by dead readers of older builds are removed', async () => {
    const r = Holder.start(dir, 'read');
    expect((await r.next()).opened).to.equal(true);
    try {
      const writer = openPile({ dir });
      const p = writer.put('beside a reader');
      expect((await r.send({ get: p })).value).to.equal('beside a reader');
      writer.close();
    } finally {
      await r.stop();
    }
    const old = path.join(dir, `pile.reader.${deadPid()}.1700000000.abcdefgh`);
    fs.writeFileSync(old, '');
    openPile({ dir }).close();
    expect(fs.existsSync(old)).to.equal(false);
  });
});

describe('writer lock through another path to the same directory', () => {
  it('a second open through a symlink in the same process gets PILE_LOCKED', () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-lock-link-'));
    const real = path.join(base, 'real');
    const link = path.join(base, 'link');
    fs.mkdirSync(real);
    fs.symlinkSync(real, link);
    const first = openPile({ dir: real, segmentSize: 1 << 20 });
    try {
      expect(() => openPile({ dir: link }))
        .to.throw(PileError)
        .with.property('code', 'PILE_LOCKED');
      expect(() => openPile({ dir: `${real}/./` }))
        .to.throw(PileError)
        .with.property('code', 'PILE_LOCKED');
    } finally {
      first.close();
      fs.rmSync(base, { recursive: true, force: true });
    }
  });
});
