import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

// The prebuilt binaries are committed: a clean clone (and an `npm install --ignore-scripts` of the
// tarball) loads them without a compiler. These tests keep them honest.

const root = path.join(__dirname, '..');
const { sourceHash, recordedHash } = require('../scripts/source-hash.js') as { sourceHash(): string; recordedHash(): string | undefined };

describe('prebuilt binaries', () => {
  it('were built from the C++ sources as they are now (else run `pnpm --filter @pile/native prebuild`)', () => {
    expect(recordedHash(), 'prebuilds/SOURCE-SHA256').to.equal(sourceHash());
  });

  it('include linux-x64, which loads and maps memory on its own', function () {
    const dir = path.join(root, 'prebuilds', 'linux-x64');
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.node'));
    expect(files).to.deep.equal(['@pile+native.node']);
    if (`${process.platform}-${process.arch}` !== 'linux-x64') this.skip();
    const script = `const n = require(${JSON.stringify(path.join(dir, files[0]!))});
      const m = new n.Mapping(-1, n.pageSize, 0, true); m.buffer[0] = 42; process.stdout.write(String(m.buffer[0])); m.unmap();`;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    expect(r.stderr).to.equal('');
    expect(r.stdout).to.equal('42');
  });

  it('a platform with no binary gets one error naming it and what to install', () => {
    // The package as installed, minus every binary.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-native-none-'));
    try {
      const pkg = path.join(tmp, 'node_modules', '@pile', 'native');
      fs.mkdirSync(pkg, { recursive: true });
      fs.cpSync(path.join(root, 'dist'), path.join(pkg, 'dist'), { recursive: true });
      fs.copyFileSync(path.join(root, 'package.json'), path.join(pkg, 'package.json'));
      fs.symlinkSync(path.dirname(require.resolve('node-gyp-build/package.json')), path.join(tmp, 'node_modules', 'node-gyp-build'));
      const r = spawnSync(
        process.execPath,
        [
          '-e',
          `try { require('@pile/native') } catch (e) { process.stdout.write(JSON.stringify({ code: e.code, message: e.message, stack: e.stack.split('\\n').length })) }`,
        ],
        { cwd: tmp, encoding: 'utf8' },
      );
      const e = JSON.parse(r.stdout) as { code: string; message: string };
      expect(e.code).to.equal('PILE_NATIVE_UNAVAILABLE');
      expect(e.message).to.contain(`${process.platform}-${process.arch}`).and.contain('g++').and.contain('make').and.contain('python3');
      expect(e.message).to.contain('npx pile-native-build');
      expect(e.message).not.to.match(/gyp ERR!/);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
