import { expect } from 'chai';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { generateProduct } from '../src/Product';

const REPO = path.resolve(__dirname, '../../..');
const MAIN = path.join(REPO, 'examples/catalog-server/dist/main.js');
const N = 3000;

interface Started {
  child: ChildProcess;
  port: number;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function start(dir: string): Promise<Started> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, '--dir', dir, '--port', '0', '--products', String(N), '--segment-size', String(1 << 20)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m !== null) resolve({ child, port: Number(m[1]), stdout: () => out, stderr: () => err, exited });
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    void exited.then((code) => reject(new Error(`server exited with ${code} before listening: ${err}`)));
  });
}

function request(
  port: number,
  method: string,
  urlPath: string,
  body?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('catalog-server', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    execFileSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-b', 'examples/catalog-server'], {
      cwd: REPO,
      stdio: 'inherit',
    });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-catalog-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('serves, updates and streams the catalog, and is warm with the update after a restart', async () => {
    const first = await start(dir);
    let stopped = false;
    try {
      expect(first.stdout()).to.match(/catalog loaded: 3000 products/);

      const one = await request(first.port, 'GET', '/products/42');
      expect(one.status).to.equal(200);
      expect(JSON.parse(one.body)).to.deep.equal(generateProduct(42));
      expect((await request(first.port, 'GET', `/products/${N + 1}`)).status).to.equal(404);
      expect((await request(first.port, 'GET', '/products/abc')).status).to.equal(400);

      const put = await request(first.port, 'PUT', '/products/42', JSON.stringify({ price: 12.5, stock: 7 }));
      expect(put.status, put.body).to.equal(200);
      expect(JSON.parse(put.body)).to.deep.equal({ ...generateProduct(42), price: 12.5, stock: 7 });
      const bad = await request(first.port, 'PUT', '/products/43', JSON.stringify({ price: 'free' }));
      expect(bad.status).to.equal(400);
      expect(bad.body).to.match(/price/);
      expect(JSON.parse((await request(first.port, 'GET', '/products/43')).body)).to.deep.equal(generateProduct(43));

      const stats = JSON.parse((await request(first.port, 'GET', '/stats')).body) as Record<string, Record<string, unknown>>;
      expect(stats['products'] as unknown).to.equal(N);
      expect(stats['pile']['objectCount']).to.be.a('number');
      expect(stats['gc']).to.be.an('object');
      expect(stats['startup']['loadedNow']).to.equal(true);

      const metrics = await request(first.port, 'GET', '/metrics');
      expect(metrics.headers['content-type']).to.match(/^text\/plain; version=0\.0\.4/);
      expect(metrics.body).to.match(/^# TYPE catalog_products gauge\ncatalog_products 3000$/m);
      expect(metrics.body).to.match(/^pile_bytes\{state="allocated"\} \d+$/m);
      expect(metrics.body).to.match(/^http_requests_total\{route="\/products\/:id",status="200"\} \d+$/m);
      for (const line of metrics.body.trim().split('\n')) expect(line).to.match(/^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? -?[\d.e+-]+)$/);

      const all = await request(first.port, 'GET', '/products');
      expect(all.status).to.equal(200);
      const list = JSON.parse(all.body) as { id: number; price: number }[];
      expect(list).to.have.length(N);
      expect(new Set(list.map((p) => p.id)).size).to.equal(N);
      expect(list.find((p) => p.id === 42)!.price).to.equal(12.5);

      first.child.kill('SIGTERM');
      expect(await first.exited).to.equal(0);
      stopped = true;
      expect(first.stdout()).to.match(/closed on SIGTERM/);
    } finally {
      if (!stopped) first.child.kill('SIGKILL');
    }

    const second = await start(dir);
    try {
      expect(second.stdout()).to.match(/warm start\): 3000 products/);
      const ready = Number(/ready in (\d+) ms/.exec(second.stdout())![1]);
      // Speed is measured in benchmarks/ (restart workload), not here: a loaded machine stretches it. This only
      // rules out a start that rebuilt the index (the warm-start line above) or hung.
      expect(ready).to.be.within(0, 60_000);
      expect(JSON.parse((await request(second.port, 'GET', '/products/42')).body)).to.deep.equal({
        ...generateProduct(42),
        price: 12.5,
        stock: 7,
      });
      expect(JSON.parse((await request(second.port, 'GET', '/products/2999')).body)).to.deep.equal(generateProduct(2999));
      const stats = JSON.parse((await request(second.port, 'GET', '/stats')).body) as Record<string, Record<string, unknown>>;
      expect(stats['startup']['loadedNow']).to.equal(false);
    } finally {
      second.child.kill('SIGTERM');
      expect(await second.exited).to.equal(0);
    }
  });

  it('after kill -9, the next start logs its recovery as recovering: n/N lines', async () => {
    const crashDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-catalog-crash-'));
    try {
      const first = await start(crashDir);
      first.child.kill('SIGKILL');
      await first.exited;
      const second = await start(crashDir);
      try {
        const lines = second
          .stderr()
          .split('\n')
          .filter((l) => l.startsWith('recovering: '));
        expect(lines.length, second.stderr()).to.be.greaterThan(1);
        for (const l of lines) expect(l).to.match(/^recovering: \d+\/\d+ \((recover|cache-index|cache-orphans)\)$/);
        expect(lines.some((l) => l.endsWith('(recover)'))).to.equal(true);
        expect(lines.some((l) => l.endsWith('(cache-orphans)'))).to.equal(true);
        expect(second.stdout()).to.match(/warm start\): 3000 products/);
        expect(JSON.parse((await request(second.port, 'GET', '/products/2999')).body)).to.deep.equal(generateProduct(2999));
      } finally {
        second.child.kill('SIGTERM');
        expect(await second.exited).to.equal(0);
      }
    } finally {
      fs.rmSync(crashDir, { recursive: true, force: true });
    }
  });
});
