import { expect } from 'chai';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { startRedis, type RedisServer } from '../../../packages/sync/test/helpers';
import { generateProduct } from '../src/Product';

const REPO = path.resolve(__dirname, '../../..');
const MAIN = path.join(REPO, 'examples/catalog-server/dist/main.js');
const N = 500;

interface Server {
  child: ChildProcess;
  port: number;
  exited: Promise<void>;
}

function start(dir: string, url: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [MAIN, '--dir', dir, '--port', '0', '--products', String(N), '--segment-size', String(1 << 20), '--redis', url],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    const exited = new Promise<void>((res) => child.on('exit', () => res()));
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m !== null && /in sync through/.test(out)) resolve({ child, port: Number(m[1]), exited });
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    void exited.then(() => reject(new Error(`server exited before it was in sync: ${err}`)));
  });
}

function request(port: number, method: string, urlPath: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('catalog-server --redis: three servers stay coherent', function () {
  this.timeout(120_000);
  let redis: RedisServer;
  const dirs: string[] = [];
  const servers: Server[] = [];

  before(async () => {
    execFileSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-b', 'examples/catalog-server'], {
      cwd: REPO,
      stdio: 'inherit',
    });
    redis = await startRedis();
  });
  after(async () => {
    for (const s of servers) {
      s.child.kill('SIGTERM');
      await s.exited;
    }
    await redis?.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('a PUT on one server is seen on the others within milliseconds, and after a restart', async () => {
    const url = `redis://127.0.0.1:${redis.port}`;
    for (let i = 0; i < 3; i++) {
      dirs.push(fs.mkdtempSync(path.join(os.tmpdir(), 'pile-catalog-redis-')));
      servers.push(await start(dirs[i]!, url));
    }
    const get = async (s: Server, id: number): Promise<Record<string, unknown>> => {
      const r = await request(s.port, 'GET', `/products/${id}`);
      expect(r.status, r.body).to.equal(200);
      return JSON.parse(r.body) as Record<string, unknown>;
    };
    // Every server caches product 7.
    for (const s of servers) expect(await get(s, 7)).to.deep.equal(generateProduct(7));
    const times: number[] = [];
    for (let round = 0; round < 20; round++) {
      const writer = servers[round % 3]!;
      const put = await request(writer.port, 'PUT', '/products/7', JSON.stringify({ stock: round }));
      expect(put.status, put.body).to.equal(200);
      // A partial body merges onto the stored product, as on a standalone server.
      expect(JSON.parse(put.body)).to.deep.equal({ ...generateProduct(7), stock: round });
      const t0 = performance.now();
      for (const s of servers) {
        for (;;) {
          if ((await get(s, 7))['stock'] === round) break;
          expect(performance.now() - t0, `server ${s.port} still serves the old product 7`).to.be.below(5000);
        }
      }
      times.push(performance.now() - t0);
    }
    for (const s of servers) expect(await get(s, 7)).to.deep.equal({ ...generateProduct(7), stock: 19 });
    // Two fields of product 8, which no server read before; a field of the wrong type is refused,
    // naming it, and changes nothing.
    const two = await request(servers[2]!.port, 'PUT', '/products/8', JSON.stringify({ price: 12.5, stock: 3 }));
    expect(two.status, two.body).to.equal(200);
    expect(JSON.parse(two.body)).to.deep.equal({ ...generateProduct(8), price: 12.5, stock: 3 });
    const bad = await request(servers[0]!.port, 'PUT', '/products/9', JSON.stringify({ price: 'free' }));
    expect(bad.status).to.equal(400);
    expect(bad.body).to.match(/price/);
    for (const s of servers) expect(await get(s, 9)).to.deep.equal(generateProduct(9));
    times.sort((x, y) => x - y);
    console.log(
      `      PUT on one server seen on all three: median ${times[10]!.toFixed(1)} ms, max ${times[19]!.toFixed(1)} ms (HTTP round trips included)`,
    );
    // A server stopped while another writes replays the change when it starts again.
    const s1 = servers[1]!;
    s1.child.kill('SIGTERM');
    await s1.exited;
    await request(servers[0]!.port, 'PUT', '/products/7', JSON.stringify({ stock: 999 }));
    servers[1] = await start(dirs[1]!, url);
    expect((await get(servers[1]!, 7))['stock']).to.equal(999);
  });
});
