import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openCache } from '@pile/cache';
import { buildCli, cliSuite, REPO, runCli, tempDir } from './CliHarness';

/** A pile with one table of 3 entries in `dir`. */
function smallPile(dir: string): void {
  const cache = openCache({ dir, sweepIntervalSec: 0 });
  const t = cache.table<string>('things');
  for (const k of ['a', 'b', 'c']) t.put(k, k.toUpperCase());
  cache.close();
}

describe('pile resolves relative paths from where it is run', function () {
  this.timeout(120_000);
  const t = cliSuite('paths');

  it('run from a subfolder, with relative paths for the pile, stdin and --schema', async () => {
    const sub = path.join(t.dir, 'project', 'sub');
    fs.mkdirSync(sub, { recursive: true });
    fs.writeFileSync(path.join(sub, 'in.ndjson'), '{"id":1,"name":"x"}\n{"id":2,"name":"y"}\n');
    fs.writeFileSync(path.join(sub, 'shape.json'), '{"id":"int","name":"string"}');
    const imp = await runCli(['import', '../data', '--table', 'n', '--key', 'id', '--schema', 'shape.json'], {
      cwd: sub,
      stdinFile: path.join(sub, 'in.ndjson'),
    });
    expect(imp.code, imp.stderr).to.equal(0);
    expect(fs.existsSync(path.join(t.dir, 'project', 'data', 'pile.meta'))).to.equal(true);
    const st = await runCli(['stats', '../data', '--json'], { cwd: sub });
    expect(st.code, st.stderr).to.equal(0);
    const ex = await runCli(['export', '../data', '--table', 'n', '--ndjson'], { cwd: sub });
    const rows = ex.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: number; name: string })
      .sort((x, y) => x.id - y.id);
    expect(rows).to.deep.equal([
      { id: 1, name: 'x' },
      { id: 2, name: 'y' },
    ]);
  });

  it("as `pnpm pile` (the workspace script runs from the root): paths resolve against pnpm's INIT_CWD", async () => {
    smallPile(path.join(t.dir, 'data'));
    const env = { ...process.env, npm_lifecycle_event: 'pile', npm_package_name: 'pile-workspace', INIT_CWD: t.dir };
    const r = await runCli(['stats', 'data', '--json'], { cwd: REPO, env });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.contain('things');
    // A user's own script named pile runs in its package, where its paths are meant: no change there.
    const other = await runCli(['stats', 'data'], { cwd: REPO, env: { ...env, npm_package_name: 'my-app' } });
    expect(other.code).to.equal(2);
    expect(other.stderr).to.contain('data: no such directory');
  });

  it('`pnpm pile` works from a folder of the repo that is not a package and from an example package', async () => {
    smallPile(path.join(t.dir, 'data'));
    for (const folder of ['docs', 'examples/catalog-server']) {
      const cwd = path.join(REPO, folder);
      const rel = path.relative(cwd, path.join(t.dir, 'data'));
      const r = await runCli(['pile', 'stats', rel, '--json'], { cwd, command: ['npx', '-y', 'pnpm@12.4.2'] });
      expect(r.code, `${folder}: ${r.stderr}`).to.equal(0);
      expect(r.stdout, folder).to.contain('things');
    }
  });
});

describe('pile shows a progress bar while an open recovers', function () {
  this.timeout(120_000);
  before(buildCli);

  it('verify after a kill -9 draws a recovering bar on a terminal', async function () {
    if (!fs.existsSync('/usr/bin/script')) this.skip(); // util-linux script gives the command a terminal
    const t = tempDir('progress');
    try {
      const dir = path.join(t.dir, 'data');
      const crash = `const { openPile } = require(${JSON.stringify(path.join(REPO, 'packages/core'))});
        const pile = openPile({ dir: ${JSON.stringify(dir)} });
        for (let i = 0; i < 1000; i++) pile.put({ i });
        process.kill(process.pid, 'SIGKILL');`;
      const { spawnSync } = await import('node:child_process');
      expect(spawnSync(process.execPath, ['-e', crash]).signal).to.equal('SIGKILL');
      const r = spawnSync(
        '/usr/bin/script',
        ['-qec', `${process.execPath} ${path.join(REPO, 'packages/cli/dist/main.js')} verify ${dir}`, '/dev/null'],
        { encoding: 'utf8' },
      );
      expect(r.status, r.stdout).to.equal(0);
      expect(r.stdout).to.match(/recovering \[/);
    } finally {
      t.remove();
    }
  });
});
