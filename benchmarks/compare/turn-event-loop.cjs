// What one write per event-loop turn pays for the writer turn, piece by piece, on ROOT's build:
// node benchmarks/compare/turn-event-loop.cjs ROOT [turns] [rounds]
// Each variant runs `turns` event-loop turns (each awaits a setImmediate, as the `multiprocess`
// workload's "one per event-loop turn" loop does) and makes, once per turn, only what its name
// says; the variants alternate in every round (the order reversed every other round). Printed per
// variant: the median over the rounds of the process's CPU ns per event-loop turn (user + system,
// process.cpuUsage(): other processes are not counted) and the median
// of each round's difference from REF (default `empty`, a turn that does nothing; `REF=alone` to
// compare the puts). VARIANTS=a,b,... runs a subset. The pieces are measured once per event-loop
// turn on purpose: with caches cold after the event loop's own work they cost several times what
// they cost in a tight loop. Reaches into the pile's internals (turn, coord), so it follows their names.
//   empty        nothing but the turn itself
//   immediate    one more setImmediate (the turn's release is one)
//   napiMethods  the writer mutex's tryLock() + unlock() methods (two Node-API calls, napi_unwrap each;
//                builds before pile.coord layout 8 only)
//   word         the turn's word (layout 8 on): TurnLock.tryTake() + release(), two compareExchange
//   microtask    one Promise.then (the turn's release is one, layout 8 on)
//   publish      SharedState.publish (the turn held throughout)
//   turn         the writer turn's enter + leave, released by its own Immediate, without a put
//   alone        a typed put into a pile that writes alone (no turn, as every mapped pile wrote before the writer turn)
//   shared       a typed put into a pile that takes the writer turn
//   sharedHeld   the same with the turn held across the turns (as inside a batch): the put's own cost
//   robustMutex  lock() + unlock() of @pile/native's SharedMutex (a process-shared robust pthread
//                mutex, the writer lock first specified for Pile) in a scratch file: a bare lock per
//                write, for scale
'use strict';
const path = require('path'),
  fs = require('fs'),
  os = require('os');
const root = process.argv[2];
const N = Number(process.argv[3] ?? 4000);
const ROUNDS = Number(process.argv[4] ?? 41);
const core = require(path.join(root, 'packages/core/dist/index.js'));
const { product, ProductSchema } = require(path.join(root, 'benchmarks/dist/Records.js'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-turn-event-loop-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

/** As the `multiprocess` workload's pile writing alone: SharedMapping fails without WebAssembly. */
function openAlone(dir) {
  const real = globalThis.WebAssembly;
  globalThis.WebAssembly = undefined;
  try {
    return core.openPile({ dir, checkpointInterval: 0 });
  } finally {
    globalThis.WebAssembly = real;
  }
}
// getrusage (µs, exact): /proc/thread-self/schedstat moves in 4 ms steps on this machine (the tick), too coarse for a round of a few ms.
const cpuNs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
};
const shared = core.openPile({ dir: path.join(tmp, 'shared'), checkpointInterval: 0 });
const alone = openAlone(path.join(tmp, 'alone'));
const vs = shared.schema('product', ProductSchema);
const va = alone.schema('product', ProductSchema);
for (let i = 0; i < 1000; i++) {
  vs.put(product(i));
  va.put(product(i));
}
const native = require(path.join(root, 'packages/native')).native;
const scratch = path.join(tmp, 'mutex');
fs.writeFileSync(scratch, Buffer.alloc(65536));
const scratchFd = fs.openSync(scratch, 'r+');
const robust = new native.SharedMutex(new native.SharedMapping(scratchFd, 65536, 0, scratch), 0, scratch);
robust.init();
const turn = shared.turn;
const mutex = shared.coord.mutex;
const word = shared.coord.turnLock;
const lock = mutex ?? { tryLock: () => word.tryTake(), unlock: () => word.release() };
const settled = Promise.resolve();
let k = 1000;
const tick = () => new Promise((resolve) => setImmediate(resolve));
const noop = () => {};
const variants = {
  empty: async () => {
    for (let i = 0; i < N; i++) await tick();
  },
  immediate: async () => {
    for (let i = 0; i < N; i++) {
      setImmediate(noop);
      await tick();
    }
  },
  napiMethods: async () => {
    for (let i = 0; i < N; i++) {
      mutex.tryLock();
      mutex.unlock();
      await tick();
    }
  },
  word: async () => {
    for (let i = 0; i < N; i++) {
      word.tryTake();
      word.release();
      await tick();
    }
  },
  microtask: async () => {
    for (let i = 0; i < N; i++) {
      void settled.then(noop);
      await tick();
    }
  },
  publish: async () => {
    lock.tryLock();
    try {
      for (let i = 0; i < N; i++) {
        turn.host.publish();
        await tick();
      }
    } finally {
      lock.unlock();
    }
  },
  turn: async () => {
    for (let i = 0; i < N; i++) {
      turn.enter();
      turn.leave();
      await tick();
    }
  },
  alone: async () => {
    for (let i = 0; i < N; i++) {
      va.put(product(k++));
      await tick();
    }
  },
  shared: async () => {
    for (let i = 0; i < N; i++) {
      vs.put(product(k++));
      await tick();
    }
  },
  sharedHeld: async () => {
    turn.enter();
    try {
      for (let i = 0; i < N; i++) {
        vs.put(product(k++));
        await tick();
      }
    } finally {
      turn.leave();
      turn.release();
    }
  },
  robustMutex: async () => {
    for (let i = 0; i < N; i++) {
      robust.lock();
      robust.unlock();
      await tick();
    }
  },
};
if (mutex === undefined) delete variants.napiMethods;
if (word === undefined) delete variants.word;
const names = (process.env.VARIANTS ? process.env.VARIANTS.split(',') : Object.keys(variants)).filter((n) => n in variants);
const ref = process.env.REF ?? 'empty';
if (!names.includes(ref)) names.unshift(ref);
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
void (async () => {
  const loadStart = os.loadavg()[0];
  const cpu = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of r % 2 === 0 ? names : [...names].reverse()) {
      await tick(); // the turn a variant left held is released before the next one starts
      const c0 = cpuNs();
      await variants[name]();
      (cpu[name] ??= []).push((cpuNs() - c0) / N);
    }
  }
  console.log(
    `${new Date().toISOString().slice(11, 19)} ${root}: ${N} event-loop turns x ${ROUNDS} rounds, load ${loadStart.toFixed(2)} -> ${os.loadavg()[0].toFixed(2)}`,
  );
  for (const name of names) {
    const d = cpu[name].map((v, i) => v - cpu[ref][i]);
    console.log(
      `  ${name.padEnd(12)} ${med(cpu[name]).toFixed(0).padStart(6)} ns CPU per turn, ${ref === name ? '' : `- ${ref}: ${med(d).toFixed(0).padStart(5)} ns`}`,
    );
  }
  shared.close();
  alone.close();
})();
