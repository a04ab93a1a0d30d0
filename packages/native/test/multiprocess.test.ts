import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { native } from '../src';
import { Child, NATIVE } from './Child';

// The primitives of issue 17 with real processes: a robust mutex, a futex and OFD locks in a
// file every process maps, and Atomics on the file mapped as a SharedArrayBuffer. No assertion
// depends on timing: bounds are minutes, and waits are for events (a line, an exit).

const SIZE = 65536;
const FUTEX = 0;
const MUTEX = 64;
const COUNTER = 128;
const { LOCKED, OWNER_DEAD, BUSY, TIMED_OUT } = native.MUTEX;

describe('native multi-process primitives', function () {
  this.timeout(240_000);
  let tmp: string;
  let file: string;
  const children: Child[] = [];

  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-native-mp-'));
    file = path.join(tmp, 'coord');
    const fd = fs.openSync(file, 'w+');
    expect(native.reserve(fd, SIZE)).to.equal(0);
    fs.closeSync(fd);
  });
  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => c.kill()));
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  function child(script: string, stdio?: ConstructorParameters<typeof Child>[1]): Child {
    const c = new Child(
      `const { native } = require(${NATIVE}); const fs = require('node:fs'); const file = ${JSON.stringify(file)};\n${script}`,
      stdio,
    );
    children.push(c);
    return c;
  }

  /** The coordination file mapped shared in this process, with a freshly initialised mutex. */
  function open(): { mapping: ReturnType<typeof mapShared>; mutex: InstanceType<typeof native.SharedMutex> } {
    const mapping = mapShared();
    const mutex = new native.SharedMutex(mapping, MUTEX);
    mutex.init();
    return { mapping, mutex };
  }
  function mapShared(): InstanceType<typeof native.Mapping> {
    const fd = fs.openSync(file, 'r+');
    try {
      return new native.Mapping(fd, SIZE, 0, true, file);
    } finally {
      fs.closeSync(fd);
    }
  }

  const MAP = `const fd = fs.openSync(file, 'r+'); const m = new native.Mapping(fd, ${SIZE}, 0, true, file); fs.closeSync(fd);
    const mutex = new native.SharedMutex(m, ${MUTEX});`;

  describe('SharedMutex', () => {
    it('two processes incrementing a plain counter under it come out exact', async () => {
      const { mapping, mutex } = open();
      const N = 200_000;
      const script = `${MAP} let owner = 0;
        for (let i = 0; i < ${N}; i++) {
          if (mutex.lock() !== native.MUTEX.LOCKED) owner++;
          // A read-modify-write that two processes would tear without the mutex.
          m.buffer.writeUInt32LE(m.buffer.readUInt32LE(${COUNTER}) + 1, ${COUNTER});
          mutex.unlock();
        }
        process.stdout.write('owner-dead ' + owner + '\\n');`;
      const outs = await Promise.all([child(script).done(), child(script).done()]);
      expect(outs).to.deep.equal(['owner-dead 0\n', 'owner-dead 0\n']);
      expect(mapping.buffer.readUInt32LE(COUNTER)).to.equal(2 * N);
      expect(fs.readFileSync(file).readUInt32LE(COUNTER)).to.equal(2 * N);
      mutex.close();
      mapping.unmap();
    });

    it('a holder killed by SIGKILL gives the next locker OWNER_DEAD; after consistent() it works as before', async () => {
      const { mapping, mutex } = open();
      const holder = child(`${MAP} if (mutex.lock() !== native.MUTEX.LOCKED) process.exit(3);
        m.buffer.writeUInt32LE(0xdead, ${COUNTER}); process.stdout.write('held\\n'); setInterval(() => {}, 1000);`);
      await holder.line('held');
      expect(mutex.tryLock()).to.equal(BUSY);
      expect(mutex.timedLock(50)).to.equal(TIMED_OUT);
      expect(mutex.held).to.equal(false);
      await holder.kill();
      // The kernel marked it at the holder's death: a generous bound, never reached.
      expect(mutex.timedLock(60_000)).to.equal(OWNER_DEAD);
      expect(mutex.held).to.equal(true);
      // The new holder sees what the dead one left half done, and repairs it.
      expect(mapping.buffer.readUInt32LE(COUNTER)).to.equal(0xdead);
      mapping.buffer.writeUInt32LE(0, COUNTER);
      mutex.consistent();
      mutex.unlock();
      expect(mutex.lock()).to.equal(LOCKED);
      mutex.unlock();
      // And another process uses it normally again.
      const next = child(`${MAP} process.stdout.write(String(mutex.tryLock())); mutex.unlock();`);
      expect(await next.done()).to.equal(String(LOCKED));
      mutex.close();
      mapping.unmap();
    });

    it('unlocked after OWNER_DEAD without consistent(), it is ENOTRECOVERABLE in every process until init()', async () => {
      const { mapping, mutex } = open();
      const holder = child(`${MAP} mutex.lock(); process.stdout.write('held\\n'); setInterval(() => {}, 1000);`);
      await holder.line('held');
      await holder.kill();
      expect(mutex.lock()).to.equal(OWNER_DEAD);
      mutex.unlock();
      expect(() => mutex.lock())
        .to.throw()
        .that.includes({ code: 'ENOTRECOVERABLE', syscall: 'pthread_mutex_lock', path: file, offset: MUTEX });
      const other = child(`${MAP} try { mutex.tryLock(); } catch (e) { process.stdout.write(e.code); }`);
      expect(await other.done()).to.equal('ENOTRECOVERABLE');
      mutex.init();
      expect(mutex.lock()).to.equal(LOCKED);
      mutex.unlock();
      mutex.close();
      mapping.unmap();
    });

    it('a worker thread terminated while holding it gives the next locker OWNER_DEAD (the holder is a thread)', async () => {
      const { mapping, mutex } = open();
      const worker = new Worker(
        `const { native } = require(${NATIVE}); const fs = require('node:fs'); const file = ${JSON.stringify(file)};
        const { parentPort } = require('node:worker_threads');
        ${MAP} if (mutex.lock() !== native.MUTEX.LOCKED) throw new Error('not locked');
        parentPort.postMessage('held'); for (;;) {}`,
        { eval: true },
      );
      await new Promise<void>((resolve, reject) => {
        worker.once('message', () => resolve());
        worker.once('error', reject);
      });
      // Another thread of the same process is another owner: busy, not EDEADLK.
      expect(mutex.tryLock()).to.equal(BUSY);
      await worker.terminate();
      expect(mutex.timedLock(60_000)).to.equal(OWNER_DEAD);
      mutex.consistent();
      mutex.unlock();
      expect(mutex.tryLock()).to.equal(LOCKED);
      mutex.unlock();
      mutex.close();
      mapping.unmap();
    });

    it('keeps working after the mapping it was made from is unmapped (it maps its own page)', async () => {
      const { mapping, mutex } = open();
      mapping.unmap();
      expect(mutex.lock()).to.equal(LOCKED);
      const other = child(`${MAP} process.stdout.write(String(mutex.tryLock()));`);
      expect(await other.done()).to.equal(String(BUSY));
      mutex.unlock();
      mutex.close();
      expect(() => mutex.lock()).to.throw(/closed/);
    });

    it('refuses misuse with the errno, the call, the file and the offset', () => {
      const { mapping, mutex } = open();
      expect(mutex.lock()).to.equal(LOCKED);
      expect(() => mutex.lock())
        .to.throw()
        .that.includes({ code: 'EDEADLK', syscall: 'pthread_mutex_lock', path: file, offset: MUTEX });
      expect(() => mutex.close())
        .to.throw()
        .that.includes({ code: 'EBUSY' });
      expect(() => mutex.consistent())
        .to.throw()
        .that.includes({ code: 'EINVAL', syscall: 'pthread_mutex_consistent' });
      mutex.unlock();
      expect(mutex.held).to.equal(false);
      expect(() => mutex.unlock())
        .to.throw()
        .that.includes({ code: 'EPERM', syscall: 'pthread_mutex_unlock' });
      expect(() => mutex.timedLock(-1)).to.throw(TypeError);
      expect(() => new native.SharedMutex(mapping, 12)).to.throw(RangeError, /multiple of 8/);
      expect(() => new native.SharedMutex(mapping, SIZE - 8)).to.throw(RangeError, /inside the mapping/);
      expect(() => new native.SharedMutex({} as never, 0)).to.throw(TypeError);
      const anon = new native.Mapping(-1, SIZE, 0, true);
      expect(() => new native.SharedMutex(anon, 0)).to.throw(/shared read-write/);
      anon.unmap();
      const fd = fs.openSync(file, 'r');
      const ro = new native.Mapping(fd, SIZE, 0, false, file);
      fs.closeSync(fd);
      expect(() => new native.SharedMutex(ro, MUTEX)).to.throw(/shared read-write/);
      ro.unmap();
      mutex.close();
      mapping.unmap();
      expect(() => new native.SharedMutex(mapping, MUTEX)).to.throw(/unmapped/);
    });
  });

  describe('Futex', () => {
    it('a wake in one process wakes a waiter in another (not FUTEX_PRIVATE)', async () => {
      const mapping = mapShared();
      const futex = new native.Futex(mapping, FUTEX);
      const waiter = child(`${MAP} const f = new native.Futex(m, ${FUTEX}); process.stdout.write('waiting\\n');
        process.stdout.write(f.wait(0, 120000) + '\\n');`);
      await waiter.line('waiting');
      // wake() counts the waiters it woke: 1 only once the child sleeps in the kernel. This
      // process waits on nothing, so that waiter is the other process.
      let woken = 0;
      const deadline = Date.now() + 120_000;
      while (woken === 0 && Date.now() < deadline) {
        woken = futex.wake(1);
        if (woken === 0) await new Promise((r) => setTimeout(r, 5));
      }
      expect(woken).to.equal(1);
      expect(await waiter.done()).to.equal('waiting\nok\n');
      futex.close();
      mapping.unmap();
    });

    it('wait compares the word: not-equal, timed-out; errors name the file and offset', () => {
      const mapping = mapShared();
      const futex = new native.Futex(mapping, 4);
      mapping.buffer.writeUInt32LE(0xffffffff, 4);
      expect(futex.wait(0)).to.equal('not-equal');
      expect(futex.wait(-1, 1)).to.equal('timed-out');
      expect(futex.wake()).to.equal(0);
      expect(futex.offset).to.equal(4);
      expect(() => futex.wait(0, -1)).to.throw(TypeError);
      expect(() => futex.wake(1.5)).to.throw(TypeError);
      expect(() => new native.Futex(mapping, 2)).to.throw(RangeError);
      futex.close();
      expect(() => futex.wake()).to.throw(/closed/);
      mapping.unmap();
    });
  });

  describe('OFD byte-range locks', () => {
    it('a byte a live process holds is reported held, and free once it is SIGKILLed', async () => {
      const holder = child(`const fd = fs.openSync(file, 'r+'); if (!native.ofdLock(fd, 7, 1, 'write', file)) process.exit(3);
        process.stdout.write('locked\\n'); setInterval(() => {}, 1000);`);
      await holder.line('locked');
      const fd = fs.openSync(file, 'r+');
      try {
        expect(native.ofdHolder(fd, 7, 1, 'read', file)).to.deep.equal({ mode: 'write', start: 7, length: 1, pid: -1 });
        expect(native.ofdLock(fd, 7, 1, 'read', file)).to.equal(false);
        expect(native.ofdHolder(fd, 8, 1, 'write', file)).to.equal(null);
        await holder.kill();
        expect(native.ofdHolder(fd, 7, 1, 'write', file)).to.equal(null);
        expect(native.ofdLock(fd, 7, 1, 'write', file)).to.equal(true);
        expect(native.ofdLock(fd, 7, 1, 'unlock', file)).to.equal(true);
      } finally {
        fs.closeSync(fd);
      }
    });

    it('the holder is the open file description, not the pid: another open in the same process conflicts, and a lock lives as long as its description', async () => {
      const a = fs.openSync(file, 'r+');
      const b = fs.openSync(file, 'r+');
      try {
        // Same pid, two descriptions: a classic POSIX lock would not conflict here, so a pid
        // reused by a new process could pass for a live holder; an OFD lock can not.
        expect(native.ofdLock(a, 0, 1, 'write', file)).to.equal(true);
        expect(native.ofdHolder(b, 0, 1, 'write', file)).to.deep.include({ mode: 'write', pid: -1 });
        expect(native.ofdLock(b, 0, 1, 'write', file)).to.equal(false);
        // The same description (a descriptor of it handed to a child process) holds it still
        // after this process closes its own descriptor, and until that child dies.
        const heir = child(`process.stdout.write('inherited\\n'); setInterval(() => {}, 1000);`, ['ignore', 'pipe', 'pipe', a]);
        await heir.line('inherited');
        fs.closeSync(a);
        expect(native.ofdHolder(b, 0, 1, 'write', file)).to.not.equal(null);
        await heir.kill();
        expect(native.ofdHolder(b, 0, 1, 'write', file)).to.equal(null);
        // Read locks share.
        expect(native.ofdLock(b, 0, 0, 'read', file)).to.equal(true);
        const c = fs.openSync(file, 'r');
        expect(native.ofdLock(c, 100, 1, 'read', file)).to.equal(true);
        expect(native.ofdHolder(c, 5, 1, 'write', file)).to.deep.include({ mode: 'read', start: 0, length: 0 });
        fs.closeSync(c);
      } finally {
        fs.closeSync(b);
      }
    });

    it('errors name the errno, the call, the file and the offset', () => {
      expect(() => native.ofdHolder(1_000_000, 3, 1, 'write', file))
        .to.throw()
        .that.includes({ code: 'EBADF', syscall: 'fcntl(F_OFD_GETLK)', path: file, offset: 3 });
      const ro = fs.openSync(file, 'r');
      try {
        expect(() => native.ofdLock(ro, 0, 1, 'write', file))
          .to.throw()
          .that.includes({ code: 'EBADF', syscall: 'fcntl(F_OFD_SETLK)' });
      } finally {
        fs.closeSync(ro);
      }
      expect(() => native.ofdLock(0, 0, 1, 'exclusive' as never)).to.throw(TypeError);
      expect(() => native.ofdHolder(0, 0, 1, 'unlock' as never)).to.throw(TypeError);
    });
  });

  describe('SharedMapping', () => {
    it('Atomics on it in two processes are exact: 2 x 1 M CAS increments', async () => {
      const fd = fs.openSync(file, 'r+');
      const mapping = new native.SharedMapping(fd, SIZE, 0, file);
      fs.closeSync(fd);
      expect(mapping.buffer).to.be.instanceOf(SharedArrayBuffer);
      const N = 1_000_000;
      const script = `const fd = fs.openSync(file, 'r+'); const s = new native.SharedMapping(fd, ${SIZE}, 0, file); fs.closeSync(fd);
        const a = new Int32Array(s.buffer); let retries = 0;
        for (let i = 0; i < ${N}; i++) { for (;;) { const v = Atomics.load(a, 10); if (Atomics.compareExchange(a, 10, v, v + 1) === v) break; retries++; } }
        process.stdout.write('ok ' + (retries >= 0));`;
      const outs = await Promise.all([child(script).done(), child(script).done()]);
      expect(outs).to.deep.equal(['ok true', 'ok true']);
      expect(Atomics.load(new Int32Array(mapping.buffer), 10)).to.equal(2 * N);
      expect(fs.readFileSync(file).readInt32LE(40)).to.equal(2 * N);
      mapping.unmap();
    });
  });
});
