import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openCache } from '@pile/cache';
import type { PileError } from '@pile/core';
import { cliSuite, runCli } from './CliHarness';

describe('pile tables, drop-table, dump --table and import duplicates', function () {
  this.timeout(120_000);
  const t = cliSuite('tables');
  let dir: string;
  beforeEach(() => {
    dir = path.join(t.dir, 'pile');
  });

  function file(name: string, text: string): string {
    const f = path.join(t.dir, name);
    fs.writeFileSync(f, text);
    return f;
  }

  it('an import that creates a table and fails leaves no table; the right schema then imports', async () => {
    const data = file('cities.ndjson', '{"id":1,"name":"Oslo","pop":709000}\n{"id":2,"name":"Rome","pop":2873000}\n');
    const wrong = file('wrong.json', '{"id":"int","name":"int","pop":"int"}');
    const right = file('right.json', '{"id":"int","name":"string","pop":"int"}');
    const bad = await runCli(['import', dir, '--table', 'cities', '--key', 'id', '--schema', wrong], { stdinFile: data });
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.contain("table 'cities', which this import created, was removed");
    const none = await runCli(['tables', dir, '--json']);
    expect(none.code, none.stderr).to.equal(0);
    expect(JSON.parse(none.stdout)).to.deep.equal([]);
    const good = await runCli(['import', dir, '--table', 'cities', '--key', 'id', '--schema', right], { stdinFile: data });
    expect(good.code, good.stderr).to.equal(0);
    const tables = await runCli(['tables', dir, '--json']);
    const rows = JSON.parse(tables.stdout) as { name: string; mode: string; count: number; bytes: number; schema: string }[];
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({ name: 'cities', mode: 'durable', count: 2, schema: '{"id":"int","name":"string","pop":"int"}' });
    expect(rows[0]!.bytes).to.be.greaterThan(0);
    const text = await runCli(['tables', dir]);
    expect(text.stdout).to.match(/^name\s+mode\s+count\s+bytes\s+schema\ncities\s+durable\s+2\s/);
  });

  it('a schema mismatch names the table, not an internal schema name', async () => {
    const cache = openCache({ dir, sweepIntervalSec: 0 });
    const { z } = await import('zod');
    cache.table('users', { schema: z.object({ id: z.number() }) }).put(1, { id: 1 });
    let message = '';
    try {
      cache.table('users', { schema: z.object({ name: z.string() }) });
    } catch (err) {
      message = `${(err as PileError).code}: ${(err as Error).message}`;
    }
    cache.close();
    expect(message).to.match(
      /^PILE_SCHEMA_MISMATCH: cache table 'users': the schema given does not match the one the table was created with/,
    );
    expect(message).to.not.contain('pile-cache:');
  });

  it('drop-table deletes a table and its entries; an unknown name is an error', async () => {
    const data = file('a.ndjson', '{"k":"a","v":1}\n{"k":"b","v":2}\n');
    expect((await runCli(['import', dir, '--table', 'x', '--key', 'k'], { stdinFile: data })).code).to.equal(0);
    expect((await runCli(['import', dir, '--table', 'y', '--key', 'k'], { stdinFile: data })).code).to.equal(0);
    const drop = await runCli(['drop-table', dir, 'x']);
    expect(drop.code, drop.stderr).to.equal(0);
    expect(drop.stdout).to.contain("dropped table 'x' (2 entries)");
    const rows = JSON.parse((await runCli(['tables', dir, '--json'])).stdout) as { name: string }[];
    expect(rows.map((r) => r.name)).to.deep.equal(['y']);
    const again = await runCli(['drop-table', dir, 'x']);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.contain("no table named 'x'");
  });

  it('import reports replaced keys; --on-duplicate=skip keeps the first, =error stops at the duplicate', async () => {
    const data = file('d.ndjson', '{"k":"a","v":1}\n{"k":"b","v":2}\n{"k":"a","v":3}\n');
    const r = await runCli(['import', dir, '--table', 'r', '--key', 'k'], { stdinFile: data });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/imported 3 records .*: 2 new keys, 1 replaced/);
    const s = await runCli(['import', dir, '--table', 's', '--key', 'k', '--on-duplicate=skip'], { stdinFile: data });
    expect(s.stdout).to.match(/imported 2 records .*: 2 new keys, 0 replaced, 1 skipped/);
    const e = await runCli(['import', dir, '--table', 'e', '--key', 'k', '--on-duplicate', 'error'], { stdinFile: data });
    expect(e.code).to.equal(1);
    expect(e.stderr).to.contain('record at line 3, column 1');
    expect(e.stderr).to.contain('"a", which is already in table \'e\'');
    const bad = await runCli(['import', dir, '--table', 'e', '--key', 'k', '--on-duplicate', 'merge'], { stdinFile: data });
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/Allowed choices are replace, skip, error/);
    const dump = await runCli(['dump', dir, '--table', 's', '--json']);
    const entries = dump.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { key: string; value: { v: number } })
      .sort((x, y) => x.key.localeCompare(y.key));
    expect(entries).to.deep.equal([
      { key: 'a', value: { k: 'a', v: 1 } },
      { key: 'b', value: { k: 'b', v: 2 } },
    ]);
  });

  it('dump --table decodes keys and values, honours --limit, and decodes a typed table by its stored shape', async () => {
    const data = file('p.ndjson', [1, 2, 3, 4].map((i) => JSON.stringify({ id: i, name: `n${i}` })).join('\n'));
    const shape = file('p.json', '{"id":"int","name":"string"}');
    expect((await runCli(['import', dir, '--table', 'p', '--key', 'id', '--schema', shape], { stdinFile: data })).code).to.equal(0);
    const text = await runCli(['dump', dir, '--table', 'p']);
    expect(text.code, text.stderr).to.equal(0);
    const lines = text.stdout.trim().split('\n').sort();
    expect(lines).to.deep.equal([
      "1  { id: 1, name: 'n1' }",
      "2  { id: 2, name: 'n2' }",
      "3  { id: 3, name: 'n3' }",
      "4  { id: 4, name: 'n4' }",
    ]);
    const two = await runCli(['dump', dir, '--table', 'p', '--limit', '2', '--json']);
    expect(two.stdout.trim().split('\n')).to.have.length(2);
    const missing = await runCli(['dump', dir, '--table', 'nope']);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.contain("no table named 'nope'");
  });
});
