import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import type { Params, PeerResult } from './Workload';

/** The line prefix a child puts before its JSON result on stdout. */
export const RESULT_MARKER = '@@pile-bench-result ';

/** Heap room for 5 M plain objects in a Map (about 1 GB) with margin. */
const CHILD_FLAGS = ['--expose-gc', '--max-old-space-size=8192'];

/**
 * Runs `workload` / `peer` in a fresh Node process and returns what it reported.
 * stderr is inherited so the child's progress line shows; a crash becomes an `error` result.
 */
export function runChild(workload: string, peer: string, params: Params, timeoutMs: number): PeerResult {
  const script = path.join(__dirname, 'child.js');
  const res = spawnSync(process.execPath, [...CHILD_FLAGS, script, workload, peer, JSON.stringify(params)], {
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    timeout: timeoutMs,
  });
  const line = (res.stdout ?? '')
    .split('\n')
    .reverse()
    .find((l) => l.startsWith(RESULT_MARKER));
  if (res.error !== undefined || res.status !== 0 || line === undefined) {
    const why =
      res.error !== undefined
        ? res.error.message
        : `exit status ${String(res.status)}${res.signal !== null ? ` (signal ${res.signal})` : ''}`;
    return { peer, label: peer, figures: {}, error: `child ${workload}/${peer} failed: ${why}` };
  }
  return JSON.parse(line.slice(RESULT_MARKER.length)) as PeerResult;
}
