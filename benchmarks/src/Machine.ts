import * as os from 'node:os';
import type { MachineInfo } from './Workload';

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryBytes: os.totalmem(),
    platform: os.platform(),
    release: os.release(),
    arch: os.arch(),
    node: process.version,
    v8: process.versions.v8,
    loadAverage: os.loadavg()[0] ?? 0,
  };
}
