// KeyvPile vs @keyv/redis (a redis-server started here on a free loopback port) vs Keyv's default Map,
// all through Keyv: set/get ops/s (each awaited before the next), forced full-GC pause and heapUsed with
// N entries alive, and KeyvPile's restart-to-first-hit. Run after `npx tsc -b`:
//   node packages/keyv/bench/keyv-bench.js [entries=1000000] [ops=100000]
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const [, , role, ...rest] = process.argv;
const value = (i) => ({ id: i, name: `user ${i}`, tags: ['a', 'b'], score: i * 0.5 });

async function measure(store, n, ops, dir, port) {
  const { Keyv } = require('keyv');
  let keyv;
  if (store === 'pile') keyv = new Keyv({ store: new (require('../dist').KeyvPile)({ dir }) });
  else if (store === 'redis') keyv = new Keyv({ store: new (require('@keyv/redis').default)(`redis://127.0.0.1:${port}`) });
  else keyv = new Keyv();
  const t0 = performance.now();
  const batch = 1000;
  for (let i = 0; i < n; i += batch) {
    const entries = [];
    for (let j = i; j < Math.min(n, i + batch); j++) entries.push({ key: `k${j}`, value: value(j) });
    await keyv.setMany(entries);
  }
  const fillMs = performance.now() - t0;
  let t = performance.now();
  for (let i = 0; i < ops; i++) await keyv.set(`k${(i * 7919) % n}`, value(i));
  const setPerSec = ops / ((performance.now() - t) / 1000);
  t = performance.now();
  let hits = 0;
  for (let i = 0; i < ops; i++) if ((await keyv.get(`k${(i * 104729) % n}`)) !== undefined) hits++;
  const getPerSec = ops / ((performance.now() - t) / 1000);
  if (hits !== ops) throw new Error(`${store}: ${hits} hits of ${ops}`);
  global.gc();
  const pauses = [];
  for (let i = 0; i < 5; i++) {
    const g = performance.now();
    global.gc();
    pauses.push(performance.now() - g);
  }
  pauses.sort((a, b) => a - b);
  const heapUsed = process.memoryUsage().heapUsed;
  await keyv.disconnect();
  return { store, n, ops, fillMs, setPerSec, getPerSec, gcMedianMs: pauses[2], heapUsedMB: heapUsed / 2 ** 20 };
}

async function firstHit(dir) {
  const t0 = performance.now();
  const { Keyv } = require('keyv');
  const keyv = new Keyv({ store: new (require('../dist').KeyvPile)({ dir }) });
  const v = await keyv.get('k12345');
  if (v === undefined) throw new Error('no hit after restart');
  return { inProcessMs: performance.now() - t0 };
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

function child(args) {
  const r = spawnSync(process.execPath, ['--expose-gc', '--max-old-space-size=8192', __filename, ...args], {
    encoding: 'utf8',
    cwd: __dirname,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

async function main() {
  if (role === 'measure') {
    const [store, n, ops, dir, port] = rest;
    process.stdout.write(JSON.stringify(await measure(store, Number(n), Number(ops), dir, port)) + '\n');
    return;
  }
  if (role === 'first-hit') {
    process.stdout.write(JSON.stringify(await firstHit(rest[0])) + '\n');
    return;
  }
  const n = Number(role ?? 1_000_000);
  const ops = Number(rest[0] ?? 100_000);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-keyv-bench-'));
  const port = await freePort();
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  await new Promise((r) => setTimeout(r, 300));
  try {
    const rows = [];
    for (const store of ['pile', 'redis', 'map'])
      rows.push(child(['measure', store, String(n), String(ops), path.join(dir, 'pile'), String(port)]));
    const t = performance.now();
    const hit = child(['first-hit', path.join(dir, 'pile')]);
    const restartWallMs = performance.now() - t;
    console.log(
      JSON.stringify(
        {
          machine: `${os.cpus().length} × ${os.cpus()[0].model}, Node ${process.version}`,
          rows,
          restart: { ...hit, wallMs: restartWallMs },
        },
        null,
        1,
      ),
    );
  } finally {
    redis.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
