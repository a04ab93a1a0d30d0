/**
 * A process of the `multiprocess` workload's pile peers:
 * `node dist/PileContender.js <pile dir> <pointers file>`. It opens the pile read-write (as a
 * node:cluster worker does: it takes turns with the others through pile.coord, and its reads are
 * checked), then runs the loops the measuring process asks for, one JSON line each on stdin:
 * `{"op":"get","count":N,"seed":S}` (random typed gets of the records the pointers file names),
 * `{"op":"put","count":N,"base":B,"batch":K}` (typed puts of products B..B+N-1, K to a
 * `pile.batch`, which holds the writer turn across them) and `{"op":"close"}`.
 * It answers each with `{"ms":...,"cpuMs":...}`: wall and CPU time of the loop alone.
 */
import * as fs from 'node:fs';
import * as readline from 'node:readline';
import { openPile, type PilePointer } from '@pile/core';
import { consume, randomIndexes } from './Measure';
import { ProductSchema, product } from './Records';

const [dir = '', pointersFile = ''] = process.argv.slice(2);
const pile = openPile({ dir, checkpointInterval: 0 });
const view = pile.schema('product', ProductSchema);
const raw = fs.readFileSync(pointersFile);
const ptrs = new Float64Array(raw.buffer, raw.byteOffset, raw.byteLength / 8);

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function gets(count: number, seed: number): void {
  const keys = randomIndexes(ptrs.length, count, seed);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const v = view.get(ptrs[k] as PilePointer);
    // Checked: a get that returned another record would make the figures meaningless.
    if (v.id !== k) throw new Error(`multiprocess: get of record ${k} returned record ${v.id}`);
    consume(v.price);
  }
}

function puts(count: number, base: number, batch: number): void {
  if (batch <= 1) {
    for (let i = 0; i < count; i++) view.put(product(base + i));
    return;
  }
  for (let i = 0; i < count; i += batch) {
    const end = Math.min(count, i + batch);
    pile.batch(() => {
      for (let j = i; j < end; j++) view.put(product(base + j));
    });
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const cmd = JSON.parse(line) as { op: string; count: number; seed?: number; base?: number; batch?: number };
  if (cmd.op === 'close') {
    pile.close();
    lines.close();
    process.stdin.destroy();
    return;
  }
  const c0 = cpuMs();
  const t0 = performance.now();
  if (cmd.op === 'get') gets(cmd.count, cmd.seed ?? 1);
  else if (cmd.op === 'put') puts(cmd.count, cmd.base ?? 0, cmd.batch ?? 1);
  else throw new Error(`multiprocess: unknown command ${line}`);
  const ms = performance.now() - t0;
  process.stdout.write(`${JSON.stringify({ ms, cpuMs: cpuMs() - c0 })}\n`);
});
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
