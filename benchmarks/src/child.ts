/**
 * Child-process entry: `node --expose-gc dist/child.js <workload> <peer> <params JSON>`.
 * Measures one peer and prints its result as one marked JSON line on stdout.
 */
import { RESULT_MARKER } from './ChildRunner';
import { findWorkload } from './Workloads';
import type { PeerResult } from './Workload';

async function main(): Promise<void> {
  const [workload = '', peer = '', params = '{}'] = process.argv.slice(2);
  let result: PeerResult;
  try {
    result = await findWorkload(workload).measure(peer, JSON.parse(params) as never);
  } catch (err) {
    process.stderr.write(`${workload}/${peer}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    result = { peer, label: peer, figures: {}, error: err instanceof Error ? err.message : String(err) };
    process.exitCode = 1;
  }
  process.stdout.write(`${RESULT_MARKER}${JSON.stringify(result)}\n`);
}

void main();
