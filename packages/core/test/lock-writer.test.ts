import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile, PileError, isPileError } from '../src';
import { buildCore } from './fixtures/build-core';
import { expectPileError } from './fixtures/expect-error';

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

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return isPileError(err) ? err.code : String(err);
  }
  return undefined;
}

describe('single writer lock', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => buildCore());
  beforeEach(() => {
    dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pile-lock-')), 'pile');
    openPile({ dir, segmentSize: 1 << 20 }).close();
  });
  afterEach(() => fs.rmSync(path.dirname(dir), { recursive: true, force: true }));

  it('a second openPile in the same process gets PILE_LOCKED until the first closes', () => {
    const a = openPile({ dir });
    try {
      let err: unknown;
      try {
        openPile({ dir: path.join(dir, '..', 'pile') });
      } catch (e) {
        err = e;
      }
      expect(isPileError(err, 'PILE_LOCKED')).to.equal(true);
      expect((err as Error).message).to.include(dir);
      // The refused open must not release the holder's lock.
      expect(fs.existsSync(path.join(dir, LOCK))).to.equal(true);
    } finally {
      a.close();
    }
    expect(fs.existsSync(path.join(dir, LOCK))).to.equal(false);
    openPile({ dir }).close();
  });

  it('a second process gets PILE_LOCKED naming the holder; after the holder exits it opens', async () => {
    const a = openPile({ dir });
    const h = Holder.start(dir, 'write');
    const res = await h.next();
    await h.exited;
    a.close();
    expect(res.error).to.equal('PILE_LOCKED');
    expect(res.message).to.include(String(process.pid));
    const b = Holder.start(dir, 'write');
    expect((await b.next()).opened).to.equal(true);
    expect(codeOf(() => openPile({ dir }))).to.equal('PILE_LOCKED');
    await b.stop();
    openPile({ dir }).close();
  });

  it('a lock left by a process killed with SIGKILL is taken over, and the open recovers', async () => {
    const h = Holder.start(dir, 'write');
    expect((await h.next()).opened).to.equal(true);
    const ptr = (await h.send({ put: 'held' })).ptr as number;
    await h.kill();
    expect(fs.readFileSync(path.join(dir, LOCK), 'utf8')).to.equal(String(h.child.pid));
    const pile = openPile({ dir });
    try {
      expect(pile.lastRecovery.ran).to.equal(true);
      expect(pile.get(ptr as never)).to.equal('held');
      expect(fs.readFileSync(path.join(dir, LOCK), 'utf8')).to.equal(String(process.pid));
    } finally {
      pile.close();
    }
  });

  it('a lock file naming a dead pid is taken over; a live pid is respected', () => {
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

  it('processes racing for a stale lock: exactly one wins', async () => {
    for (let round = 0; round < 3; round++) {
      fs.writeFileSync(path.join(dir, LOCK), String(deadPid()));
      const racers = Array.from({ length: 4 }, () => Holder.start(dir, 'write'));
      const results = await Promise.all(racers.map((r) => r.next()));
      expect(
        results.filter((r) => r.opened === true),
        `round ${round}: ${JSON.stringify(results)}`,
      ).to.have.length(1);
      expect(results.filter((r) => r.error === 'PILE_LOCKED')).to.have.length(3);
      await Promise.all(racers.map((r) => r.stop()));
      expect(fs.existsSync(path.join(dir, LOCK))).to.equal(false);
    }
  });

  it('a read-only open beside a live writer is refused with PILE_LOCKED naming its pid, in another process and in this one', async () => {
    const w = Holder.start(dir, 'write');
    const opened = await w.next();
    expect(opened.opened).to.equal(true);
    const p1 = (await w.send({ put: { n: 1 } })).ptr as number;
    try {
      const err = expectPileError(() => openPile({ dir, readonly: true }), 'PILE_LOCKED', `process ${opened.pid as number}`);
      expect(err.message).to.contain('not supported');
      const r = Holder.start(dir, 'read');
      expect(await r.next()).to.deep.include({ error: 'PILE_LOCKED' });
      await r.stop();
      expect(fs.readdirSync(dir).filter((n) => n.startsWith('pile.reader.'))).to.deep.equal([]);
    } finally {
      await w.stop();
    }
    // Once the writer is gone, readers open and read what it wrote.
    const reader = openPile({ dir, readonly: true });
    expect(reader.get(p1 as never)).to.deep.equal({ n: 1 });
    reader.close();
    const here = openPile({ dir, segmentSize: 1 << 20 });
    expectPileError(() => openPile({ dir, readonly: true }), 'PILE_LOCKED', `process ${process.pid}`);
    here.close();
  });

  it('a writer does not open beside a live read-only open (another process or this one); a dead reader does not stop it', async () => {
    openPile({ dir, segmentSize: 1 << 20 }).close();
    const r = Holder.start(dir, 'read');
    const opened = await r.next();
    expect(opened.opened).to.equal(true);
    try {
      expectPileError(() => openPile({ dir }), 'PILE_LOCKED', `read-only by process ${opened.pid as number}`);
      expect(fs.existsSync(path.join(dir, LOCK))).to.equal(false);
      const w = Holder.start(dir, 'write');
      expect(await w.next()).to.deep.include({ error: 'PILE_LOCKED' });
      await w.stop();
    } finally {
      await r.stop();
    }
    const local = openPile({ dir, readonly: true });
    expectPileError(() => openPile({ dir }), 'PILE_LOCKED', `read-only by process ${process.pid}`);
    local.close();
    // A reader killed without closing leaves its mark; the next writer removes it.
    const killed = Holder.start(dir, 'read');
    expect((await killed.next()).opened).to.equal(true);
    killed.child.kill('SIGKILL');
    await killed.exited;
    expect(fs.readdirSync(dir).filter((n) => n.startsWith('pile.reader.'))).to.have.length(1);
    const writer = openPile({ dir });
    expect(fs.readdirSync(dir).filter((n) => n.startsWith('pile.reader.'))).to.deep.equal([]);
    writer.close();
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
