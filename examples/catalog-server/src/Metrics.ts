import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** Pauses of one kind of garbage collection. */
export interface GcFigures {
  count: number;
  totalMs: number;
  maxMs: number;
}

/** Counts garbage-collection pauses by kind, from perf_hooks 'gc' entries. */
export class GcMonitor {
  readonly byKind: Record<string, GcFigures> = {};
  private readonly observer: PerformanceObserver;

  constructor() {
    this.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) this.record(e);
    });
    this.observer.observe({ entryTypes: ['gc'] });
  }

  private record(e: PerformanceEntry): void {
    const detail = (e as PerformanceEntry & { detail?: { kind?: number } }).detail;
    const kind = GC_KINDS[detail?.kind ?? -1] ?? 'other';
    const f = (this.byKind[kind] ??= { count: 0, totalMs: 0, maxMs: 0 });
    f.count++;
    f.totalMs += e.duration;
    if (e.duration > f.maxMs) f.maxMs = e.duration;
  }

  stop(): void {
    this.observer.disconnect();
  }
}

/** One Prometheus metric family in text exposition format 0.0.4. */
export function promFamily(
  name: string,
  type: 'counter' | 'gauge',
  help: string,
  samples: [labels: Record<string, string>, value: number][],
): string {
  const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
  for (const [labels, value] of samples) {
    const l = Object.entries(labels)
      .map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
      .join(',');
    lines.push(`${name}${l === '' ? '' : `{${l}}`} ${Number.isFinite(value) ? value : 0}`);
  }
  return `${lines.join('\n')}\n`;
}
