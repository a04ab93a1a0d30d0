import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile } from '../src/Pile';
import { expectPileError } from './fixtures/expect-error';
import { buildCore } from './fixtures/build-core';
import { copyModules } from './fixtures/copy-modules';

const MiB = 1 << 20;
const segFile = (dir: string, i: number): string => path.join(dir, `seg-${String(i).padStart(6, '0')}.pile`);
const CORE_PACKAGE = path.resolve(__dirname, '..');

describe('pile files are never reached through links', () => {
  let dir: string;
  let victim: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-links-'));
    victim = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pile-victim-')), 'victim.txt');
    fs.writeFileSync(victim, 'precious');
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.dirname(victim), { recursive: true, force: true });
  });

  it('a symlink planted at the next segment name is refused, and its target is left as it was', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put('first');
    fs.symlinkSync(victim, segFile(dir, 1));
    const err = expectPileError(
      () => {
        for (let i = 0; i < 10; i++) pile.put(Buffer.alloc(200_000));
      },
      'PILE_CORRUPT',
      'symbolic link',
    );
    expect(err.message).to.contain(segFile(dir, 1));
    expect(fs.readFileSync(victim, 'utf8')).to.equal('precious');
    expect(fs.lstatSync(segFile(dir, 1)).isSymbolicLink()).to.equal(true);
    pile.close();
  });

  it('a symlink at the meta temp name of a new pile is not followed', () => {
    fs.symlinkSync(victim, path.join(dir, 'pile.meta.tmp'));
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put('x');
    pile.close();
    expect(fs.readFileSync(victim, 'utf8')).to.equal('precious');
  });

  it('a symlink at the lock temp name is not followed', () => {
    fs.symlinkSync(victim, path.join(dir, `pile.lock.${process.pid}.tmp`));
    const pile = openPile({ dir, segmentSize: MiB });
    pile.close();
    expect(fs.readFileSync(victim, 'utf8')).to.equal('precious');
  });

  it('a symlink or directory at the lock name is refused as PILE_CORRUPT, not taken for another writer', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put('x');
    pile.close();
    fs.writeFileSync(victim, String(process.ppid)); // a live pid: read through the link, it looked like a writer
    fs.symlinkSync(victim, path.join(dir, 'pile.lock'));
    expectPileError(() => openPile({ dir }), 'PILE_CORRUPT', 'symbolic link');
    expect(fs.readFileSync(victim, 'utf8')).to.equal(String(process.ppid));
    fs.unlinkSync(path.join(dir, 'pile.lock'));
    fs.mkdirSync(path.join(dir, 'pile.lock'));
    expectPileError(() => openPile({ dir }), 'PILE_CORRUPT', 'directory');
    fs.rmdirSync(path.join(dir, 'pile.lock'));
    openPile({ dir }).close();
  });

  it('a segment or meta file replaced by a symlink or a directory is refused as PILE_CORRUPT', () => {
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put('x');
    pile.close();
    const real = path.join(dir, 'real.pile');
    fs.renameSync(segFile(dir, 0), real);
    fs.symlinkSync(real, segFile(dir, 0));
    expectPileError(() => openPile({ dir }), 'PILE_CORRUPT', 'symbolic link');
    expectPileError(() => openPile({ dir, readonly: true }), 'PILE_CORRUPT', 'symbolic link');
    fs.unlinkSync(segFile(dir, 0));
    fs.mkdirSync(segFile(dir, 0));
    expectPileError(() => openPile({ dir }), 'PILE_CORRUPT', 'directory');
    fs.rmdirSync(segFile(dir, 0));
    fs.renameSync(real, segFile(dir, 0));
    fs.renameSync(path.join(dir, 'pile.meta'), path.join(dir, 'meta.real'));
    fs.symlinkSync(path.join(dir, 'meta.real'), path.join(dir, 'pile.meta'));
    expectPileError(() => openPile({ dir }), 'PILE_CORRUPT', 'symbolic link');
    expect(fs.existsSync(path.join(dir, 'pile.lock'))).to.equal(false);
  });
});

describe('errors of the operating system are PILE_IO', function () {
  this.timeout(120_000);
  let dir: string;
  // The child runs as nobody: it loads @pile/core, @pile/native and msgpackr from a copy that nobody
  // may read, not from this checkout, which may lie where nobody can not (a clone in a 0700 directory).
  let modules: string;
  before(() => {
    buildCore();
    modules = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-io-modules-'));
    expect(copyModules(CORE_PACKAGE, modules)).to.include.members(['@pile/core', '@pile/native', 'msgpackr']);
  });
  after(() => fs.rmSync(modules, { recursive: true, force: true }));
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-io-'));
    fs.chmodSync(dir, 0o755);
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Runs `code` as an unprivileged user (root ignores permissions); returns what it printed. */
  function asNobody(code: string): string {
    const r = spawnSync(process.execPath, ['-e', `const { openPile } = require('@pile/core');\n${code}`], {
      cwd: modules,
      uid: 65534,
      gid: 65534,
      encoding: 'utf8',
    });
    return `${r.stdout}${r.stderr}`;
  }
  const tryOpen = (opts: string): string =>
    `try { openPile(${opts}); console.log('opened'); } catch (e) { console.log(e.code, e.message); }`;

  it('the child loads the core as nobody, from the copy', function () {
    if (process.getuid?.() !== 0) this.skip();
    expect(asNobody(`console.log(typeof openPile, require.resolve('@pile/core').startsWith(${JSON.stringify(modules)}))`)).to.equal(
      'function true\n',
    );
  });

  it('a writable open of a directory it may not write is PILE_IO (EACCES) and leaves no lock file behind', function () {
    if (process.getuid?.() !== 0) this.skip();
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put('x');
    pile.close();
    const out = asNobody(tryOpen(`{ dir: ${JSON.stringify(dir)} }`));
    expect(out).to.match(/^PILE_IO .*EACCES/);
    expect(fs.readdirSync(dir).filter((n) => n.startsWith('pile.lock'))).to.deep.equal([]);
  });

  it('a writable open that may not create its directory is PILE_IO (EACCES), not a bad option', function () {
    if (process.getuid?.() !== 0) this.skip();
    expect(asNobody(tryOpen(`{ dir: ${JSON.stringify(path.join(dir, 'new'))} }`))).to.match(/^PILE_IO .*EACCES/);
    expect(fs.existsSync(path.join(dir, 'new'))).to.equal(false);
  });

  it('a read-only open of a directory it may not read is PILE_IO, not "not a pile"; an unreadable segment is PILE_IO', function () {
    if (process.getuid?.() !== 0) this.skip();
    const pile = openPile({ dir, segmentSize: MiB });
    pile.put('x');
    pile.close();
    fs.chmodSync(dir, 0o700);
    expect(asNobody(tryOpen(`{ dir: ${JSON.stringify(dir)}, readonly: true }`))).to.match(/^PILE_IO .*EACCES/);
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(path.join(dir, 'pile.meta'), 0o644);
    fs.chmodSync(segFile(dir, 0), 0o600);
    expect(asNobody(tryOpen(`{ dir: ${JSON.stringify(dir)}, readonly: true }`))).to.match(/^PILE_IO .*EACCES/);
  });
});
