// A writable in-memory pile's typed get and field() loops, alone or (RO=1) in a process whose
// read-only pile was read first by the same paths, as in compare-builds.cjs's rounds:
//   [RO=1] node beside-readonly.cjs ROOT [ROUNDS]
// prints the median wall-clock ms of each loop (100 k reads). Its use is the inlining trace
// (inlined.sh typedGet|field node beside-readonly.cjs ROOT): what TurboFan inlines into the
// writable pile's loops should not depend on RO (docs/benchmarks.md).
const path = require('path');
const fs = require('fs');
const os = require('os');
const root = process.argv[2];
const rounds = Number(process.argv[3] ?? 20);
const core = require(path.join(root, 'packages/core/dist/index.js'));
const { product, ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
const W = 100000;
let sink = 0;
const ptrs = new Float64Array(W);
const roPtrs = new Float64Array(W);
if (process.env.RO) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-beside-ro-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const w = core.openPile({ dir });
  const wv = w.schema('product', ProductSchema);
  for (let i = 0; i < W; i++) roPtrs[i] = wv.put(product(i));
  w.close();
  const ro = core.openPile({ dir, readonly: true });
  const rov = ro.schema('product', ProductSchema);
  (function roTypedGet() {
    for (let k = 0; k < 3; k++) for (let i = 0; i < W; i++) sink += rov.get(roPtrs[i]).id;
  })();
  (function roField() {
    for (let k = 0; k < 3; k++) for (let i = 0; i < W; i++) sink += rov.field(roPtrs[i], 'price');
  })();
}
const pile = core.openPile({});
const view = pile.schema('product', ProductSchema);
for (let i = 0; i < W; i++) ptrs[i] = view.put(product(i));
function typedGet() {
  for (let i = 0; i < W; i++) sink += view.get(ptrs[i]).id;
}
function field() {
  for (let i = 0; i < W; i++) sink += view.field(ptrs[i], 'price');
}
const tg = [];
const tf = [];
for (let r = 0; r < rounds; r++) {
  let t = performance.now();
  typedGet();
  tg.push(performance.now() - t);
  t = performance.now();
  field();
  tf.push(performance.now() - t);
}
const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
console.log(
  `read-only pile: ${process.env.RO ? 'yes' : 'no'}; typed get ${med(tg).toFixed(2)} ms, field() ${med(tf).toFixed(2)} ms per 100 k`,
);
if (sink === -1) console.log(sink);
