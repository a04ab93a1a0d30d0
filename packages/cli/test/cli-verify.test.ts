import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openPile } from '@pile/core';
import { cliSuite, runCli } from './CliHarness';

const MARKER = 'record-to-damage-0123456789';

function makePile(dir: string): void {
  const pile = openPile({ dir, segmentSize: 1 << 20 });
  for (let i = 0; i < 200; i++) pile.put({ i, name: `item ${i}` });
  pile.setRoot('marked', pile.put(MARKER));
  pile.close();
}

/** Flips one byte inside the payload of the record holding MARKER; returns the segment file. */
function damage(dir: string): string {
  const file = path.join(
    dir,
    fs.readdirSync(dir).find((f) => f.startsWith('seg-'))!,
  );
  const bytes = fs.readFileSync(file);
  const at = bytes.indexOf(MARKER);
  expect(at).to.be.greaterThan(0);
  bytes[at + 3] ^= 0xff;
  fs.writeFileSync(file, bytes);
  return file;
}

describe('pile verify', function () {
  const t = cliSuite('verify');

  it('exits 0 and says ok on a clean pile', async () => {
    const dir = path.join(t.dir, 'p');
    makePile(dir);
    const r = await runCli(['verify', dir]);
    expect(r.code, r.stderr).to.equal(0);
    // 201 records (what stats counts) and the catalog record of msgpack's structures
    expect(r.stdout).to.match(/^ok: .*1 segments, 202 blocks checked: 201 records and 1 of the pile's own \(catalog/m);
    const stats = await runCli(['stats', dir]);
    expect(stats.stdout).to.match(/objects\s+201\b/);
  });

  it('exits 1 and lists the corrupt record of a damaged pile', async () => {
    const dir = path.join(t.dir, 'p');
    makePile(dir);
    damage(dir);
    const r = await runCli(['verify', dir]);
    expect(r.code).to.equal(1);
    expect(r.stdout).to.match(/DAMAGED/);
    expect(r.stdout).to.match(/1 corrupt record:\n\s+segment 0 offset \d+ \(.*seg-000000\.pile\): .*checksum/);
    expect(r.stderr).to.match(/^pile: .* is damaged/);
    const json = await runCli(['verify', dir, '--json']);
    expect(json.code).to.equal(1);
    const report = JSON.parse(json.stdout) as { ok: boolean; corrupt: { segment: number; offset: number }[] };
    expect(report.ok).to.equal(false);
    expect(report.corrupt).to.have.length(1);
    expect(report.corrupt[0]!.segment).to.equal(0);
  });

  it('exits 2 with a clear message for a missing directory, a non-pile and a locked pile', async () => {
    const missing = await runCli(['verify', path.join(t.dir, 'nope')]);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.match(/^pile: .*nope: no such directory/);
    expect(fs.existsSync(path.join(t.dir, 'nope')), 'verify must not create a directory').to.equal(false);

    fs.writeFileSync(path.join(t.dir, 'unrelated.txt'), 'x');
    const notPile = await runCli(['verify', t.dir]);
    expect(notPile.code).to.equal(2);
    expect(notPile.stderr).to.match(/is not a pile/);
    expect(fs.readdirSync(t.dir).sort(), 'a non-pile directory is left as it was').to.deep.equal(['unrelated.txt']);

    const dir = path.join(t.dir, 'p');
    makePile(dir);
    const writer = openPile({ dir });
    try {
      // A writing verify beside another writer takes the writer turn and runs.
      const beside = await runCli(['verify', dir]);
      expect(beside.code, beside.stderr).to.equal(0);
      // A read-only verify runs beside a live writer too (its reads are checked).
      const reading = await runCli(['verify', dir, '--readonly']);
      expect(reading.code, reading.stderr).to.equal(0);
      expect(reading.stdout).to.match(/read-only check/);
    } finally {
      writer.close();
    }
    const ro = await runCli(['verify', dir, '--readonly']);
    expect(ro.code, ro.stderr).to.equal(0);
    expect(ro.stdout).to.match(/read-only check/);
  });

  it('exits 2 when a file of the pile is damaged so badly it can not be opened', async () => {
    const dir = path.join(t.dir, 'p');
    makePile(dir);
    const meta = path.join(dir, 'pile.meta');
    const bytes = fs.readFileSync(meta);
    bytes.fill(0xee, 0, 16);
    fs.writeFileSync(meta, bytes);
    const r = await runCli(['verify', dir]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/^pile: .*(damaged|newer)/);
  });

  it('has --help', async () => {
    const r = await runCli(['verify', '--help']);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.match(/Usage: pile verify \[options\] <dir>/);
    expect(r.stdout).to.match(/--readonly/);
  });
});
