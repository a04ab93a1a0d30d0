// Compares builds of this repository in ONE process: node benchmarks/compare/compare-builds.cjs ROUNDS ROOT1 ROOT2 ...
// Each ROOT is a built checkout (packages/*/dist and benchmarks/dist present). Every round runs each build's loops
// (build-loops.cjs) in a rotating order; a figure is the median over rounds of build_i / build_1 in the same round,
// so a machine that slows down for seconds at a time slows both sides of a ratio alike. COMPARE_CLOCK=cpu times
// by the process's CPU time instead of the wall clock (build-loops.cjs). See docs/benchmarks.md.
const fs = require('fs');
const os = require('os');
const path = require('path');
const R = Number(process.argv[2]);
const roots = process.argv.slice(3);
const builds = roots.map((root, i) => {
  const f = path.join(os.tmpdir(), `pile-build-loops-${process.pid}-${i}.cjs`);
  fs.copyFileSync(path.join(__dirname, 'build-loops.cjs'), f);
  const make = require(f);
  fs.unlinkSync(f);
  return make(root);
});
const res = roots.map(() => ({}));
for (let r = 0; r < R + 2; r++) {
  const out = new Array(roots.length);
  for (let j = 0; j < roots.length; j++) {
    const i = (j + r) % roots.length;
    out[i] = builds[i]();
  }
  if (r < 2) continue;
  for (let i = 0; i < roots.length; i++)
    for (const k in out[i]) {
      res[i][k] ||= { abs: [], rel: [] };
      res[i][k].abs.push(out[i][k]);
      res[i][k].rel.push(out[i][k] / out[0][k]);
    }
}
const med = (x) => {
  const s = [...x].sort((p, q) => p - q);
  return s[s.length >> 1];
};
const q = (x, f) => {
  const s = [...x].sort((p, q) => p - q);
  return s[Math.floor(f * (s.length - 1))];
};
console.log('builds:', roots.join(' '), 'rounds:', R);
for (const k in res[0]) {
  let line = k.padEnd(11) + ' ' + med(res[0][k].abs).toFixed(1).padStart(8) + ' k/s';
  for (let i = 1; i < roots.length; i++)
    line += `  ${roots[i].split('/').pop()}/${roots[0].split('/').pop()} ${med(res[i][k].rel).toFixed(3)} [${q(res[i][k].rel, 0.25).toFixed(3)}..${q(res[i][k].rel, 0.75).toFixed(3)}]`;
  console.log(line);
}
