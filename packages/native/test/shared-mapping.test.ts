import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { native } from '../src';
import { NATIVE } from './Child';

const MiB = 1 << 20;

/**
 * Resident bytes of this process's mappings of `file`, from the page tables (/proc/self/smaps, Linux).
 * Not /proc/self/status's RssFile: that one is approximate (pages faulted in by a libuv thread reach it
 * late on some kernels) and leaves out a file on tmpfs, which counts as RssShmem.
 */
function residentOf(file: string): number {
  let bytes = 0;
  let inFile = false;
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(` ${file}`);
    else if (inFile && line.startsWith('Rss:')) bytes += Number(/(\d+) kB/.exec(line)![1]) * 1024;
  }
  return bytes;
}

describe('native SharedMapping and warm()', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-native-sab-'));
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  function fileOf(size: number, name = 'f.bin'): { file: string; fd: number } {
    const file = path.join(tmp, name);
    const fd = fs.openSync(file, 'w+');
    expect(native.reserve(fd, size)).to.equal(0);
    return { file, fd };
  }

  it('maps a file as a SharedArrayBuffer: stores reach the file; unmap() leaves views reading zeros', () => {
    const { file, fd } = fileOf(4 * 65536);
    fs.writeSync(fd, Buffer.from('from the file'), 0, 13, 65536);
    const m = new native.SharedMapping(fd, 2 * 65536, 65536, file);
    fs.closeSync(fd);
    expect(m.buffer).to.be.instanceOf(SharedArrayBuffer);
    expect(m.buffer.byteLength).to.equal(2 * 65536);
    expect(m.length).to.equal(2 * 65536);
    const bytes = new Uint8Array(m.buffer);
    expect(Buffer.from(bytes.subarray(0, 13)).toString()).to.equal('from the file');
    const i32 = new Int32Array(m.buffer);
    Atomics.store(i32, 100, 12345);
    m.sync();
    expect(fs.readFileSync(file).readInt32LE(65536 + 400)).to.equal(12345);
    m.unmap();
    expect(m.mapped).to.equal(false);
    expect(m.buffer).to.equal(undefined);
    expect(Atomics.load(i32, 100)).to.equal(0);
    Atomics.store(i32, 100, 7); // lands in zero pages, never in the file
    expect(fs.readFileSync(file).readInt32LE(65536 + 400)).to.equal(12345);
    expect(() => m.sync()).to.throw(/unmapped/);
    m.unmap();
  });

  it('checks its arguments and names the file in errors', () => {
    const { file, fd } = fileOf(65536);
    expect(() => new native.SharedMapping(fd, 4096, 0, file)).to.throw(RangeError, /65536/);
    expect(() => new native.SharedMapping(fd, 65536, 1, file)).to.throw(RangeError, /page size/);
    fs.closeSync(fd);
    const ro = fs.openSync(file, 'r');
    try {
      expect(() => new native.SharedMapping(ro, 65536, 0, file))
        .to.throw()
        .that.includes({ code: 'EACCES', syscall: 'mmap', path: file });
    } finally {
      fs.closeSync(ro);
    }
  });

  it('a SharedMapping collected without unmap() leaves the process: V8 releases the memory, file mapping included', function () {
    this.timeout(120_000);
    const { file, fd } = fileOf(65536, 'collected.bin');
    fs.closeSync(fd);
    const script = `const { native } = require(${NATIVE}); const fs = require('node:fs');
      const mapped = () => fs.readFileSync('/proc/self/maps', 'utf8').includes(${JSON.stringify(file)});
      (function () { const fd = fs.openSync(${JSON.stringify(file)}, 'r+'); const m = new native.SharedMapping(fd, 65536, 0); fs.closeSync(fd);
        new Int32Array(m.buffer)[0] = 5; process.stdout.write('before ' + mapped() + '\\n'); })();
      (async () => { for (let i = 0; i < 50 && mapped(); i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 20)); }
        process.stdout.write('after ' + mapped() + '\\n'); })();`;
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' });
    expect(r.stderr).to.equal('');
    expect(r.stdout).to.equal('before true\nafter false\n');
    expect(fs.readFileSync(file).readInt32LE(0)).to.equal(5);
  });

  for (const how of ['auto', 'touch'] as const) {
    it(`warm(${how}) faults a file's pages in on the libuv pool`, async function () {
      if (!fs.existsSync('/proc/self/smaps')) this.skip();
      const size = 32 * MiB;
      const { file, fd } = fileOf(size);
      fs.writeSync(fd, Buffer.alloc(size, 1), 0, size, 0);
      const m = new native.Mapping(fd, size, 0, false, file);
      fs.closeSync(fd);
      const before = residentOf(file);
      // In chunks, as a caller reporting progress would.
      const methods = new Set<string>();
      for (let at = 0; at < size; at += 8 * MiB) methods.add(await m.warm(at, 8 * MiB, how));
      expect([...methods]).to.deep.equal([how === 'touch' || !native.populateReadSupported() ? 'touch' : 'populate-read']);
      expect(residentOf(file) - before).to.be.greaterThan(size * 0.75);
      expect(m.buffer[size - 1]).to.equal(1);
      m.unmap();
    });
  }

  it('warm() rejects pages past the end of the file with EFAULT, and refuses a range outside the mapping', async function () {
    if (!native.populateReadSupported()) this.skip();
    const { file, fd } = fileOf(65536);
    const m = new native.Mapping(fd, 4 * 65536, 0, true, file);
    fs.closeSync(fd);
    expect(await m.warm(0, 65536)).to.equal('populate-read');
    const err = await m.warm(65536, 65536).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.include({ code: 'EFAULT', syscall: 'madvise(MADV_POPULATE_READ)', path: file, offset: 65536 });
    expect(() => m.warm(0, 5 * 65536)).to.throw(RangeError);
    expect(() => (m.warm as (o: number) => unknown)(0)).to.throw(TypeError);
    expect(() => m.warm(0, 1, 'all' as never)).to.throw(TypeError);
    m.unmap();
    expect(() => m.warm(0, 1)).to.throw(/unmapped/);
  });

  it('warm() works on a SharedMapping too', async () => {
    const { file, fd } = fileOf(65536);
    const m = new native.SharedMapping(fd, 65536, 0, file);
    fs.closeSync(fd);
    expect(await m.warm(0, 65536, 'touch')).to.equal('touch');
    const pending = m.warm(0, 65536);
    m.unmap(); // the job holds the memory until it ends; the promise settles either way
    await pending.catch((e: NodeJS.ErrnoException) => expect(e.code).to.equal('ENXIO'));
  });
});
