// One loop of a build for count-instructions.sh: node instruction-loop.cjs ROOT OP N
// Instruction counts (valgrind callgrind) are the same run after run whatever else the machine is
// doing, so two builds can be compared to a fraction of a percent where wall-clock runs here can
// not resolve 5 % (docs/benchmarks.md). The script runs OP N times after a warm-up; the difference
// between two N is the cost of the extra operations.
//   genericPut  generic puts of the benchmark Product, into a fresh in-memory pile every 200 k
//               (as compare-builds.cjs's generic put)
//   typedPut    typed puts (view.put) of the benchmark Product through ProductSchema, into a fresh
//               in-memory pile every 200 k (as compare-builds.cjs's typed put)
//   genericGet  generic gets of 100 k stored Products, in order
//   typedGet    typed gets (view.get) of 100 k Products stored through the benchmark's ProductSchema
//   typedField  view.field(ptr, 'id') of the same records
//   genericSet  in-place generic sets of 100 k stored Products (the same value's size, so no link)
//   roGet, roTypedGet, roField  the generic get, typed get and field('id') of 100 k Products in a
//               mapped pile opened readonly: the reads that check the change sequence (docs/concurrency.md)
//   delPut      delete + generic put of the same Product, on 100 k stored
//   cachePut    replacing puts of random keys of a durable typed cache table of 200 k Products
//               (as compare-builds.cjs's cache put)
//   cacheGet    gets of random keys of the same table (every one a hit)
//   mappedPut   typed puts of the Product into a mapped pile (a directory under the system's
//               temporary one), a fresh pile every 200 k: what the writer turn adds
//   mappedDelPut delete + generic put of the same Product, on 100 k stored in a mapped pile
//   mapGet      Map.get of 100 k stored Product objects, in order: typedGet's peer (the heap it replaces)
//   mapValues   one pass of Map.values() over 100 k Products, reading .price (the gc workload's enumeration)
//   typedValues view.get of every one of 100 k typed records, in order, reading .price (its pile peer)
//   mappedGet   typed gets (view.get) in random order of 100 k Products typed-put into a mapped pile
//               opened writable (as compare-builds.cjs's mapped get, over fewer records)
const path = require('path');
const [root, op, nStr] = process.argv.slice(2);
const N = Number(nStr);
const core = require(path.join(root, 'packages/core/dist/index.js'));
const { product } = require(path.join(root, 'benchmarks/dist/Records.js'));
const W = 100000;
const ROUND = 200000;
const ptrs = new Float64Array(Math.max(W, ROUND));
let sink = 0;
function genericPut(n) {
  let pile;
  for (let i = 0; i < n; i++) {
    const j = i % ROUND;
    if (j === 0) {
      pile?.close();
      pile = core.openPile({});
    }
    ptrs[j] = pile.put(product(j));
  }
  pile?.close();
}
function typedPut(n) {
  const { ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
  let pile, view;
  for (let i = 0; i < n; i++) {
    const j = i % ROUND;
    if (j === 0) {
      pile?.close();
      pile = core.openPile({});
      view = pile.schema('product', ProductSchema);
    }
    ptrs[j] = view.put(product(j));
  }
  pile?.close();
}
function stored() {
  const pile = core.openPile({});
  for (let i = 0; i < W; i++) ptrs[i] = pile.put(product(i));
  return pile;
}
function genericGet(pile, n) {
  for (let i = 0; i < n; i++) sink += pile.get(ptrs[i % W]).id;
}
function delPut(pile, n) {
  for (let i = 0; i < n; i++) {
    const j = i % W;
    pile.delete(ptrs[j]);
    ptrs[j] = pile.put(product(j));
  }
}
function typedStored() {
  const { ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
  const pile = core.openPile({});
  const view = pile.schema('product', ProductSchema);
  for (let i = 0; i < W; i++) ptrs[i] = view.put(product(i));
  return view;
}
function typedGet(view, n) {
  for (let i = 0; i < n; i++) sink += view.get(ptrs[i % W]).id;
}
function typedField(view, n) {
  for (let i = 0; i < n; i++) sink += view.field(ptrs[i % W], 'id');
}
function genericSet(pile, n) {
  for (let i = 0; i < n; i++) pile.set(ptrs[i % W], product(i % W));
}
function readonlyStored(typed) {
  const fs = require('fs');
  const os = require('os');
  const { ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-icount-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const w = core.openPile({ dir });
  const wv = w.schema('product', ProductSchema);
  for (let i = 0; i < W; i++) ptrs[i] = typed ? wv.put(product(i)) : w.put(product(i));
  w.close();
  const pile = core.openPile({ dir, readonly: true });
  return { pile, view: pile.schema('product', ProductSchema) };
}
if (op === 'roGet' || op === 'roTypedGet' || op === 'roField') {
  const { pile, view } = readonlyStored(op !== 'roGet');
  const run = (n) => (op === 'roGet' ? genericGet(pile, n) : op === 'roTypedGet' ? typedGet(view, n) : typedField(view, n));
  run(W);
  run(N);
} else if (op === 'mapGet' || op === 'mapValues') {
  const m = new Map();
  for (let i = 0; i < W; i++) m.set(i, product(i));
  const get = (n) => {
    for (let i = 0; i < n; i++) sink += m.get(i % W).id;
  };
  // Passes of W records, so N is a multiple of W for this loop.
  const values = (n) => {
    for (let r = 0; r < n / W; r++) for (const v of m.values()) sink += v.price;
  };
  const f = op === 'mapGet' ? get : values;
  f(W);
  f(N);
} else if (op === 'typedValues') {
  const view = typedStored();
  const values = (n) => {
    for (let r = 0; r < n / W; r++) for (let i = 0; i < W; i++) sink += view.get(ptrs[i]).price;
  };
  values(W);
  values(N);
} else if (op === 'typedGet' || op === 'typedField') {
  const view = typedStored();
  const f = op === 'typedGet' ? typedGet : typedField;
  f(view, W);
  f(view, N);
} else if (op === 'genericSet') {
  const pile = stored();
  genericSet(pile, W);
  genericSet(pile, N);
} else if (op === 'genericPut') {
  genericPut(2 * ROUND);
  genericPut(N);
} else if (op === 'typedPut') {
  typedPut(2 * ROUND);
  typedPut(N);
} else if (op === 'genericGet' || op === 'delPut') {
  const pile = stored();
  const f = op === 'genericGet' ? genericGet : delPut;
  f(pile, W);
  f(pile, N);
} else if (op === 'cachePut' || op === 'cacheGet') {
  const cacheMod = require(path.join(root, 'packages/cache/dist/index.js'));
  const { ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
  const K = 200000;
  const table = cacheMod.openCache().table('products', { schema: ProductSchema, collisionMode: 'durable' });
  const keys = [];
  for (let i = 0; i < K; i++) keys.push('product:' + i);
  for (let i = 0; i < K; i++) table.put(keys[i], product(i));
  let s = 12345;
  const replace = (n) => {
    for (let i = 0; i < n; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      table.put(keys[s % K], product(s % K));
    }
  };
  const read = (n) => {
    for (let i = 0; i < n; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      sink += table.get(keys[s % K]).id;
    }
  };
  const run = op === 'cachePut' ? replace : read;
  run(W);
  run(N);
} else if (op === 'mappedGet') {
  const fs = require('fs');
  const os = require('os');
  const { ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-iloop-'));
  try {
    const pile = core.openPile({ dir });
    const view = pile.schema('product', ProductSchema);
    for (let i = 0; i < W; i++) ptrs[i] = view.put(product(i));
    let s = 12345;
    const read = (n) => {
      for (let i = 0; i < n; i++) {
        s = (Math.imul(s, 1103515245) + 12345) >>> 0;
        sink += view.get(ptrs[s % W]).price;
      }
    };
    read(W);
    read(N);
    pile.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
} else if (op === 'mappedPut' || op === 'mappedDelPut') {
  const fs = require('fs');
  const os = require('os');
  const { ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-iloop-'));
  let round = 0;
  // Builds older than checkpoints (6fa42f2, the reference build of the 5 % bar in docs/benchmarks.md) refuse the option.
  const open = () => {
    const dir = path.join(base, String(round++));
    try {
      return core.openPile({ dir, checkpointInterval: 0 });
    } catch (e) {
      if (e.code !== 'PILE_INVALID_OPTION') throw e;
      return core.openPile({ dir });
    }
  };
  try {
    if (op === 'mappedPut') {
      const typedPuts = (n) => {
        let pile;
        let view;
        for (let i = 0; i < n; i++) {
          const j = i % ROUND;
          if (j === 0) {
            pile?.close();
            pile = open();
            view = pile.schema('product', ProductSchema);
          }
          ptrs[j] = view.put(product(j));
        }
        pile?.close();
      };
      typedPuts(2 * ROUND);
      typedPuts(N);
    } else {
      const pile = open();
      for (let i = 0; i < W; i++) ptrs[i] = pile.put(product(i));
      delPut(pile, W);
      delPut(pile, N);
      pile.close();
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
} else
  throw new Error(
    `unknown op ${op}: genericPut, typedPut, genericGet, typedGet, typedField, genericSet, roGet, roTypedGet, roField, delPut, cachePut, cacheGet, mappedPut, mappedDelPut or mappedGet`,
  );
if (sink === -1) console.log(sink);
