import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { cliSuite, REPO, runCli } from './CliHarness';

const WRITER = path.join(__dirname, 'fixtures', 'cache-writer.js');

/**
 * Starts the writer fixture on `dir` (mode hold: a cache; plain: the pile alone) and resolves once
 * it holds the pile open for writing. It keeps writing every 20 ms until {@link stop}.
 */
function startWriter(dir: string, mode: 'hold' | 'plain'): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER, dir, mode], {
      cwd: path.join(REPO, 'packages/cli'),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`writer exited with ${code}`)));
    child.stdout!.once('data', () => resolve(child));
  });
}

/** Runs the writer fixture in mode write: the tables are written, the pile closed. */
function writeTables(dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER, dir, 'write'], { cwd: path.join(REPO, 'packages/cli'), stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`writer exited with ${code}`))));
  });
}

/** Stops the writer; its exit code 0 says that every one of its writes succeeded until then. */
function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.on('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

/** The values of table 'products' as JSON (bigint as a decimal string, bytes as { hex }, dates ISO). */
const PRODUCTS = [
  {
    id: 0,
    name: 'p0',
    tags: ['a', 't0'],
    dims: { w: 1.5 },
    variants: [{ sku: 's0', stock: 0 }],
    kind: 'lamp',
    seen: null,
    big: '100000000000000000000',
  },
  {
    id: 1,
    name: 'p1',
    tags: ['a', 't1'],
    dims: { w: 1, h: 2 },
    variants: [{ sku: 's1', stock: 10 }],
    kind: 'desk',
    seen: '1970-01-01T00:00:00.000Z',
    big: '100000000000000000001',
  },
  {
    id: 2,
    name: 'p2',
    tags: ['a', 't2'],
    dims: { w: 2, h: 2 },
    variants: [],
    kind: 'lamp',
    seen: null,
    big: '100000000000000000002',
    raw: { hex: '0102' },
  },
];

function lines(out: string): unknown[] {
  return out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as unknown);
}

/** Sorted by `id` (export and dump go in slot order, not key order). */
function byId<T>(values: T[], id: (v: T) => number): T[] {
  return [...values].sort((a, b) => id(a) - id(b));
}

async function helpOf(command: string): Promise<string> {
  const r = await runCli([command, '--help']);
  expect(r.code, r.stderr).to.equal(0);
  return r.stdout.replace(/\s+/g, ' ');
}

describe('pile commands beside a live writer: what their help says', function () {
  const t = cliSuite('beside');
  let dir: string;
  let writer: ChildProcess | undefined;
  beforeEach(() => (dir = path.join(t.dir, 'p')));
  afterEach(async () => {
    if (writer !== undefined) await stop(writer);
    writer = undefined;
  });

  it('stats, verify, verify --readonly, dump and export run beside a writer that has the pile and its cache open', async () => {
    writer = await startWriter(dir, 'hold');
    const stats = await runCli(['stats', dir]);
    expect(stats.code, stats.stderr).to.equal(0);
    expect(stats.stdout).to.match(/^segments {4}3 × 1\.0 MiB$/m);
    expect(stats.stdout).to.match(/^ {2}products {2}3 entries, capacity 1,024, typed$/m);
    expect(stats.stdout).to.match(/^ {2}orders {4}2 entries, capacity 1,024, typed$/m);
    expect(stats.stdout).to.match(/^ {2}plain {5}2 entries, capacity 1,024$/m);

    const verify = await runCli(['verify', dir]);
    expect(verify.code, verify.stderr).to.equal(0);
    expect(verify.stdout).to.match(
      /^ok: .*: 3 segments, [\d,]+ blocks checked: [\d,]+ records and [\d,]+ of the pile's own \(catalog, journal, bodies of moved records\)\n$/,
    );
    const ro = await runCli(['verify', dir, '--readonly']);
    expect(ro.code, ro.stderr).to.equal(0);
    expect(ro.stdout).to.match(
      /^ok: .*: 3 segments, [\d,]+ blocks checked: [\d,]+ records and [\d,]+ of the pile's own \(catalog, journal, bodies of moved records\)\n\(read-only check: free lists and counters were not checked\)\n$/,
    );

    const dump = await runCli(['dump', dir, '--table', 'products', '--json']);
    expect(dump.code, dump.stderr).to.equal(0);
    const entries = byId(lines(dump.stdout) as { key: number; value: { id: number } }[], (e) => e.key);
    expect(entries).to.deep.equal(PRODUCTS.map((value) => ({ key: value.id, value })));

    const exp = await runCli(['export', dir, '--table', 'products', '--ndjson']);
    expect(exp.code, exp.stderr).to.equal(0);
    expect(byId(lines(exp.stdout) as { id: number }[], (v) => v.id)).to.deep.equal(PRODUCTS);
  });

  it('compact takes the writer turn beside the writer: it releases the empty trailing segments, and the writer goes on writing', async () => {
    writer = await startWriter(dir, 'hold');
    const r = await runCli(['compact', dir]);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.equal(`${dir}: segments 3 -> 1, released 2.0 MiB\n`);
    const json = await runCli(['compact', dir, '--json']);
    expect(JSON.parse(json.stdout)).to.deep.equal({ dir, segmentsBefore: 1, segmentsAfter: 1, bytesReleased: 0 });
    // The writer's puts after the compact still land: its tick moves on and the pile is clean.
    const tick = async (): Promise<number> =>
      (lines((await runCli(['dump', dir, '--table', 'plain', '--json'])).stdout) as { key: string; value: number }[]).find(
        (e) => e.key === 'tick',
      )!.value;
    const before = await tick();
    await new Promise((res) => setTimeout(res, 200));
    expect(await tick()).to.be.greaterThan(before);
    const verify = await runCli(['verify', dir]);
    expect(verify.code, verify.stderr).to.equal(0);
    expect(verify.stdout).to.match(/^ok: .*: 1 segments, /);
    expect(writer.exitCode).to.equal(null);
    expect(await stop(writer)).to.equal(0);
    writer = undefined;
  });

  it('drop-table and import are refused (exit 2, locked) while another process has the cache open, and nothing is changed', async () => {
    writer = await startWriter(dir, 'hold');
    const drop = await runCli(['drop-table', dir, 'plain']);
    expect(drop.code).to.equal(2);
    expect(drop.stdout).to.equal('');
    expect(drop.stderr).to.match(/^pile: .* is locked: .*another open has it with a cache/);
    const imp = await runCli(['import', dir, '--table', 'more', '--key', 'id'], { stdin: '{"id":1}\n' });
    expect(imp.code).to.equal(2);
    expect(imp.stderr).to.match(/is locked: .*another open has it with a cache/);
    const tables = await runCli(['tables', dir, '--json']);
    expect((JSON.parse(tables.stdout) as { name: string }[]).map((x) => x.name).sort()).to.deep.equal(['orders', 'plain', 'products']);
  });

  it('drop-table and compact run beside a writer that has the pile open without a cache', async () => {
    await writeTables(dir);
    writer = await startWriter(dir, 'plain');
    const drop = await runCli(['drop-table', dir, 'products']);
    expect(drop.code, drop.stderr).to.equal(0);
    expect(drop.stdout).to.equal("dropped table 'products' (3 entries)\n");
    const compact = await runCli(['compact', dir]);
    expect(compact.code, compact.stderr).to.equal(0);
    expect(compact.stdout).to.match(/: segments 1 -> 1, released 0 B\n$/);
    const tables = await runCli(['tables', dir, '--json']);
    expect((JSON.parse(tables.stdout) as { name: string }[]).map((x) => x.name).sort()).to.deep.equal(['orders', 'plain']);
    expect(await stop(writer)).to.equal(0);
    writer = undefined;
  });

  it('the help texts say so, and no longer make the claims these tests disprove', async () => {
    const help = Object.fromEntries(
      await Promise.all(
        ['stats', 'verify', 'dump', 'export', 'tables', 'compact', 'drop-table', 'import'].map(async (c) => [c, await helpOf(c)] as const),
      ),
    );
    const all = Object.values(help).join(' ');
    expect(all).to.not.match(/refused while a writer|placeholder|unlocked|flat shape/i);
    for (const c of ['stats', 'dump', 'export', 'tables']) expect(help[c], c).to.match(/Read-only, runs beside live writers/);
    expect(help['verify']).to.match(/runs beside live writers/);
    expect(help['verify']).to.match(/--readonly open read-only \(also beside live writers\)/);
    expect(help['compact']).to.match(/Takes the writer turn: runs beside live writers/);
    for (const c of ['drop-table', 'import'])
      expect(help[c], c).to.match(/refused \(exit 2, locked\) while another process has the pile's cache open/);
    expect(help['dump']).to.match(/typed records by the layout the pile stores for their schema/);
  });
});

describe('pile dump and export of a typed cache table made with a zod schema (nested objects, z.array)', function () {
  const t = cliSuite('typed');

  it('dump --table decodes every entry by the stored layout: the exact records, as JSON and as text', async () => {
    const dir = path.join(t.dir, 'p');
    await writeTables(dir);
    const json = await runCli(['dump', dir, '--table', 'products', '--json']);
    expect(json.code, json.stderr).to.equal(0);
    expect(byId(lines(json.stdout) as { key: number }[], (e) => e.key)).to.deep.equal(PRODUCTS.map((value) => ({ key: value.id, value })));
    const text = await runCli(['dump', dir, '--table', 'products']);
    expect(text.code, text.stderr).to.equal(0);
    expect(
      text.stdout
        .split('\n')
        .filter((l) => l !== '')
        .sort(),
    ).to.deep.equal([
      "0  { id: 0, name: 'p0', tags: [ 'a', 't0' ], dims: { w: 1.5 }, variants: [ { sku: 's0', stock: 0 } ], kind: 'lamp', seen: null, big: 100000000000000000000n }",
      "1  { id: 1, name: 'p1', tags: [ 'a', 't1' ], dims: { w: 1, h: 2 }, variants: [ { sku: 's1', stock: 10 } ], kind: 'desk', seen: 1970-01-01T00:00:00.000Z, big: 100000000000000000001n }",
      "2  { id: 2, name: 'p2', tags: [ 'a', 't2' ], dims: { w: 2, h: 2 }, variants: [], kind: 'lamp', seen: null, big: 100000000000000000002n, raw: Uint8Array(2) [ 1, 2 ] }",
    ]);
  });

  it('export writes the exact records without --schema, as a JSON array and as NDJSON', async () => {
    const dir = path.join(t.dir, 'p');
    await writeTables(dir);
    const arr = await runCli(['export', dir, '--table', 'products']);
    expect(arr.code, arr.stderr).to.equal(0);
    expect(byId(JSON.parse(arr.stdout) as { id: number }[], (v) => v.id)).to.deep.equal(PRODUCTS);
    const nd = await runCli(['export', dir, '--table', 'products', '--ndjson']);
    expect(nd.code, nd.stderr).to.equal(0);
    expect(byId(lines(nd.stdout) as { id: number }[], (v) => v.id)).to.deep.equal(PRODUCTS);
  });

  it('export --schema takes a shape with arrays and nested objects: the exact records of a table made with the matching zod schema', async () => {
    const dir = path.join(t.dir, 'p');
    await writeTables(dir);
    const shape = path.join(t.dir, 'orders.json');
    fs.writeFileSync(
      shape,
      JSON.stringify({ id: 'int', tags: 'string[]', dims: { w: 'number', h: 'number?' }, lines: [{ sku: 'string', qty: 'int32' }] }),
    );
    // What the writer put into 'orders', one record per key.
    const orders = JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', 'orders.json'), 'utf8')) as Record<string, unknown>;
    const expected = [orders['o1'], orders['o2']];
    for (const args of [[], ['--schema', shape]]) {
      const r = await runCli(['export', dir, '--table', 'orders', '--ndjson', ...args]);
      expect(r.code, r.stderr).to.equal(0);
      expect(byId(lines(r.stdout) as { id: number }[], (v) => v.id)).to.deep.equal(expected);
    }
    const dump = await runCli(['dump', dir, '--table', 'orders', '--json']);
    expect(byId(lines(dump.stdout) as { value: { id: number } }[], (e) => e.value.id)).to.deep.equal([
      { key: 'o1', value: expected[0] },
      { key: 'o2', value: expected[1] },
    ]);
  });

  it("a --schema shape that is not the table's is refused, PILE_SCHEMA_MISMATCH naming the field; a bad nested type, PILE_INVALID_OPTION naming its path", async () => {
    const dir = path.join(t.dir, 'p');
    await writeTables(dir);
    const other = path.join(t.dir, 'other.json');
    fs.writeFileSync(other, JSON.stringify({ id: 'int', tags: 'string[]' }));
    const mismatch = await runCli(['export', dir, '--table', 'orders', '--schema', other]);
    expect(mismatch.code).to.equal(1);
    expect(mismatch.stdout).to.equal('');
    expect(mismatch.stderr).to.match(
      /^pile: PILE_SCHEMA_MISMATCH: cache table 'orders': .*field "dims": stored \{ w, h \}, given no such field/,
    );
    const bad = path.join(t.dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ id: 'int', lines: [{ sku: 'text' }] }));
    const invalid = await runCli(['export', dir, '--table', 'orders', '--schema', bad]);
    expect(invalid.code).to.equal(1);
    expect(invalid.stderr).to.equal(
      `pile: PILE_INVALID_OPTION: --schema file ${bad}: field 'lines[].sku': unknown type 'text' (expected one of string, number, int, int32, boolean, optionally ending in '[]' and/or '?')\n`,
    );
  });
});

describe('pile import and export --schema with arrays and nested objects', function () {
  const t = cliSuite('shape');

  it('imports a table whose shape has string[], a nested object and [shape], and exports the exact records by the stored shape', async () => {
    const dir = path.join(t.dir, 'p');
    const shape = path.join(t.dir, 'shape.json');
    fs.writeFileSync(
      shape,
      JSON.stringify({ id: 'int', tags: 'string[]', dims: { w: 'number', h: 'number?' }, parts: [{ sku: 'string', n: 'int32?' }] }),
    );
    const input = [
      { id: 1, tags: ['a', 'b'], dims: { w: 2 }, parts: [{ sku: 'x', n: 3 }, { sku: 'y' }], extra: 'not stored' },
      { id: 2, tags: [], dims: { w: 3, h: 4 }, parts: [] },
    ];
    const imp = await runCli(['import', dir, '--table', 'items', '--key', 'id', '--schema', shape], {
      stdin: input.map((v) => JSON.stringify(v)).join('\n'),
    });
    expect(imp.code, imp.stderr).to.equal(0);
    const r = await runCli(['export', dir, '--table', 'items']);
    expect(r.code, r.stderr).to.equal(0);
    expect(byId(JSON.parse(r.stdout) as { id: number }[], (v) => v.id)).to.deep.equal([
      { id: 1, tags: ['a', 'b'], dims: { w: 2 }, parts: [{ sku: 'x', n: 3 }, { sku: 'y' }] },
      { id: 2, tags: [], dims: { w: 3, h: 4 }, parts: [] },
    ]);
    const tables = await runCli(['tables', dir, '--json']);
    expect((JSON.parse(tables.stdout) as { schema: string }[])[0]!.schema).to.equal(
      JSON.stringify(JSON.parse(fs.readFileSync(shape, 'utf8'))),
    );
  });
});
