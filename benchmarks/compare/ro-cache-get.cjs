// A cache get of a writable table against the same get of a read-only open (the checked read of
// docs/concurrency.md, "Cache tables beside a writer"), in one process, rounds alternated:
// node benchmarks/compare/ro-cache-get.cjs ROOT
// Fills a durable typed table of 200 k Products in a mapped cache, copies its directory, opens the
// original writable and the copy read-only, and times 6 rounds of 1 M gets of random keys of each
// (after a warm-up); prints ns per get of each round, the median ratio read-only / writable and the
// load average. The read-only loops can not run under valgrind (pile.coord, docs/benchmarks.md).
const path = require('path'),
  fs = require('fs'),
  os = require('os');
const root = process.argv[2];
const { openCache } = require(path.join(root, 'packages/cache/dist/index.js'));
const { product, ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
const K = 200000;
const a = fs.mkdtempSync(path.join(os.tmpdir(), 'ro-cache-a-'));
const b = fs.mkdtempSync(path.join(os.tmpdir(), 'ro-cache-b-'));
process.on('exit', () => {
  fs.rmSync(a, { recursive: true, force: true });
  fs.rmSync(b, { recursive: true, force: true });
});
const keys = [];
for (let i = 0; i < K; i++) keys.push('product:' + i);
{
  const c = openCache({ dir: a, sweepIntervalSec: 0 });
  const t = c.table('products', { schema: ProductSchema, collisionMode: 'durable' });
  for (let i = 0; i < K; i++) t.put(keys[i], product(i));
  c.close();
}
fs.cpSync(a, b, { recursive: true });
const w = openCache({ dir: a, sweepIntervalSec: 0 }).table('products', { schema: ProductSchema, collisionMode: 'durable' });
const r = openCache({ dir: b, readonly: true }).table('products', { schema: ProductSchema, collisionMode: 'durable' });
let sink = 0,
  s = 12345;
function run(t, n) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    sink += t.get(keys[s % K]).id;
  }
  return Number(process.hrtime.bigint() - t0) / n;
}
run(w, 300000);
run(r, 300000);
const res = { writable: [], readonly: [] };
for (let round = 0; round < 6; round++) {
  if (round % 2 === 0) {
    res.writable.push(run(w, 1000000));
    res.readonly.push(run(r, 1000000));
  } else {
    res.readonly.push(run(r, 1000000));
    res.writable.push(run(w, 1000000));
  }
}
const med = (x) => x.slice().sort((p, q) => p - q)[x.length >> 1];
console.log(
  JSON.stringify({
    load: os.loadavg()[0].toFixed(1),
    writableNs: res.writable.map((x) => x.toFixed(0)),
    readonlyNs: res.readonly.map((x) => x.toFixed(0)),
    ratio: (med(res.readonly) / med(res.writable)).toFixed(3),
  }),
);
if (sink === -1) console.log(sink);
