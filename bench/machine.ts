// machine.ts: what the results were measured on, recorded with every results file.
import { cpus, totalmem } from 'node:os';
import { execFileSync } from 'node:child_process';
import { cudaInfo } from '../src/native/addon.js';

export interface Machine {
  name: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
  gpu: string | null;
  driver: string | null;
  cudaRuntime: string | null;
  cudaDriverApi: string | null;
  computeCapability: string | null;
}

const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/\(r\)|\(tm\)/g, '')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
const version = (v: number) => `${Math.floor(v / 1000)}.${(v % 1000) / 10}`;

export function describeMachine(name?: string): Machine {
  const info = cudaInfo();
  const gpu = info.devices > 0 ? info.name : null;
  let driver: string | null = null;
  if (gpu) {
    try {
      driver = execFileSync('nvidia-smi', ['--query-gpu=driver_version', '--format=csv,noheader'], { encoding: 'utf8' }).trim().split('\n')[0] ?? null;
    } catch {
      driver = null;
    }
  }
  const cpu = cpus()[0]?.model.trim() ?? 'unknown';
  return {
    name: name ?? (gpu ? slug(gpu) : `cpu-${cpus().length}core-${slug(cpu)}`),
    cpu,
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    gpu,
    driver,
    cudaRuntime: info.built ? version(info.runtimeVersion) : null,
    cudaDriverApi: gpu ? version(info.driverVersion) : null,
    computeCapability: gpu ? info.computeCapability : null,
  };
}

/** The commit the run measured, recorded with its results so that a figure can be traced to its
 *  code; "+uncommitted" where tracked files differ from it, null outside a git checkout (a copy of
 *  the tree sent to a GPU machine). bench/git-commit.mjs is the same for the .mjs benches. */
export function headCommit(): string | null {
  const git = (...a: string[]) => execFileSync('git', a, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const sha = git('rev-parse', '--short', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') ? `${sha}+uncommitted` : sha;
  } catch {
    return null;
  }
}
