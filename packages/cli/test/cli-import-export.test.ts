import { expect } from 'chai';
import { once } from 'node:events';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openCache } from '@pile/cache';
import { cliSuite, runCli } from './CliHarness';
import { zodOfShape } from '../src/FlatSchema';

const SHAPE = { id: 'int', name: 'string', price: 'number', active: 'boolean', note: 'string?' };

function product(i: number): Record<string, unknown> {
  return { id: i, name: `product ${i}`, price: i * 0.25, active: i % 3 === 0, note: i % 5 === 0 ? null : `n${i}` };
}

/** Writes `n` records to `file` as NDJSON or an array, streamed (never built in memory), honouring backpressure. */
async function writeRecords(
  file: string,
  n: number,
  format: 'ndjson' | 'array',
  make: (i: number) => Record<string, unknown> = product,
): Promise<void> {
  const w = fs.createWriteStream(file);
  if (format === 'array') w.write('[\n');
  for (let i = 1; i <= n; i++) {
    const text = JSON.stringify(make(i));
    const ok = w.write(format === 'ndjson' ? `${text}\n` : `${i > 1 ? ',\n' : ''}${text}`);
    if (!ok) await once(w, 'drain');
  }
  if (format === 'array') w.write('\n]\n');
  w.end();
  await once(w, 'finish');
}

describe('pile import / export', function () {
  const t = cliSuite('import');

  it('imports an array with a schema and an NDJSON file without one, and exports them back', async () => {
    const dir = path.join(t.dir, 'pile');
    const shapeFile = path.join(t.dir, 'shape.json');
    fs.writeFileSync(shapeFile, JSON.stringify(SHAPE));
    await writeRecords(path.join(t.dir, 'a.json'), 2000, 'array');
    await writeRecords(path.join(t.dir, 'b.ndjson'), 500, 'ndjson', (i) => ({ sku: `S-${i}`, tags: ['x', i], nested: { n: i } }));

    const a = await runCli(['import', dir, '--table', 'products', '--key', 'id', '--schema', shapeFile], {
      stdinFile: path.join(t.dir, 'a.json'),
    });
    expect(a.code, a.stderr).to.equal(0);
    expect(a.stdout).to.match(/imported 2,000 records .* into table 'products'/);
    const b = await runCli(['import', dir, '--table', 'skus', '--key', 'sku'], { stdinFile: path.join(t.dir, 'b.ndjson') });
    expect(b.code, b.stderr).to.equal(0);

    const cache = openCache({ dir, readonly: true });
    try {
      const products = cache.table('products', { schema: zodOfShape(SHAPE) });
      expect(products.count).to.equal(2000);
      expect(products.get(10)).to.deep.equal(product(10));
      expect(products.get(7)).to.deep.equal(product(7));
      expect(cache.table('skus').get('S-42')).to.deep.equal({ sku: 'S-42', tags: ['x', 42], nested: { n: 42 } });
    } finally {
      cache.close();
    }

    const out = await runCli(['export', dir, '--table', 'products']);
    expect(out.code, out.stderr).to.equal(0);
    const back = (JSON.parse(out.stdout) as { id: number }[]).sort((x, y) => x.id - y.id);
    expect(back).to.have.length(2000);
    expect(back[41]).to.deep.equal(product(42));

    const nd = await runCli(['export', dir, '--table', 'skus', '--ndjson']);
    expect(nd.code, nd.stderr).to.equal(0);
    const lines = nd.stdout.trim().split('\n');
    expect(lines).to.have.length(500);
    expect(lines.map((l) => (JSON.parse(l) as { sku: string }).sku).sort()).to.deep.equal(
      Array.from({ length: 500 }, (_, i) => `S-${i + 1}`).sort(),
    );

    // An export re-imports into the same table content.
    const round = path.join(t.dir, 'round.json');
    fs.writeFileSync(round, out.stdout);
    const again = await runCli(['import', path.join(t.dir, 'copy'), '--table', 'products', '--key', 'id', '--schema', shapeFile], {
      stdinFile: round,
    });
    expect(again.code, again.stderr).to.equal(0);
    const copy = await runCli(['export', path.join(t.dir, 'copy'), '--table', 'products']);
    expect((JSON.parse(copy.stdout) as { id: number }[]).sort((x, y) => x.id - y.id)).to.deep.equal(back);

    const stats = await runCli(['stats', dir, '--json']);
    expect(stats.code, stats.stderr).to.equal(0);
    const s = JSON.parse(stats.stdout) as { objects: number; tables: { name: string; count: number; typed: boolean }[]; roots: string[] };
    expect(s.tables.map((x) => [x.name, x.count, x.typed])).to.deep.equal([
      ['products', 2000, true],
      ['skus', 500, false],
    ]);
    expect(s.objects).to.be.greaterThan(2500);
    const text = await runCli(['stats', dir]);
    expect(text.stdout)
      .to.match(/^tables +2$/m)
      .and.match(/^ +products +2,000 entries, capacity [\d,]+, typed$/m);
    expect(text.stdout)
      .to.match(/^objects +[\d,]+$/m)
      .and.match(/^free +.*B\)/m);
  });

  it('stops at malformed input with its line, column and byte, keeping what came before', async () => {
    const dir = path.join(t.dir, 'pile');
    const file = path.join(t.dir, 'bad.ndjson');
    fs.writeFileSync(
      file,
      `${JSON.stringify(product(1))}\n${JSON.stringify(product(2))}\n{"id": 3, "name" "x"}\n${JSON.stringify(product(4))}\n`,
    );
    // Into a new table: the table the import created is removed.
    const fresh = await runCli(['import', dir, '--table', 'p', '--key', 'id'], { stdinFile: file });
    expect(fresh.code).to.equal(1);
    expect(fresh.stderr).to.match(
      /^pile: malformed input at line 3, column 18 \(byte \d+\): Unexpected string; table 'p', which this import created, was removed\n$/,
    );
    // Into an existing table: what came before the error stays.
    expect((await runCli(['import', dir, '--table', 'p', '--key', 'id'], { stdin: JSON.stringify(product(9)) })).code).to.equal(0);
    const r = await runCli(['import', dir, '--table', 'p', '--key', 'id'], { stdinFile: file });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(
      /^pile: malformed input at line 3, column 18 \(byte \d+\): Unexpected string; 2 records imported before it were kept\n$/,
    );
    const cache = openCache({ dir, readonly: true });
    try {
      const p = cache.table('p');
      expect(p.count).to.equal(3);
      expect(p.get(2)).to.deep.equal(product(2));
    } finally {
      cache.close();
    }
    expect((await runCli(['verify', dir])).code).to.equal(0);

    const noKey = path.join(t.dir, 'nokey.json');
    fs.writeFileSync(noKey, '[{"id":1},\n {"name":"no id"}]');
    const k = await runCli(['import', dir, '--table', 'p', '--key', 'id'], { stdinFile: noKey });
    expect(k.code).to.equal(1);
    expect(k.stderr).to.match(/record at line 2, column 2 \(byte 12\) has no string or number field 'id'/);

    const shapeFile = path.join(t.dir, 'shape.json');
    fs.writeFileSync(shapeFile, JSON.stringify({ id: 'int', price: 'money' }));
    const badShape = await runCli(['import', dir, '--table', 'q', '--key', 'id', '--schema', shapeFile], { stdin: '[]' });
    expect(badShape.code).to.equal(1);
    expect(badShape.stderr).to.match(/schema file .*shape.json: field 'price': unknown type 'money'/);
  });

  it('explains a missing table, a missing directory, a locked pile; has --help', async () => {
    const dir = path.join(t.dir, 'pile');
    expect((await runCli(['import', dir, '--table', 'p', '--key', 'id'], { stdin: '[{"id":1}]' })).code).to.equal(0);
    const missing = await runCli(['export', dir, '--table', 'nope']);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.match(/no table named 'nope' in .* \(tables: p\)/);
    const noDir = await runCli(['export', path.join(t.dir, 'none'), '--table', 'p']);
    expect(noDir.code).to.equal(2);
    expect(noDir.stderr).to.match(/no such directory/);
    const cache = openCache({ dir });
    try {
      const locked = await runCli(['import', dir, '--table', 'p', '--key', 'id'], { stdin: '[]' });
      expect(locked.code).to.equal(2);
      expect(locked.stderr).to.match(/is locked/);
      // A read-only command reads cache tables beside a live writer that has them open (checked reads).
      const beside = await runCli(['export', dir, '--table', 'p']);
      expect(beside.code, beside.stderr).to.equal(0);
      expect(JSON.parse(beside.stdout)).to.deep.equal([{ id: 1 }]);
    } finally {
      cache.close();
    }
    const ex = await runCli(['export', dir, '--table', 'p']);
    expect(ex.code, ex.stderr).to.equal(0);
    expect(JSON.parse(ex.stdout)).to.deep.equal([{ id: 1 }]);
    for (const cmd of ['import', 'export', 'stats', 'compact']) {
      const h = await runCli([cmd, '--help']);
      expect(h.code).to.equal(0);
      expect(h.stdout).to.match(new RegExp(`^Usage: pile ${cmd} \\[options\\] <dir>`));
    }
    const usage = await runCli(['import', dir, '--key', 'id']);
    expect(usage.code).to.equal(1);
    expect(usage.stderr).to.match(/required option '--table <name>' not specified/);
  });

  it('imports a file larger than its heap limit with a flat heap (--max-old-space-size=64)', async function () {
    this.timeout(120_000);
    const dir = path.join(t.dir, 'pile');
    const file = path.join(t.dir, 'big.ndjson');
    const n = 400_000;
    const pad = 'lorem ipsum dolor sit amet '.repeat(12);
    await writeRecords(file, n, 'ndjson', (i) => ({ ...product(i), text: `${i} ${pad}` }));
    const size = fs.statSync(file).size;
    expect(size).to.be.greaterThan(150 * 1024 * 1024);
    const r = await runCli(['import', dir, '--table', 'big', '--key', 'id'], { stdinFile: file, nodeArgs: ['--max-old-space-size=64'] });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/imported 400,000 records/);
    fs.rmSync(file);
    const cache = openCache({ dir, readonly: true });
    try {
      const big = cache.table('big');
      expect(big.count).to.equal(n);
      for (const i of [1, 2, 199_999, n]) expect(big.get(i)).to.deep.equal({ ...product(i), text: `${i} ${pad}` });
    } finally {
      cache.close();
    }
  });
  it('reads a --schema given as a pipe once (it can not be read twice)', async function () {
    const dir = path.join(t.dir, 'pile');
    const shapeFile = path.join(t.dir, 'shape.json');
    fs.writeFileSync(shapeFile, JSON.stringify(SHAPE));
    const fifo = path.join(t.dir, 'shape.fifo');
    execFileSync('mkfifo', [fifo]);
    await writeRecords(path.join(t.dir, 'a.ndjson'), 10, 'ndjson');
    // The pipe gives the schema, then an empty second read to a process that opens it again.
    const feeder = spawn('sh', ['-c', `cat "${shapeFile}" > "${fifo}"; : > "${fifo}"`], { stdio: 'ignore' });
    try {
      const r = await runCli(['import', dir, '--table', 'products', '--key', 'id', '--schema', fifo], {
        stdinFile: path.join(t.dir, 'a.ndjson'),
      });
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.match(/imported 10 records/);
    } finally {
      feeder.kill('SIGKILL');
    }
  });

  it('refuses an integer key beyond 2^53 instead of merging two ids into one', async () => {
    const dir = path.join(t.dir, 'pile');
    const input = path.join(t.dir, 'big.ndjson');
    fs.writeFileSync(input, '{"id": 1, "n": "a"}\n{"id": 9007199254740992, "n": "b"}\n{"id": 9007199254740993, "n": "c"}\n');
    const r = await runCli(['import', dir, '--table', 't', '--key', 'id'], { stdinFile: input });
    expect(r.code).to.equal(1);
    // The import created the table, so its failure removes it (an existing table keeps what came before).
    expect(r.stderr).to.match(/line 2.*beyond 2\^53.*write such ids as strings; table 't', which this import created, was removed/);
  });
});
