// The `multiprocess` workload's pile-costs peer alone (PileProcesses.pileCosts, with the workload's
// full parameters), for comparing two builds on the turn's cost without the two-process peers:
// node benchmarks/compare/turn-costs.cjs ROOT
// ROOT is a built checkout. Prints the time, ROOT and the per-put figures of "typed put, one per
// event-loop turn" (turn*) and "typed put in a loop" (put*): wall and CPU ns per put of the pile
// taking the writer turn (shared) and of one writing alone, and the medians of each round's
// difference (Extra) and ratio (Ratio); then the load average at start and end. Under load the CPU
// figures are the ones to compare: wall time per event-loop turn is mostly the scheduler's.
const path = require('path');
const root = process.argv[2];
const { pileCosts } = require(path.join(root, 'benchmarks/dist/PileProcesses.js'));
const params = { n: 1_000_000, getOps: 2_000_000, putOps: 200_000, turnOps: 50_000, costRounds: 6 };
const keys = ['turnWall_shared', 'turnWall_alone', 'turnWallExtra', 'turnWallRatio', 'turnCpu_shared', 'turnCpu_alone', 'turnCpuExtra'];
keys.push('putWallExtra', 'putCpuExtra', 'getWallRatio', 'loadStart', 'loadEnd');
void pileCosts(params).then((f) => {
  const pick = {};
  for (const k of keys) pick[k] = Number(f[k].toFixed(k.includes('Ratio') || k.startsWith('load') ? 3 : 0));
  console.log(new Date().toISOString().slice(11, 19), root, JSON.stringify(pick));
});
