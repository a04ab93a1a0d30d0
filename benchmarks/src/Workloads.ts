import { boundedCacheWorkload } from './BoundedCacheWorkload';
import { cacheWorkload } from './CacheWorkload';
import { codecWorkload } from './CodecWorkload';
import { gcWorkload } from './GcWorkload';
import { insertWorkload } from './InsertWorkload';
import { keyvWorkload } from './KeyvWorkload';
import { multiprocessWorkload } from './MultiprocessWorkload';
import { restartWorkload } from './RestartWorkload';
import { scaleWorkload } from './ScaleWorkload';
import { syncWorkload } from './SyncWorkload';
import type { Workload } from './Workload';

/** Every workload, in the order `bench` runs them and the report lists them. */
export const WORKLOADS: readonly Workload[] = [
  gcWorkload,
  codecWorkload,
  insertWorkload,
  restartWorkload,
  cacheWorkload,
  boundedCacheWorkload,
  keyvWorkload,
  syncWorkload,
  scaleWorkload,
  multiprocessWorkload,
];

export function findWorkload(name: string): Workload {
  const w = WORKLOADS.find((x) => x.name === name);
  if (w === undefined) throw new Error(`unknown workload '${name}'; expected one of ${WORKLOADS.map((x) => x.name).join(', ')}`);
  return w;
}
