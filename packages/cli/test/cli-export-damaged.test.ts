import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openPile, type PilePointer } from '@pile/core';
import { openCache } from '@pile/cache';
import { cliSuite, runCli } from './CliHarness';

/** Byte of an entry record that says how its value is encoded (docs/cache.md, Entry). */
const E_VALUE_KIND = 33;

/** A table of 10 entries whose values under `damaged` keys can no longer be decoded. */
function damagedTable(dir: string, damaged: string[]): void {
  const pile = openPile({ dir });
  const cache = openCache({ pile, sweepIntervalSec: 0 });
  const t = cache.table<{ n: number }>('t', { collisionMode: 'durable' });
  for (let i = 0; i < 10; i++) t.put(`k${i}`, { n: i });
  const idx = t.idx;
  for (let i = 0; i < idx.capacity; i++) {
    const p = idx.f64[i >>> idx.shift]![3 * (i & idx.mask)]!;
    if (p <= 0) continue;
    const rec = pile.rawBuffer(p as PilePointer);
    const key = rec.toString('utf8', 48, 48 + rec.readUInt32LE(36));
    if (damaged.includes(key)) rec[E_VALUE_KIND] = 99; // an encoding no version writes
  }
  cache.close();
  pile.close();
}

describe('pile export of a damaged table', function () {
  const t = cliSuite('damaged');

  it('stops at the first damaged entry, printing its error code once', async () => {
    const dir = path.join(t.dir, 'pile');
    damagedTable(dir, ['k3']);
    const r = await runCli(['export', dir, '--table', 't']);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^pile: PILE_CORRUPT: cache value/);
    expect(r.stderr).to.not.contain('PILE_CORRUPT: PILE_CORRUPT');
  });

  it('--skip-damaged exports the rest and counts and names what it skipped', async () => {
    const dir = path.join(t.dir, 'pile');
    damagedTable(dir, ['k3', 'k7']);
    const r = await runCli(['export', dir, '--table', 't', '--ndjson', '--skip-damaged']);
    expect(r.code, r.stderr).to.equal(0);
    const ns = r.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { n: number }).n)
      .sort((a, b) => a - b);
    expect(ns).to.deep.equal([0, 1, 2, 4, 5, 6, 8, 9]);
    expect(r.stderr).to.contain("skipped 2 damaged entries of table 't'");
    expect(r.stderr).to.contain('key "k3": PILE_CORRUPT');
    expect(r.stderr).to.contain('key "k7": PILE_CORRUPT');
  });

  /** A pile whose table 't' holds 10 string-bearing values; one byte of k3's value is flipped in its segment file. */
  function flippedValueByte(dir: string): void {
    const pile = openPile({ dir });
    const cache = openCache({ pile, sweepIntervalSec: 0 });
    const t = cache.table<{ s: string }>('t', { collisionMode: 'durable' });
    for (let i = 0; i < 10; i++) t.put(`k${i}`, { s: `value-of-k${i}-payload` });
    cache.close();
    pile.close();
    const needle = Buffer.from('value-of-k3-payload');
    let flipped = 0;
    for (const name of fs.readdirSync(dir)) {
      const file = path.join(dir, name);
      if (name === 'pile.meta' || !fs.statSync(file).isFile()) continue;
      const bytes = fs.readFileSync(file);
      const at = bytes.indexOf(needle);
      if (at < 0) continue;
      // 'payload' becomes 'paylobd': still a valid string, so only the checksum can tell.
      const fd = fs.openSync(file, 'r+');
      fs.writeSync(fd, Buffer.from('b'), 0, 1, at + needle.length - 3);
      fs.closeSync(fd);
      flipped++;
    }
    expect(flipped).to.equal(1);
  }

  it('a flipped payload byte in a segment file stops the export with PILE_CORRUPT naming segment and offset', async () => {
    const dir = path.join(t.dir, 'pile');
    flippedValueByte(dir);
    const r = await runCli(['export', dir, '--table', 't', '--ndjson']);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^pile: PILE_CORRUPT: .*\(segment \d+\), record at offset \d+: .*checksum/);
    expect(r.stdout).to.not.contain('paylobd');
  });

  it('--skip-damaged leaves the flipped record out and names it', async () => {
    const dir = path.join(t.dir, 'pile');
    flippedValueByte(dir);
    const r = await runCli(['export', dir, '--table', 't', '--ndjson', '--skip-damaged']);
    expect(r.code, r.stderr).to.equal(0);
    const values = r.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { s: string }).s)
      .sort();
    expect(values).to.deep.equal([0, 1, 2, 4, 5, 6, 7, 8, 9].map((i) => `value-of-k${i}-payload`));
    expect(r.stderr).to.contain("skipped 1 damaged entry of table 't'");
    expect(r.stderr).to.match(/key "k3": PILE_CORRUPT: .*\(segment \d+\), record at offset \d+/);
  });
});
