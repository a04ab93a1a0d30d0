import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openPile, type PilePointer } from '@pile/core';
import { cliSuite, runCli } from './CliHarness';

const segFiles = (dir: string): string[] => fs.readdirSync(dir).filter((f) => f.startsWith('seg-'));

describe('pile compact', function () {
  const t = cliSuite('compact');

  it('releases emptied trailing segments and keeps every live record', async () => {
    const dir = path.join(t.dir, 'p');
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const keep: PilePointer[] = [];
    const drop: PilePointer[] = [];
    for (let i = 0; i < 3000; i++) (i < 300 ? keep : drop).push(pile.put(`${i}:${'v'.repeat(1000)}`));
    for (const p of drop) pile.delete(p);
    const before = pile.stats.segmentCount;
    pile.close();
    expect(before).to.be.greaterThan(2);
    expect(segFiles(dir)).to.have.length(before);

    const r = await runCli(['compact', dir, '--json']);
    expect(r.code, r.stderr).to.equal(0);
    const res = JSON.parse(r.stdout) as { segmentsBefore: number; segmentsAfter: number; bytesReleased: number };
    expect(res.segmentsBefore).to.equal(before);
    expect(res.segmentsAfter).to.be.lessThan(before);
    expect(res.bytesReleased).to.equal((before - res.segmentsAfter) * (1 << 20));
    expect(segFiles(dir)).to.have.length(res.segmentsAfter);

    const v = await runCli(['verify', dir]);
    expect(v.code, v.stdout).to.equal(0);
    const reopened = openPile({ dir });
    try {
      keep.forEach((p, i) => expect(reopened.get<string>(p).startsWith(`${i}:`)).to.equal(true));
      expect(reopened.stats.objectCount).to.equal(keep.length);
    } finally {
      reopened.close();
    }
  });

  it('runs beside a live writer of another process, taking the writer turn; the writer goes on', async () => {
    const dir = path.join(t.dir, 'p');
    const writer = openPile({ dir, segmentSize: 1 << 20 });
    try {
      const kept = writer.put('kept');
      const r = await runCli(['compact', dir]);
      expect(r.code, r.stderr).to.equal(0);
      expect(writer.get(writer.put('after'))).to.equal('after');
      expect(writer.get(kept)).to.equal('kept');
      expect(writer.verify().ok).to.equal(true);
    } finally {
      writer.close();
    }
  });
});
