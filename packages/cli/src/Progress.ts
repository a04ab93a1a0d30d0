import { SingleBar } from 'cli-progress';

/**
 * A progress bar on stderr. It draws only when stderr is a terminal, so piped or captured output
 * (scripts, CI) stays free of control characters.
 */
export class Progress {
  private readonly bar: SingleBar | undefined;
  private started = false;
  private last = 0;

  constructor(
    label: string,
    private readonly unit: 'bytes' | 'items',
  ) {
    if (process.stderr.isTTY) {
      this.bar = new SingleBar({
        stream: process.stderr,
        format: `${label} [{bar}] {percentage}% | {value_fmt} / {total_fmt} | {rate} | ETA {eta_formatted}`,
        barCompleteChar: '█',
        barIncompleteChar: '░',
        hideCursor: true,
        etaBuffer: 50,
        fps: 10,
      });
    }
  }

  /** Starts (first call) or advances the bar; `total` 0 means unknown. */
  update(done: number, total: number): void {
    if (this.bar === undefined) return;
    const payload = this.payload(done, total);
    if (!this.started) {
      this.started = true;
      this.bar.start(total > 0 ? total : 1, done, payload);
      return;
    }
    const now = Date.now();
    if (now - this.last < 50 && done < total) return;
    this.last = now;
    if (total > 0) this.bar.setTotal(total);
    this.bar.update(done, payload);
  }

  stop(): void {
    if (this.bar !== undefined && this.started) this.bar.stop();
  }

  private readonly t0 = Date.now();

  private payload(done: number, total: number): Record<string, string> {
    const secs = Math.max((Date.now() - this.t0) / 1000, 0.001);
    const fmt = this.unit === 'bytes' ? formatBytes : formatCount;
    return {
      value_fmt: fmt(done),
      total_fmt: total > 0 ? fmt(total) : '?',
      rate: `${fmt(done / secs)}/s`,
    };
  }
}

/**
 * Runs a whole-pile pass (`verify`, `compact`) under a progress bar, then stops the bar and closes
 * the pile whatever the pass did: the pile is opened for this one pass only.
 */
export function runClosing<T>(
  pile: { close(): void },
  label: string,
  pass: (onProgress: (p: { done: number; total: number }) => void) => T,
): T {
  const bar = new Progress(label, 'items');
  try {
    return pass((p) => bar.update(p.done, p.total));
  } finally {
    bar.stop();
    pile.close();
  }
}

/** `1.5 MiB`, `812 B`. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** `1,234,567`. */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
