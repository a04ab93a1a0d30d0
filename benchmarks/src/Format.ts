/** Number formatting for the report's tables. */

export function fmtCount(n: number): string {
  if (n >= 1e6 && n % 1e5 === 0) return `${n / 1e6} M`;
  if (n >= 1e3 && n % 100 === 0 && n < 1e6) return `${n / 1e3} k`;
  return n.toLocaleString('en-US');
}

/** Operations per second with a k / M suffix. */
export function fmtRate(perSec: number | undefined): string {
  if (perSec === undefined || !Number.isFinite(perSec)) return '–';
  if (perSec >= 1e6) return `${(perSec / 1e6).toFixed(2)} M/s`;
  if (perSec >= 1e3) return `${(perSec / 1e3).toFixed(1)} k/s`;
  return `${perSec.toFixed(0)} /s`;
}

export function fmtMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '–';
  if (ms >= 10000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 1) return `${ms.toFixed(1)} ms`;
  if (ms >= 0.01) return `${ms.toFixed(2)} ms`;
  return `${(ms * 1000).toFixed(2)} µs`;
}

export function fmtUs(us: number | undefined): string {
  if (us === undefined || !Number.isFinite(us)) return '–';
  if (us >= 1000) return `${(us / 1000).toFixed(2)} ms`;
  return `${us.toFixed(us >= 10 ? 1 : 2)} µs`;
}

export function fmtBytes(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes)) return '–';
  const mb = bytes / (1 << 20);
  if (mb >= 1024) return `${(mb / 1024).toFixed(2)} GB`;
  if (mb >= 10) return `${mb.toFixed(0)} MB`;
  return `${mb.toFixed(1)} MB`;
}

export function fmtRatio(r: number): string {
  if (!Number.isFinite(r)) return '–';
  if (r >= 100) return `${r.toFixed(0)}x`;
  if (r >= 10) return `${r.toFixed(1)}x`;
  if (r >= 0.1) return `${r.toFixed(2)}x`;
  return `1/${(1 / r).toFixed(0)}`;
}
