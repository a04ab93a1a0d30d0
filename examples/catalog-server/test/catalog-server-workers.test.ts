import { expect } from 'chai';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { generateProduct, type Product } from '../src/Product';
import { WorkerCatalog } from '../src/WorkerCatalog';

// `--workers N` (issue 17, point 7): node:cluster workers serve one pile, reading and writing it.
// Real processes, real HTTP on loopback, a worker SIGKILLed while PUTs and GETs are in flight.
// No assertion depends on timing: waits are for lines and responses.

const REPO = path.resolve(__dirname, '../../..');
const MAIN = path.join(REPO, 'examples/catalog-server/dist/main.js');
const N = 2000;
/** Products the load updates; each belongs to one of CLIENTS sequential clients. */
const HOT = 120;
const CLIENTS = 4;
/**
 * How long a request made before the new worker listened waits for its answer: a connection
 * handed to the worker as it was killed never gets one. Not a bound on speed: a request that
 * times out only widens what the product may hold (see `maybe`), and requests made after the
 * new worker listened must all be answered.
 */
const CUT_MS = 20_000;

interface Server {
  child: ChildProcess;
  port: number;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves once stdout matches `re`. */
  waitFor: (re: RegExp) => Promise<RegExpExecArray>;
}

function start(dir: string, workers: number): Promise<Server> {
  const child = spawn(
    process.execPath,
    [MAIN, '--dir', dir, '--port', '0', '--products', String(N), '--segment-size', String(1 << 20), '--workers', String(workers)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  const waiters: (() => void)[] = [];
  const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    for (const w of waiters.splice(0)) w();
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const waitFor = async (re: RegExp): Promise<RegExpExecArray> => {
    for (;;) {
      const m = re.exec(out);
      if (m !== null) return m;
      if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}: ${err}`);
      await Promise.race([new Promise<void>((r) => waiters.push(r)), exited]);
    }
  };
  return waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/).then((m) => ({
    child,
    port: Number(m[1]),
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor,
  }));
}

interface Reply {
  status: number;
  worker: string;
  body: string;
}

/**
 * One request on a connection of its own (so node:cluster hands it to the next worker). A
 * connection that the primary handed to a worker as it was killed gets no answer (node:cluster
 * keeps it open, waiting for the dead worker's reply): such a request times out after `timeoutMs`.
 */
function request(port: number, method: string, urlPath: string, body?: string, timeoutMs = 120_000): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent: false, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, worker: String(res.headers['x-catalog-worker']), body: text }));
    });
    req.on('timeout', () =>
      req.destroy(Object.assign(new Error(`${method} ${urlPath}: no answer in ${timeoutMs} ms`), { code: 'TIMEOUT' })),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The update the load writes as its `seq`-th: stock and price tied, so a mix of two updates shows. */
function updateOf(seq: number): { stock: number; price: number } {
  return { stock: seq, price: seq + 0.25 };
}

/** Per product: the last acknowledged update, and the ones sent after it that got no answer. */
interface Expect {
  acked: number | undefined;
  maybe: number[];
  sent: Set<number>;
}

function expectConsistent(id: number, p: Product, e: Expect, where: string): void {
  const g = generateProduct(id);
  expect(p.id, where).to.equal(id);
  expect(p.name, where).to.equal(g.name);
  if (p.stock === g.stock && p.price === g.price) return;
  expect(e.sent.has(p.stock), `${where}: product ${id} has stock ${p.stock}, never sent`).to.equal(true);
  expect(p.price, `${where}: product ${id}'s price does not go with its stock`).to.equal(p.stock + 0.25);
}

describe('catalog-server --workers', function () {
  this.timeout(300_000);
  let dir: string;
  before(() => {
    execFileSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-b', 'examples/catalog-server'], {
      cwd: REPO,
      stdio: 'inherit',
    });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-catalog-workers-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('serves GETs and PUTs from 3 workers on one pile, and keeps serving correct values after a worker is SIGKILLed', async () => {
    const server = await start(dir, 3);
    let stopped = false;
    try {
      expect(server.stdout()).to.match(/catalog loaded: 2000 products, 3 workers/);
      const pids = [...server.stdout().matchAll(/worker (\d+) \(pid (\d+)\) listening/g)].map((m) => [m[1]!, Number(m[2])] as const);
      expect(pids).to.have.length(3);

      // A PUT through one worker, then GETs until two other workers have answered: each sees it.
      const put = await request(server.port, 'PUT', '/products/1500', JSON.stringify({ price: 12.5, stock: 7 }));
      expect(put.status, put.body).to.equal(200);
      const seen = new Set<string>();
      for (let i = 0; i < 200 && [...seen].filter((w) => w !== put.worker).length < 2; i++) {
        const got = await request(server.port, 'GET', '/products/1500');
        expect(got.status).to.equal(200);
        expect(JSON.parse(got.body), `GET through worker ${got.worker}`).to.deep.equal({ ...generateProduct(1500), price: 12.5, stock: 7 });
        seen.add(got.worker);
      }
      expect([...seen].filter((w) => w !== put.worker).length, `workers seen: ${[...seen].join(', ')}`).to.equal(2);

      // A product created through one worker is found through the others.
      const created = { id: 5_000_000, name: 'Made by a PUT', price: 1.5, stock: 3, category: 'tools' };
      expect((await request(server.port, 'PUT', `/products/${created.id}`, JSON.stringify(created))).status).to.equal(201);
      for (let i = 0; i < 6; i++)
        expect(JSON.parse((await request(server.port, 'GET', `/products/${created.id}`)).body)).to.deep.equal(created);

      // Load: CLIENTS sequential writers, each owning the products id % CLIENTS, and a reader.
      // A worker is SIGKILLed once 300 updates were acknowledged; the load goes on until the
      // primary started another worker and 300 more were acknowledged.
      const model = new Map<number, Expect>();
      for (let id = 1; id <= HOT; id++) model.set(id, { acked: undefined, maybe: [], sent: new Set() });
      let acked = 0;
      let failedPuts = 0;
      let failedGets = 0;
      let gets = 0;
      let seq = 0;
      let phase: 'before' | 'after' | 'done' = 'before';
      let ackedAtRespawn = Number.POSITIVE_INFINITY;
      const writer = async (c: number): Promise<void> => {
        for (let k = 0; phase !== 'done'; k++) {
          const id = 1 + c + CLIENTS * (k % (HOT / CLIENTS));
          const e = model.get(id)!;
          const s = ++seq;
          e.sent.add(s);
          const issued = phase;
          try {
            const r = await request(server.port, 'PUT', `/products/${id}`, JSON.stringify(updateOf(s)), CUT_MS);
            expect(r.status, r.body).to.equal(200);
            expect(JSON.parse(r.body)).to.deep.equal({ ...generateProduct(id), ...updateOf(s) });
            e.acked = s;
            e.maybe = [];
            acked++;
          } catch (err) {
            // Only a request made before the new worker listened can have been cut by the kill.
            if ((err as { code?: string }).code === undefined || issued !== 'before') throw err;
            e.maybe.push(s); // it may or may not have been applied
            failedPuts++;
          }
          if (acked >= ackedAtRespawn + 300) phase = 'done';
        }
      };
      const reader = async (): Promise<void> => {
        for (let k = 0; phase !== 'done'; k++) {
          const id = 1 + ((k * 7919) % HOT);
          const issued = phase;
          try {
            const r = await request(server.port, 'GET', `/products/${id}`, undefined, CUT_MS);
            expect(r.status, r.body).to.equal(200);
            expectConsistent(id, JSON.parse(r.body) as Product, model.get(id)!, `GET through worker ${r.worker}`);
            gets++;
          } catch (err) {
            if ((err as { code?: string }).code === undefined || issued !== 'before') throw err;
            failedGets++;
          }
        }
      };
      const killer = async (): Promise<void> => {
        while (acked < 300) await new Promise((r) => setTimeout(r, 5));
        const [victimId, victimPid] = pids[1]!;
        process.kill(victimPid, 'SIGKILL');
        await server.waitFor(new RegExp(`worker ${victimId} \\(pid ${victimPid}\\) exited \\(SIGKILL\\); starting another`));
        await server.waitFor(/worker 4 \(pid \d+\) listening/);
        ackedAtRespawn = acked;
        phase = 'after';
      };
      await Promise.all([...Array.from({ length: CLIENTS }, (_, c) => writer(c)), reader(), reader(), killer()]);
      // At most the requests in flight when the worker died (one per client) were cut.
      expect(failedPuts + failedGets, 'requests cut by the kill').to.be.at.most(CLIENTS + 2);
      console.log(
        `      ${acked} PUTs acknowledged, ${failedPuts} cut by the kill; ${gets} GETs checked, ${failedGets} cut; ` +
          `${HOT} products updated by ${CLIENTS} clients, 3 workers, one SIGKILLed and replaced`,
      );

      // Every product holds its last acknowledged update (or one sent after it that the kill cut),
      // through every worker, the new one included.
      const check = (id: number, p: Product, where: string): void => {
        const e = model.get(id)!;
        expectConsistent(id, p, e, where);
        const allowed = [...(e.acked === undefined ? [generateProduct(id).stock] : [e.acked]), ...e.maybe];
        expect(allowed, `${where}: product ${id}`).to.include(p.stock);
      };
      const workersAfter = new Set<string>();
      for (let round = 0; round < 3; round++) {
        for (let id = 1; id <= HOT; id++) {
          const r = await request(server.port, 'GET', `/products/${id}`);
          expect(r.status).to.equal(200);
          check(id, JSON.parse(r.body) as Product, `after the kill, worker ${r.worker}`);
          workersAfter.add(r.worker.split('/')[0]!);
        }
      }
      const survivors = pids.map(([w]) => w).filter((w) => w !== pids[1]![0]);
      expect([...workersAfter].sort(), 'the workers answering after the kill').to.deep.equal([...survivors, '4'].sort());

      server.child.kill('SIGTERM');
      expect(await server.exited).to.equal(0);
      stopped = true;
      expect(server.stdout()).to.match(/closed on SIGTERM/);

      const catalog = WorkerCatalog.open({ dir, log: () => {} });
      try {
        const report = catalog.pile.verify();
        expect(report.ok, JSON.stringify(report).slice(0, 2000)).to.equal(true);
        expect(catalog.count).to.equal(N + 1);
        for (let id = 1; id <= HOT; id++) check(id, catalog.get(id)!, 'reopened');
        expect(catalog.get(1500)).to.deep.equal({ ...generateProduct(1500), price: 12.5, stock: 7 });
        expect(catalog.get(N)).to.deep.equal(generateProduct(N));
      } finally {
        catalog.close();
      }
    } catch (e) {
      // The servers' own account (workers' errors, recovery lines) beside the failure.
      (e as Error).message += `\nserver stdout:\n${server.stdout()}\nserver stderr:\n${server.stderr()}`;
      throw e;
    } finally {
      if (!stopped) server.child.kill('SIGKILL');
    }

    // The data directory belongs to --workers now: the one-process mode refuses it, naming the option.
    const single = spawnSync(process.execPath, [MAIN, '--dir', dir, '--port', '0', '--products', String(N)], { encoding: 'utf8' });
    expect(single.status).to.equal(1);
    expect(single.stderr).to.match(/made with --workers/);
  });
});
