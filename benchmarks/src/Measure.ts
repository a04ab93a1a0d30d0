/** Timing, memory and GC helpers shared by every workload's measuring side (in a child process). */
import { mulberry32 } from '../../fixtures/prng';

/** Sorted copy, ascending. */
function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/**
 * The q-quantile of the values (0 <= q <= 1) with linear interpolation between the closest ranks,
 * as tinybench reports its median and p99.
 */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = s[lo]!;
  const b = s[hi]!;
  return a + (b - a) * (pos - lo);
}

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/**
 * Forced full garbage collection; needs `--expose-gc`. Plain `gc()`: on Node 20,
 * `gc({ type: 'major' })` returns in microseconds without tracing the heap.
 */
export function fullGc(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('the benchmark child must run with --expose-gc');
  gc();
}

/** Milliseconds of `count` forced full GCs, taken while the caller keeps its data alive. */
export function gcPauses(count: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    fullGc();
    out.push(performance.now() - t);
  }
  return out;
}

/** Process memory after a full GC, in bytes. */
export interface MemoryFigures {
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  rss: number;
}

export function memoryAfterGc(): MemoryFigures {
  fullGc();
  const m = process.memoryUsage();
  return { heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers, rss: m.rss };
}

/** `count` random indexes in [0, n), the same for every peer given the same seed. */
export function randomIndexes(n: number, count: number, seed = 42): Uint32Array {
  const next = mulberry32(seed);
  const out = new Uint32Array(count);
  for (let i = 0; i < count; i++) out[i] = Math.floor(next() * n);
  return out;
}

/** Operations per second of `ops` operations that took `ms` milliseconds. */
export function perSecond(ops: number, ms: number): number {
  return ms > 0 ? (ops * 1000) / ms : Number.POSITIVE_INFINITY;
}

/**
 * Keeps a value observable so the JIT can not drop the loop that computed it. The sum lives in a
 * Float64Array: a module-level `let` holding a double is boxed, and V8 11 (Node 20) allocates a
 * new HeapNumber on every store, about 6 ns that the cheapest measured operations would carry.
 */
const sink = new Float64Array(1);
export function consume(x: number): void {
  // One addition: a float modulo here would cost as much as the cheapest operations measured.
  sink[0]! += x;
}
export function sinkValue(): number {
  return sink[0]!;
}
