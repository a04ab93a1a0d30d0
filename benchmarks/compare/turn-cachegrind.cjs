// One 32-character string put per event-loop turn, N turns, for cachegrind:
//   ROOT=<build> valgrind --tool=cachegrind --cache-sim=yes node --single-threaded benchmarks/compare/turn-cachegrind.cjs N
// A pile that takes the writer turn (pile.coord mapped as shared memory), or with ALONE=1 one that
// writes alone (WebAssembly hidden for its open, as the `multiprocess` workload does). Run at two
// N (25,000 and 45,000) and divide the differences by 20,000: start-up and compilation cancel out.
'use strict';
const path = require('path'),
  fs = require('fs'),
  os = require('os');
const { openPile } = require(path.join(process.env.ROOT ?? path.join(__dirname, '..', '..'), 'packages/core/dist/index.js'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-cg-'));
let pile;
if (process.env.ALONE) {
  const real = globalThis.WebAssembly;
  globalThis.WebAssembly = undefined;
  pile = openPile({ dir, checkpointInterval: 0 });
  globalThis.WebAssembly = real;
} else pile = openPile({ dir, checkpointInterval: 0 });
const s = 'x'.repeat(32);
const N = Number(process.argv[2] ?? 25000);
(async () => {
  for (let i = 0; i < N; i++) {
    pile.put(s);
    await new Promise((resolve) => setImmediate(resolve));
  }
  pile.close();
  fs.rmSync(dir, { recursive: true, force: true });
})();
