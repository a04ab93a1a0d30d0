import { expect } from 'chai';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as fc from 'fast-check';
import { buildCore } from './fixtures/build-core';

const SERVER = path.join(__dirname, 'fixtures', 'pile-server.js');
type Value = string | Uint8Array | { [k: string]: unknown };
type Wire = unknown;

const toWire = (v: Value): Wire => (v instanceof Uint8Array ? { $b: Buffer.from(v).toString('base64') } : v);
const fromWire = (w: Wire): Value =>
  w !== null && typeof w === 'object' && typeof (w as { $b?: unknown }).$b === 'string'
    ? new Uint8Array(Buffer.from((w as { $b: string }).$b, 'base64'))
    : (w as Value);

/** A pile in a child process, driven over JSON lines. */
class Server {
  private buf = '';
  private waiters = new Map<number, (m: Record<string, unknown>) => void>();
  private nextId = 1;
  readonly exited: Promise<void>;
  ready: Promise<Record<string, unknown>>;

  private constructor(readonly child: ChildProcessByStdio<Writable, Readable, null>) {
    let onReady!: (m: Record<string, unknown>) => void;
    this.ready = new Promise((r) => {
      onReady = r;
    });
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      this.buf += c;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const m = JSON.parse(this.buf.slice(0, nl)) as Record<string, unknown>;
        this.buf = this.buf.slice(nl + 1);
        if (m.ready) onReady(m);
        else this.waiters.get(m.id as number)?.(m);
      }
    });
    this.exited = new Promise((r) => child.on('close', () => r()));
  }

  static start(dir: string): Server {
    return new Server(spawn(process.execPath, [SERVER], { env: { ...process.env, PILE_DIR: dir }, stdio: ['pipe', 'pipe', 'inherit'] }));
  }

  /** Sends a command; resolves with its answer. */
  call(op: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const p = new Promise<Record<string, unknown>>((r) => this.waiters.set(id, r));
    this.child.stdin.write(`${JSON.stringify({ id, op, ...args })}\n`);
    return p;
  }

  async result(op: string, args: Record<string, unknown> = {}): Promise<unknown> {
    const m = await this.call(op, args);
    if (m.error !== undefined) throw new Error(`${op}: ${String(m.message)}`);
    return m.result;
  }

  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

interface Model {
  records: Map<number, Value>;
  deleted: number[];
  roots: Map<string, number>;
}
interface Real {
  dir: string;
  server: Server;
}

const pick = (m: Model, k: number): number | undefined => {
  const keys = [...m.records.keys()];
  return keys.length === 0 ? undefined : keys[k % keys.length];
};

const sameValue = (a: unknown, b: Value): boolean => {
  if (b instanceof Uint8Array) return a instanceof Uint8Array && Buffer.from(a).equals(Buffer.from(b));
  return JSON.stringify(a) === JSON.stringify(b);
};

const valueArb: fc.Arbitrary<Value> = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ minLength: 200, maxLength: 3000 }),
  fc.uint8Array({ maxLength: 2000 }),
  fc.record({ a: fc.integer(), b: fc.string({ maxLength: 20 }), c: fc.array(fc.integer(), { maxLength: 30 }) }),
);

class Put implements fc.AsyncCommand<Model, Real> {
  constructor(readonly v: Value) {}
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    const p = (await r.server.result('put', { v: toWire(this.v) })) as number;
    m.records.set(p, this.v);
  }
  toString = (): string => `put(${JSON.stringify(toWire(this.v)).slice(0, 30)})`;
}

class SetCmd implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly k: number,
    readonly v: Value,
  ) {}
  check = (m: Readonly<Model>): boolean => m.records.size > 0;
  async run(m: Model, r: Real): Promise<void> {
    const p = pick(m, this.k)!;
    await r.server.result('set', { p, v: toWire(this.v) });
    m.records.set(p, this.v);
  }
  toString = (): string => `set(#${this.k})`;
}

class Delete implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  check = (m: Readonly<Model>): boolean => m.records.size > 0;
  async run(m: Model, r: Real): Promise<void> {
    const p = pick(m, this.k)!;
    expect(await r.server.result('delete', { p })).to.equal(true);
    m.records.delete(p);
    m.deleted.push(p);
  }
  toString = (): string => `delete(#${this.k})`;
}

class SetRoot implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly name: string,
    readonly k: number,
  ) {}
  check = (m: Readonly<Model>): boolean => m.records.size > 0;
  async run(m: Model, r: Real): Promise<void> {
    const p = pick(m, this.k)!;
    await r.server.result('setRoot', { name: this.name, p });
    m.roots.set(this.name, p);
  }
  toString = (): string => `setRoot(${this.name}, #${this.k})`;
}

/** Reads everything back and compares it with the model. */
class CheckAll implements fc.AsyncCommand<Model, Real> {
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    await checkAll(m, r);
  }
  toString = (): string => 'checkAll';
}

/** SIGKILL while idle, then reopen: everything acknowledged is there. */
class Crash implements fc.AsyncCommand<Model, Real> {
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    await r.server.kill();
    r.server = Server.start(r.dir);
    const ready = await r.server.ready;
    expect((ready.recovery as { ran: boolean }).ran).to.equal(true);
    await checkAll(m, r);
  }
  toString = (): string => 'crash';
}

/** SIGKILL at a random moment during a set: after reopen the record holds the old or the new value. */
class CrashDuringSet implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly k: number,
    readonly v: Value,
    readonly delayUs: number,
  ) {}
  check = (m: Readonly<Model>): boolean => m.records.size > 0;
  async run(m: Model, r: Real): Promise<void> {
    const p = pick(m, this.k)!;
    const old = m.records.get(p)!;
    void r.server.call('set', { p, v: toWire(this.v) });
    const t0 = process.hrtime.bigint();
    while (Number(process.hrtime.bigint() - t0) / 1000 < this.delayUs) {
      /* spin: a timer is too coarse */
    }
    await r.server.kill();
    r.server = Server.start(r.dir);
    await r.server.ready;
    const got = fromWire(await r.server.result('get', { p }));
    expect(sameValue(got, old) || sameValue(got, this.v), `after a kill during set: ${JSON.stringify(got).slice(0, 60)}`).to.equal(true);
    m.records.set(p, got);
    await checkAll(m, r);
  }
  toString = (): string => `crashDuringSet(#${this.k}, ${this.delayUs}us)`;
}

/** Clean close and reopen. */
class Reopen implements fc.AsyncCommand<Model, Real> {
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    await r.server.call('close');
    await r.server.exited;
    r.server = Server.start(r.dir);
    const ready = await r.server.ready;
    expect((ready.recovery as { ran: boolean }).ran).to.equal(false);
    await checkAll(m, r);
  }
  toString = (): string => 'reopen';
}

async function checkAll(m: Model, r: Real): Promise<void> {
  for (const [p, v] of m.records) {
    const got = fromWire(await r.server.result('get', { p }));
    expect(sameValue(got, v), `record ${p}`).to.equal(true);
  }
  for (const p of m.deleted) {
    const a = await r.server.call('get', { p });
    expect(a.error, `deleted ${p}`).to.equal('PILE_STALE_POINTER');
  }
  const roots = (await r.server.result('roots')) as Record<string, number>;
  expect(roots).to.deep.equal(Object.fromEntries(m.roots));
  const entries = (await r.server.result('entries')) as number[];
  expect(entries.slice().sort()).to.deep.equal([...m.records.keys()].sort());
  const report = (await r.server.result('verify')) as { ok: boolean };
  expect(report.ok, JSON.stringify(report)).to.equal(true);
}

describe('pile against a Map model, with crashes', function () {
  this.timeout(120_000);
  before(() => buildCore());

  it('every acknowledged operation survives SIGKILL; a killed set leaves old or new', async () => {
    const commands = [
      valueArb.map((v) => new Put(v)),
      fc.tuple(fc.nat(), valueArb).map(([k, v]) => new SetCmd(k, v)),
      fc.nat().map((k) => new Delete(k)),
      fc.tuple(fc.constantFrom('a', 'b', 'c'), fc.nat()).map(([n, k]) => new SetRoot(n, k)),
      fc.constant(new CheckAll()),
      fc.constant(new Crash()),
      fc.tuple(fc.nat(), valueArb, fc.integer({ min: 0, max: 400 })).map(([k, v, d]) => new CrashDuringSet(k, v, d)),
      fc.constant(new Reopen()),
    ];
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 25 }), async (cmds) => {
        const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pile-model-')), 'pile');
        const real: Real = { dir, server: Server.start(dir) };
        try {
          await real.server.ready;
          await fc.asyncModelRun(() => ({ model: { records: new Map(), deleted: [], roots: new Map() }, real }), cmds);
        } finally {
          await real.server.kill();
          fs.rmSync(path.dirname(dir), { recursive: true, force: true });
        }
      }),
      { numRuns: Number(process.env.PILE_MODEL_RUNS ?? 12) },
    );
  });
});
