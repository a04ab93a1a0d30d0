import { expect } from 'chai';
import * as path from 'node:path';
import { z } from 'zod';
import { openCache } from '@pile/cache';
import { cliSuite, runCli } from './CliHarness';

describe('pile stats', function () {
  const t = cliSuite('stats');

  it('counts the entries of a typed table that a program made, without knowing its schema', async () => {
    const dir = path.join(t.dir, 'pile');
    const cache = openCache({ dir, segmentSize: 1 << 20, sweepIntervalSec: 0 });
    const users = cache.table('users', { schema: z.object({ name: z.string(), age: z.number().int() }), collisionMode: 'durable' });
    for (let i = 0; i < 300; i++) users.put(`u${i}`, { name: `user ${i}`, age: i % 90 });
    const notes = cache.table<string>('notes');
    notes.put(1, 'one');
    cache.close();

    const r = await runCli(['stats', dir, '--json']);
    expect(r.code, r.stderr).to.equal(0);
    const s = JSON.parse(r.stdout) as { tables: { name: string; count: number; capacity: number; typed: boolean }[] };
    expect(s.tables.map((x) => [x.name, x.count, x.typed])).to.deep.equal([
      ['users', 300, true],
      ['notes', 1, false],
    ]);
    expect(s.tables[0]!.capacity).to.be.at.least(300);
    const text = await runCli(['stats', dir]);
    expect(text.stdout).to.match(/^ +users +300 entries, capacity [\d,]+, typed$/m);
  });
});
