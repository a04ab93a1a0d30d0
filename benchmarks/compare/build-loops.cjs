// The timed loops of one build for compare-builds.cjs: this file is copied once per build, so that each
// build's loops have their own type feedback (closures of one source share it). Usage: see compare-builds.cjs.
const path = require('path'),
  fs = require('fs'),
  os = require('os');
// COMPARE_CLOCK=cpu times each loop by the process's CPU time (process.cpuUsage(): user + system of
// all its threads) instead of the wall clock: on a machine loaded by other processes, the time the
// process waits for a core drops out of the figure, while work done for the loop on other threads
// (a pool job faulting pages in, a GC helper) still counts.
const cpuClock = process.env.COMPARE_CLOCK === 'cpu';
// ONLY=mappedPut runs only the mapped put loop, ONLY=cache only the cache loops. NO_RO=1 leaves out the read-only open and its loops: a read-only pile (whose reads check the
// change sequence) in the same process slows the writable piles' typed get and field(), for a
// reason not yet found (docs/benchmarks.md).
/** Milliseconds: the wall clock, or the process's CPU time (see COMPARE_CLOCK). */
const now = cpuClock
  ? () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    }
  : () => performance.now();
module.exports = function make(root) {
  const core = require(path.join(root, 'packages/core/dist/index.js'));
  const cacheMod = require(path.join(root, 'packages/cache/dist/index.js'));
  const rec = require(path.join(root, 'benchmarks/dist/Records.js'));
  const { product, ProductSchema } = rec;
  const N = 200000,
    M = 500000,
    K = 200000;
  let sink = 0;
  const ptrs = new Float64Array(N);
  // Typed puts into a fresh mapped pile (what the writer turn costs an uncontended put).
  function mappedPut() {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'pair-put-'));
    try {
      // Builds older than checkpoints (6fa42f2, the reference build of the 5 % bar in docs/benchmarks.md) refuse the option.
      let p;
      try {
        p = core.openPile({ dir: d, checkpointInterval: 0 });
      } catch (e) {
        if (e.code !== 'PILE_INVALID_OPTION') throw e;
        p = core.openPile({ dir: d });
      }
      const v = p.schema('product', ProductSchema);
      const t = now();
      for (let i = 0; i < N; i++) ptrs[i] = v.put(product(i));
      const dt = now() - t;
      p.close();
      return dt;
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  }
  // ONLY=mappedPut times that loop alone (and skips building the other loops' piles).
  if (process.env.ONLY === 'mappedPut') return () => ({ mappedPut: N / mappedPut() });
  // mapped pile for random gets, built once
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pair-'));
  const mp = core.openPile({ dir });
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const mv = mp.schema('product', ProductSchema);
  const mptrs = new Float64Array(M);
  for (let i = 0; i < M; i++) mptrs[i] = mv.put(product(i));
  // The same records read through a read-only open of a copy (a read-only open may not sit beside
  // the writer above): its reads check the change sequence (docs/concurrency.md, "Checked reads").
  const roDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pair-ro-'));
  process.on('exit', () => fs.rmSync(roDir, { recursive: true, force: true }));
  const rw = core.openPile({ dir: roDir });
  const rwv = rw.schema('product', ProductSchema);
  const roPtrs = new Float64Array(M);
  for (let i = 0; i < M; i++) roPtrs[i] = i % 2 === 0 ? rwv.put(product(i)) : rw.put(product(i));
  rw.close();
  const ro = process.env.NO_RO ? undefined : core.openPile({ dir: roDir, readonly: true });
  const rov = ro === undefined ? undefined : ro.schema('product', ProductSchema);
  const order = new Uint32Array(1000000);
  let s = 12345;
  for (let i = 0; i < order.length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    order[i] = s % M;
  }
  const cache = cacheMod.openCache();
  const table = cache.table('products', { schema: ProductSchema, collisionMode: 'durable' });
  const key = (i) => 'product:' + i;
  const keys = [];
  for (let i = 0; i < K; i++) keys.push(key(i));
  for (let i = 0; i < K; i++) table.put(keys[i], product(i));
  function typedPut(view) {
    const t = now();
    for (let i = 0; i < N; i++) ptrs[i] = view.put(product(i));
    return now() - t;
  }
  function typedGet(view) {
    const t = now();
    for (let i = 0; i < N; i++) {
      const v = view.get(ptrs[i]);
      if (v.id !== i) throw new Error('bad');
      sink += v.price;
    }
    return now() - t;
  }
  function field(view) {
    const t = now();
    for (let i = 0; i < N; i++) sink += view.field(ptrs[i], 'price');
    return now() - t;
  }
  function genPut(pile) {
    const t = now();
    for (let i = 0; i < N; i++) ptrs[i] = pile.put(product(i));
    return now() - t;
  }
  function genGet(pile) {
    const t = now();
    for (let i = 0; i < N; i++) {
      const v = pile.get(ptrs[i]);
      if (v.id !== i) throw new Error('bad');
      sink += v.price;
    }
    return now() - t;
  }
  function mappedGet() {
    const t = now();
    for (let i = 0; i < 300000; i++) {
      const j = order[i];
      const v = mv.get(mptrs[j]);
      if (v.id !== j) throw new Error('bad');
      sink += v.price;
    }
    return now() - t;
  }
  function roTypedGet() {
    const t = now();
    for (let i = 0; i < 300000; i++) {
      const j = order[i] & ~1;
      const v = rov.get(roPtrs[j]);
      if (v.id !== j) throw new Error('bad');
      sink += v.price;
    }
    return now() - t;
  }
  function roGenericGet() {
    const t = now();
    for (let i = 0; i < 300000; i++) {
      const j = order[i] | 1;
      if (j >= M) continue;
      const v = ro.get(roPtrs[j]);
      if (v.id !== j) throw new Error('bad');
      sink += v.price;
    }
    return now() - t;
  }
  function roField() {
    const t = now();
    for (let i = 0; i < 300000; i++) sink += rov.field(roPtrs[order[i] & ~1], 'price');
    return now() - t;
  }
  function cacheGet() {
    const t = now();
    for (let i = 0; i < 300000; i++) {
      const j = order[i] % K;
      const v = table.get(keys[j]);
      if (v.id !== j) throw new Error('bad');
      sink += v.price;
    }
    return now() - t;
  }
  function cachePut() {
    const t = now();
    for (let i = 0; i < 100000; i++) {
      const j = order[i + 300000] % K;
      table.put(keys[j], product(j));
    }
    return now() - t;
  }
  return function round() {
    const r = {};
    if (process.env.ONLY === 'cache') {
      r.cacheGet = 300000 / cacheGet();
      r.cachePut = 100000 / cachePut();
      return r;
    }
    let p = core.openPile({});
    let v = p.schema('product', ProductSchema);
    r.typedPut = N / typedPut(v);
    r.typedGet = N / typedGet(v);
    r.field = N / field(v);
    p.close();
    p = core.openPile({});
    r.genericPut = N / genPut(p);
    r.genericGet = N / genGet(p);
    p.close();
    r.mappedGet = 300000 / mappedGet();
    r.mappedPut = N / mappedPut();
    if (ro !== undefined) {
      r.roTypedGet = 300000 / roTypedGet();
      r.roGenericGet = 300000 / roGenericGet();
      r.roField = 300000 / roField();
    }
    r.cacheGet = 300000 / cacheGet();
    r.cachePut = 100000 / cachePut();
    if (sink === -1) console.log(sink); // keeps the reads from being optimised away
    return r;
  };
};
