// machine.ts: what the training report says about the machine it ran on.
import { cpus, platform, release, totalmem } from 'node:os';
import { cudaInfo } from '../native/addon.js';

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryBytes: number;
  os: string;
  node: string;
  /** The first CUDA device, where the addon was built with CUDA and one is present. */
  gpu: { name: string; computeCapability: string; memoryBytes: number; driverVersion: number; runtimeVersion: number } | null;
  /** Why there is no GPU ('' when there is one). */
  noGpu: string;
}

export function machineInfo(): MachineInfo {
  const c = cpus();
  let gpu: MachineInfo['gpu'] = null;
  let noGpu = '';
  try {
    const i = cudaInfo();
    if (i.built && i.devices > 0)
      gpu = {
        name: i.name,
        computeCapability: i.computeCapability,
        memoryBytes: i.totalBytes,
        driverVersion: i.driverVersion,
        runtimeVersion: i.runtimeVersion,
      };
    else noGpu = i.why || 'no CUDA device';
  } catch (e) {
    noGpu = (e as Error).message;
  }
  return {
    cpu: c[0]?.model.trim() ?? 'unknown',
    cores: c.length,
    memoryBytes: totalmem(),
    os: `${platform()} ${release()}`,
    node: process.version,
    gpu,
    noGpu,
  };
}
