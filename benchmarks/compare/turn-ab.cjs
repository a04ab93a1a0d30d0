// Two builds in one process, on one typed put per event-loop turn:
// node benchmarks/compare/turn-ab.cjs ROOT_A ROOT_B [turns] [rounds]
// For each build, a mapped pile that takes the writer turn (shared) and one that writes alone (as
// the `multiprocess` workload's: WebAssembly hidden for its open); each variant puts one typed
// record and awaits a setImmediate, `turns` times; the four variants alternate in every round
// (order reversed every other round). Prints, per build, the medians of the process's CPU ns per put
// (user + system, process.cpuUsage()) and of each round's shared - alone. One process for both builds, so
// that both meet the same machine and the same JIT flags; the figure to compare is the difference.
'use strict';
const path = require('path'),
  fs = require('fs'),
  os = require('os');
const roots = process.argv.slice(2, 4);
const N = Number(process.argv[4] ?? 4000),
  ROUNDS = Number(process.argv[5] ?? 41);
// getrusage (µs, exact): /proc/thread-self/schedstat moves in 4 ms steps on this machine (the tick), too coarse for a round of a few ms.
const cpuNs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-turn-ab-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
const tick = () => new Promise((r) => setImmediate(r));
const variants = {};
roots.forEach((root, b) => {
  const core = require(path.join(root, 'packages/core/dist/index.js'));
  const { product, ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
  const real = globalThis.WebAssembly;
  globalThis.WebAssembly = undefined;
  const alone = core.openPile({ dir: path.join(tmp, b + 'alone'), checkpointInterval: 0 });
  globalThis.WebAssembly = real;
  const shared = core.openPile({ dir: path.join(tmp, b + 'shared'), checkpointInterval: 0 });
  for (const [name, pile] of [
    ['alone', alone],
    ['shared', shared],
  ]) {
    const v = pile.schema('product', ProductSchema);
    let k = 0;
    for (let i = 0; i < 1000; i++) v.put(product(k++));
    variants[`${b}:${name}`] = async () => {
      for (let i = 0; i < N; i++) {
        v.put(product(k++));
        await tick();
      }
    };
  }
});
const names = Object.keys(variants);
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
(async () => {
  const l0 = os.loadavg()[0];
  const cpu = {};
  for (let r = 0; r < ROUNDS; r++)
    for (const n of r % 2 ? [...names].reverse() : names) {
      await tick();
      const c0 = cpuNs();
      await variants[n]();
      (cpu[n] ??= []).push((cpuNs() - c0) / N);
    }
  console.log(
    `${new Date().toISOString().slice(11, 19)} load ${l0.toFixed(2)} -> ${os.loadavg()[0].toFixed(2)}, ${N} turns x ${ROUNDS} rounds`,
  );
  roots.forEach((root, b) => {
    const d = cpu[`${b}:shared`].map((v, i) => v - cpu[`${b}:alone`][i]);
    console.log(
      `  ${root}: alone ${med(cpu[`${b}:alone`]).toFixed(0)}, shared ${med(cpu[`${b}:shared`]).toFixed(0)} ns CPU per put; shared - alone per round: median ${med(d).toFixed(0)} ns`,
    );
  });
})();
