// The writer turn's pieces in a synchronous loop, on one mapped pile of ROOT's build:
// node benchmarks/compare/turn-pieces.cjs ROOT
// Prints ns per iteration (median and minimum of 7 loops of 2 M) of: the mutex's tryLock + unlock
// (two Node-API calls; from pile.coord layout 8 on, the turn's word: two compareExchange), SharedState.publish, and the take + leave + release of the turn that a
// write per event-loop turn pays (without the Immediate that releases it there), then the load
// average. Reaches into the pile's internals (turn, coord), so it follows their names.
const path = require('path'),
  fs = require('fs'),
  os = require('os');
const root = process.argv[2];
const core = require(path.join(root, 'packages/core/dist/index.js'));
const { product, ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-turn-pieces-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const pile = core.openPile({ dir, checkpointInterval: 0 });
const view = pile.schema('product', ProductSchema);
for (let i = 0; i < 1000; i++) view.put(product(i));
const turn = pile.turn;
turn.release();
// Layout 8 on: the turn's word (TurnLock) in place of the writer mutex.
const word = pile.coord.turnLock;
const mutex = pile.coord.mutex ?? { tryLock: () => word.tryTake(), unlock: () => word.release() };
const N = 2e6;
function timed(name, fn) {
  const r = [];
  for (let k = 0; k < 7; k++) {
    const t0 = process.hrtime.bigint();
    fn(N);
    r.push(Number(process.hrtime.bigint() - t0) / N);
  }
  r.sort((a, b) => a - b);
  console.log(`${name.padEnd(36)} ${r[3].toFixed(1)} ns (min ${r[0].toFixed(1)})`);
}
timed('tryLock + unlock', (n) => {
  for (let i = 0; i < n; i++) {
    mutex.tryLock();
    mutex.unlock();
  }
});
mutex.tryLock();
timed('SharedState.publish', (n) => {
  for (let i = 0; i < n; i++) turn.host.publish();
});
mutex.unlock();
timed('take + leave + release of the turn', (n) => {
  for (let i = 0; i < n; i++) {
    turn.enter();
    turn.leave();
    turn.release();
  }
});
console.log(`load ${os.loadavg()[0].toFixed(2)}`);
pile.close();
