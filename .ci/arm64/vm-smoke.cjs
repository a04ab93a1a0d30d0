// Runs inside the arm64 VM of .ci/arm64-check (a real Linux kernel under qemu-system-aarch64),
// where what qemu-user can not emulate works: robust mutexes (set_robust_list), mremap of a shared
// mapping with old size 0 (SharedMutex and Futex map their own page that way), futex wakes across
// processes. Plain JS over the packages as npm installed them for linux-arm64.
'use strict';
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const app = path.join(__dirname, 'node_modules');
const NATIVE = JSON.stringify(path.join(app, '@pile', 'native'));
const CORE = JSON.stringify(path.join(app, '@pile', 'core'));
const { native } = require(path.join(app, '@pile', 'native'));
const { openPile } = require(path.join(app, '@pile', 'core'));
const { LOCKED, OWNER_DEAD } = native.MUTEX;

/** A child Node running `script`, with a promise for each stdout line it waits for. */
function child(script) {
  const proc = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (d) => (out += d));
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
  return {
    proc,
    lines: () => out.split('\n').slice(0, -1),
    async until(test, what) {
      const deadline = Date.now() + 300_000;
      while (!test(out.split('\n').slice(0, -1))) {
        if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`child exited before ${what}`);
        if (Date.now() > deadline) throw new Error(`no ${what} from the child in 300 s`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    async kill() {
      proc.kill('SIGKILL');
      return exited;
    },
    exited,
  };
}

async function step(name, fn) {
  const t = Date.now();
  await fn();
  console.log(`arm64 vm: ${name}: ok (${Date.now() - t} ms)`);
}

async function main() {
  console.log(
    `arm64 vm: Node ${process.version} ${process.platform}-${process.arch}, binary ${require('node-gyp-build').path(path.join(app, '@pile', 'native'))}`,
  );
  const tmp = fs.mkdtempSync('/tmp/pile-vm-');
  const file = path.join(tmp, 'coord');
  const fd = fs.openSync(file, 'w+');
  native.reserve(fd, 65536);
  const mapping = new native.Mapping(fd, 65536, 0, true, file);
  fs.closeSync(fd);

  await step('a SharedMutex holder killed with SIGKILL: the next locker gets OWNER_DEAD, then it works as before', async () => {
    const mutex = new native.SharedMutex(mapping, 64, file);
    mutex.init();
    const holder = child(`const { native } = require(${NATIVE}); const fs = require('node:fs');
      const fd = fs.openSync(${JSON.stringify(file)}, 'r+'); const m = new native.Mapping(fd, 65536, 0, true); fs.closeSync(fd);
      const mutex = new native.SharedMutex(m, 64);
      if (mutex.lock() !== native.MUTEX.LOCKED) process.exit(3);
      process.stdout.write('locked\\n'); setInterval(() => {}, 1000);`);
    await holder.until((l) => l.includes('locked'), "'locked'");
    assert.strictEqual(mutex.tryLock(), native.MUTEX.BUSY);
    assert.strictEqual(await holder.kill(), 'SIGKILL');
    assert.strictEqual(mutex.lock(), OWNER_DEAD);
    mutex.consistent();
    mutex.unlock();
    assert.strictEqual(mutex.lock(), LOCKED);
    mutex.unlock();
    mutex.close();
  });

  await step('a Futex wake in one process wakes a waiter in another', async () => {
    const futex = new native.Futex(mapping, 0, file);
    const waiter = child(`const { native } = require(${NATIVE}); const fs = require('node:fs');
      const fd = fs.openSync(${JSON.stringify(file)}, 'r+'); const m = new native.Mapping(fd, 65536, 0, true); fs.closeSync(fd);
      const f = new native.Futex(m, 0); process.stdout.write('waiting\\n'); process.stdout.write(f.wait(0, 240000) + '\\n');`);
    await waiter.until((l) => l.includes('waiting'), "'waiting'");
    // The waiter may not sleep yet: wake until it answers.
    while (!waiter.lines().includes('ok')) {
      mapping.buffer.writeUInt32LE(0, 0);
      futex.wake(1);
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.strictEqual(await waiter.exited, 0);
    futex.close();
  });

  await step(
    'a writer killed with SIGKILL while it holds the writer turn: the other writer takes the turn over and repairs, no acknowledged put lost',
    async () => {
      const dir = path.join(tmp, 'pile');
      const keeper = openPile({ dir, segmentSize: 1 << 20 });
      keeper.put('keeper');
      await new Promise((r) => setImmediate(r)); // the turn is released at the end of this event-loop turn
      const writer = child(`const { openPile } = require(${CORE}); const fs = require('node:fs');
      const pile = openPile({ dir: ${JSON.stringify(dir)}, segmentSize: 1 << 20 });
      // One synchronous loop: the turn is held from the first put until the kill.
      for (let i = 0; ; i++) { const p = pile.put({ i }); fs.writeSync(1, i + ' ' + p + '\\n'); }`);
      await writer.until((l) => l.length >= 500, '500 puts');
      assert.strictEqual(await writer.kill(), 'SIGKILL');
      const acked = writer.lines().map((l) => l.split(' ').map(Number));
      const p = keeper.put('after the kill'); // waits for the dead holder's turn, takes it over
      assert.strictEqual(keeper.lastRecovery.ran, true, 'the keeper repaired after the dead holder');
      for (const [i, ptr] of acked) assert.deepStrictEqual(keeper.get(ptr), { i });
      assert.strictEqual(keeper.get(p), 'after the kill');
      assert.strictEqual(keeper.verify().ok, true);
      keeper.close();
      const again = openPile({ dir, readonly: true });
      assert.ok(again.stats.objectCount >= acked.length + 2);
      again.close();
      console.log(`arm64 vm: ${acked.length} acknowledged puts of the killed writer read back`);
    },
  );
  mapping.unmap();

  // @pile/native's own tests, transpiled to JavaScript, on this kernel: none left out.
  await step("@pile/native's mocha tests", async () => {
    const dir = path.join(__dirname, 'native');
    const mocha = spawn(
      process.execPath,
      [
        path.join(dir, 'node_modules', 'mocha', 'bin', 'mocha.js'),
        '--no-config',
        '--timeout',
        '600000',
        '--reporter',
        'dot',
        'test/*.test.js',
      ],
      {
        cwd: dir,
        stdio: 'inherit',
      },
    );
    const code = await new Promise((resolve) => mocha.on('exit', (c, s) => resolve(c ?? s)));
    assert.strictEqual(code, 0, "@pile/native's tests failed");
  });
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`arm64 vm: FAILED: ${err.stack}`);
    process.exit(1);
  },
);
