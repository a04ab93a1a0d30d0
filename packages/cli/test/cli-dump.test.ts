import { expect } from 'chai';
import * as path from 'node:path';
import { openPile } from '@pile/core';
import { z } from 'zod';
import { cliSuite, runCli } from './CliHarness';

describe('pile dump', function () {
  const t = cliSuite('dump');
  let dir: string;
  beforeEach(() => {
    dir = path.join(t.dir, 'p');
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    pile.setRoot('config', pile.put({ name: 'alpha', tags: ['x', 'y'], big: 10n }));
    pile.put('hello world');
    pile.put(Buffer.from('cafe', 'hex'));
    pile.put(new Uint8Array([1, 2, 3]));
    pile.schema('point', z.object({ x: z.number(), y: z.number() })).put({ x: 1, y: 2 });
    for (let i = 0; i < 20; i++) pile.put({ i });
    pile.close();
  });

  it('prints every record decoded, typed ones by their stored layout, with hex for bytes', async () => {
    const r = await runCli(['dump', dir]);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).to.have.length(25);
    expect(r.stdout).to.match(/^\d+ msgpack \d+B root=config {2}\{ name: 'alpha', tags: \[ 'x', 'y' \], big: 10n \}$/m);
    expect(r.stdout).to.match(/^\d+ string 11B {2}'hello world'$/m);
    expect(r.stdout).to.match(/^\d+ buffer 2B {2}hex cafe$/m);
    expect(r.stdout).to.match(/^\d+ bytes 3B {2}hex 010203$/m);
    expect(r.stdout).to.match(/^\d+ typed:point \d+B {2}\{ x: 1, y: 2 \}$/m);
  });

  it('--json prints one parseable object per record; --limit and --root select', async () => {
    const r = await runCli(['dump', dir, '--json', '--limit', '3']);
    expect(r.code, r.stderr).to.equal(0);
    const recs = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(recs).to.have.length(3);
    for (const rec of recs) expect(rec).to.include.keys('pointer', 'kind', 'size');

    const root = await runCli(['dump', dir, '--root', 'config', '--json']);
    expect(root.code, root.stderr).to.equal(0);
    expect(JSON.parse(root.stdout)).to.deep.include({
      kind: 'msgpack',
      roots: ['config'],
      value: { name: 'alpha', tags: ['x', 'y'], big: '10' },
    });

    const all = (await runCli(['dump', dir, '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(all.find((rec) => rec['kind'] === 'typed')).to.deep.include({ schema: 'point', value: { x: 1, y: 2 } });

    const missing = await runCli(['dump', dir, '--root', 'nope']);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.match(/no root named 'nope' \(roots: config\)/);

    const bad = await runCli(['dump', dir, '--limit', '-1']);
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/positive integer/);
  });

  it('has --help', async () => {
    const r = await runCli(['dump', '--help']);
    expect(r.code).to.equal(0);
    expect(r.stdout)
      .to.match(/--root <name>/)
      .and.match(/--limit <n>/)
      .and.match(/--json/);
  });
});
