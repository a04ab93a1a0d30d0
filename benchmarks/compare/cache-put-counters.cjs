// Where a build's cache put spends its time: node benchmarks/compare/cache-put-counters.cjs ROOT ROUNDS
// Fills a durable typed cache table of 200 k Products as compare-builds.cjs's loops do, then runs ROUNDS
// times 100 k replacing puts and prints, over those rounds: the median rate, user and system CPU time,
// page faults and context switches (process.resourceUsage()), CPU time per thread (/proc/self/task/*/schedstat,
// Linux; the pool threads that fault pages in ahead of a writer would show here), and the anonymous
// memory backed by huge pages (/proc/self/smaps_rollup). Used to find where the cache put's time went (docs/benchmarks.md).
const fs = require('fs');
const path = require('path');
const root = process.argv[2];
const R = Number(process.argv[3] ?? 15);
const cacheMod = require(path.join(root, 'packages/cache/dist/index.js'));
const { product, ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
const K = 200000;
const order = new Uint32Array(400000);
let s = 12345;
for (let i = 0; i < order.length; i++) {
  s = (Math.imul(s, 1103515245) + 12345) >>> 0;
  order[i] = s % 500000;
}
const table = cacheMod.openCache().table('products', { schema: ProductSchema, collisionMode: 'durable' });
const keys = [];
for (let i = 0; i < K; i++) keys.push('product:' + i);
for (let i = 0; i < K; i++) table.put(keys[i], product(i));
/** CPU ms per thread, the main thread as `main`, the others by name. */
function threads() {
  const out = {};
  for (const t of fs.readdirSync('/proc/self/task')) {
    const name = Number(t) === process.pid ? 'main' : fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim();
    out[name] = (out[name] ?? 0) + Number(fs.readFileSync(`/proc/self/task/${t}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  }
  return out;
}
function cachePut() {
  const t = performance.now();
  for (let i = 0; i < 100000; i++) {
    const j = order[i + 300000] % K;
    table.put(keys[j], product(j));
  }
  return performance.now() - t;
}
cachePut(); // warm-up
const u0 = process.resourceUsage();
const t0 = threads();
const rates = [];
for (let r = 0; r < R; r++) rates.push(100000 / cachePut());
const u1 = process.resourceUsage();
const t1 = threads();
rates.sort((a, b) => a - b);
const d = (k) => u1[k] - u0[k];
const puts = R * 100000;
const perThread = Object.keys(t1)
  .map((k) => `${k} ${(t1[k] - (t0[k] ?? 0)).toFixed(0)}`)
  .join(', ');
const huge = /^AnonHugePages:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'))?.[1];
console.log(
  `${root}: ${puts} puts, median ${rates[R >> 1].toFixed(0)} k/s; user ${(d('userCPUTime') / 1000).toFixed(0)} ms, ` +
    `system ${(d('systemCPUTime') / 1000).toFixed(0)} ms; minor faults ${d('minorPageFault')}, major ${d('majorPageFault')}; ` +
    `context switches ${d('voluntaryContextSwitches')} voluntary, ${d('involuntaryContextSwitches')} involuntary; ` +
    `CPU ms by thread: ${perThread}; AnonHugePages ${huge} kB`,
);
