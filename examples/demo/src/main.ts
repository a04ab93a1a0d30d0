/**
 * The quick-start demo: the same records as plain JS objects and in a mapped pile, with the
 * full-GC pause and memory of each; then the pile is closed, reopened and read back.
 *
 *   node examples/demo/dist/main.js [--records N] [--dir PATH]
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { z } from 'zod';
import { openPile, type PilePointer } from '@pile/core';

const Product = z.object({ id: z.number().int(), name: z.string(), price: z.number(), score: z.number(), active: z.boolean() });
type Product = z.infer<typeof Product>;

function product(i: number): Product {
  return { id: i, name: `product ${i} of the demo catalog`, price: (i % 1000) * 1.25, score: ((i * 7919) % 101) / 10, active: i % 3 !== 0 };
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

function fullGcMs(): number {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    gc();
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[2]!;
}

const mb = (n: number): string => `${(n / 1048576).toFixed(1)} MB`;
const ms = (n: number): string => `${n.toFixed(1)} ms`;

function main(): void {
  const n = Number(arg('records', '300000'));
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--records must be a positive integer, got ${arg('records', '')}`);
  const dir = path.resolve(arg('dir', path.join(__dirname, '..', '.data')));
  fs.rmSync(dir, { recursive: true, force: true });

  console.log(`Pile demo: ${n.toLocaleString()} records of { id, name, price, score, active }\n`);
  gc();
  const base = process.memoryUsage();

  // 1. Plain objects on the V8 heap.
  let t = performance.now();
  let objects: Product[] | undefined = new Array<Product>(n);
  for (let i = 0; i < n; i++) objects[i] = product(i);
  const objBuild = performance.now() - t;
  const objGc = fullGcMs();
  const objMem = process.memoryUsage();
  console.log(`plain JS objects   build ${ms(objBuild)}  full GC ${ms(objGc)}  heapUsed +${mb(objMem.heapUsed - base.heapUsed)}`);
  if (objects[n - 1]!.id !== n - 1) throw new Error('unreachable');
  objects = undefined;
  gc();

  // 2. The same records in a mapped pile, off the V8 heap.
  const before = process.memoryUsage();
  let pile = openPile({ dir });
  let view = pile.schema('product', Product);
  const ptrs = new Float64Array(n); // pointers kept off the heap too
  t = performance.now();
  for (let i = 0; i < n; i++) ptrs[i] = view.put(product(i));
  const pileBuild = performance.now() - t;
  pile.setRoot('demo:first', ptrs[0] as PilePointer);
  const pileGc = fullGcMs();
  const pileMem = process.memoryUsage();
  const st = pile.stats;
  console.log(
    `Pile (mapped)      build ${ms(pileBuild)}  full GC ${ms(pileGc)}  heapUsed +${mb(Math.max(0, pileMem.heapUsed - before.heapUsed))}  (${st.segmentCount} segment(s), ${mb(st.allocatedBytes)} of records in ${dir})`,
  );
  console.log(`\nfull GC with the records alive: ${(objGc / Math.max(pileGc, 0.01)).toFixed(0)}x shorter with the pile`);

  // 3. Close, reopen, read everything back.
  pile.close();
  t = performance.now();
  pile = openPile({ dir });
  view = pile.schema('product', Product);
  const reopen = performance.now() - t;
  t = performance.now();
  let mismatches = 0;
  for (let i = 0; i < n; i++) {
    const got = view.get(ptrs[i] as PilePointer);
    const want = product(i);
    if (got.id !== want.id || got.name !== want.name || got.price !== want.price || got.score !== want.score || got.active !== want.active)
      mismatches++;
  }
  const readAll = performance.now() - t;
  const first = pile.getRoot('demo:first');
  console.log(
    `reopened in ${ms(reopen)} (recovery scan: ${pile.lastRecovery.ran ? 'yes' : 'no'}), read back ${n.toLocaleString()} records in ${ms(readAll)}: ${mismatches === 0 ? 'all intact' : `${mismatches} MISMATCHES`}`,
  );
  console.log(`root 'demo:first' -> ${first === undefined ? 'missing' : JSON.stringify(pile.get(first))}`);
  const report = pile.verify();
  console.log(
    `verify: ${report.ok ? 'ok' : 'DAMAGE'} (${report.objectsChecked.toLocaleString()} records, ` +
      `${report.recordsChecked.toLocaleString()} blocks with the pile's own checked)`,
  );
  pile.close();
  if (mismatches > 0 || !report.ok || first === undefined) process.exitCode = 1;
}

main();
