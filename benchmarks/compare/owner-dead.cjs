// The lock-holder-killed bar, the lock alone: node benchmarks/compare/owner-dead.cjs [N] [ROOT]
// N times, a child process locks the robust mutex of a file (as pile.coord's writer mutex) and is
// SIGKILLed while it holds it; another child, sleeping in lock() meanwhile, gets MUTEX.OWNER_DEAD.
// Prints how long from kill() to that lock() returning (median, p99, max): the kernel's robust-futex
// clean-up and wake-up, without the repair a pile then runs (multi-writer.test.ts reports that whole).
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const readline = require('readline');
const N = Number(process.argv[2] ?? 200);
const root = path.resolve(process.argv[3] ?? path.join(__dirname, '..', '..'));
const nativePath = JSON.stringify(path.join(root, 'packages/native/dist/index.js'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-owner-dead-'));
const file = path.join(dir, 'mutex');
fs.writeFileSync(file, Buffer.alloc(65536));
const open = `const { native } = require(${nativePath}); const fs = require('fs');
  const fd = fs.openSync(${JSON.stringify(file)}, 'r+'); const m = new native.SharedMapping(fd, 65536, 0);
  const mutex = new native.SharedMutex(m, 64); const now = () => performance.timeOrigin + performance.now();`;
const init = spawn(process.execPath, ['-e', `${open} mutex.init();`], { stdio: 'inherit' });
// The waiter: on each line from stdin, says it is about to wait, locks (sleeping), and reports when it got the lock.
const waiterCode = `${open} require('readline').createInterface({ input: process.stdin }).on('line', () => {
  process.stdout.write('waiting\\n'); const r = mutex.lock(); const t = now();
  if (r === native.MUTEX.OWNER_DEAD) mutex.consistent(); mutex.unlock();
  process.stdout.write(JSON.stringify({ t, ownerDead: r === native.MUTEX.OWNER_DEAD }) + '\\n'); });`;
const holderCode = `${open} mutex.lock(); process.stdout.write('held\\n'); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 600000);`;

function lines(child) {
  const it = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return async () => (await it.next()).value;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
  await new Promise((r) => init.on('close', r));
  const waiter = spawn(process.execPath, ['-e', waiterCode], { stdio: ['pipe', 'pipe', 'inherit'] });
  const fromWaiter = lines(waiter);
  const ms = [];
  let ownerDead = 0;
  for (let i = 0; i < N; i++) {
    const holder = spawn(process.execPath, ['-e', holderCode], { stdio: ['ignore', 'pipe', 'inherit'] });
    if ((await lines(holder)()) !== 'held') throw new Error('holder did not lock');
    waiter.stdin.write('go\n');
    if ((await fromWaiter()) !== 'waiting') throw new Error('waiter did not start');
    await sleep(20); // the waiter is asleep in lock() by now
    const t0 = performance.timeOrigin + performance.now();
    holder.kill('SIGKILL');
    const got = JSON.parse(await fromWaiter());
    ms.push(got.t - t0);
    if (got.ownerDead) ownerDead++;
    await new Promise((r) => (holder.exitCode !== null || holder.signalCode !== null ? r() : holder.on('close', r)));
  }
  waiter.stdin.end();
  ms.sort((a, b) => a - b);
  const at = (f) => ms[Math.min(ms.length - 1, Math.floor(f * ms.length))].toFixed(2);
  console.log(
    `${N} holders SIGKILLed while holding; OWNER_DEAD ${ownerDead} times; kill() to the waiter's lock() returning: median ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${ms[ms.length - 1].toFixed(2)} ms, over 100 ms ${ms.filter((x) => x > 100).length} (load ${os.loadavg()[0].toFixed(1)})`,
  );
  fs.rmSync(dir, { recursive: true, force: true });
})();
