// doctor.ts: what this installation of nn-arena can do here, for `nn-arena doctor` and bug
// reports: the package, the binary loaded (prebuilt or local, CPU or CUDA, its architectures),
// the CPU, the GPU and driver, cuBLAS, and which backend 'auto' picks and why.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { NnArenaError } from '../core/errors.js';
import { loadAddon, nvidiaDriverVisible, packageRoot } from './loader.js';
import type { CudaInfo, NativeAddon } from './addon.js';

export interface DoctorReport {
  version: string;
  node: string;
  platform: string;
  binary:
    | { loaded: true; variant: 'prebuilt' | 'local'; flavor: 'cpu' | 'cuda'; path: string; reason: string; archs: string[]; cudaRuntime: string | null }
    | { loaded: false; code: string; message: string };
  cpu: { model: string; threads: number; avx2: boolean; avx512: boolean; fma: boolean; neon: boolean };
  gpu: null | {
    name: string;
    computeCapability: string;
    driver: string | null;
    /** Whether the loaded binary has kernels for it; null when the binary is CPU-only. */
    covered: boolean | null;
    source: 'cuda' | 'nvidia-smi';
  };
  /** 'cublas', 'tiled (why)', or null when no GPU is usable. */
  cublas: string | null;
  /** 'found' (the forward products' epilogues use it by default; NN_ARENA_CUBLASLT), why not, or null when no GPU is usable. */
  cublasLt: string | null;
  auto: { backend: 'cpu' | 'cuda'; why: string };
}

export function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

const version = (v: number) => (v ? `${Math.floor(v / 1000)}.${(v % 1000) / 10}` : null);

function cpuInfo(): DoctorReport['cpu'] {
  let flags = new Set<string>();
  let model = cpus()[0]?.model ?? 'unknown';
  try {
    const text = readFileSync('/proc/cpuinfo', 'utf8');
    flags = new Set((/^flags\s*:(.*)$/m.exec(text)?.[1] ?? '').trim().split(/\s+/));
    model = /^model name\s*:(.*)$/m.exec(text)?.[1]?.trim() ?? model;
  } catch {
    /* not Linux */
  }
  // NEON (Advanced SIMD) is part of every AArch64 CPU: the GEMM's NEON kernels always run there.
  return {
    model,
    threads: availableParallelism(),
    avx2: flags.has('avx2'),
    avx512: flags.has('avx512f'),
    fma: flags.has('fma'),
    neon: process.arch === 'arm64',
  };
}

/** nvidia-smi's view of GPU 0 (for a CPU-only binary, which cannot ask CUDA). */
function smi(): { name: string; computeCapability: string; driver: string } | null {
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=name,compute_cap,driver_version', '--format=csv,noheader'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
    });
    const [name, cc, driver] = (out.split('\n')[0] ?? '').split(',').map((s) => s.trim());
    return name ? { name, computeCapability: cc ?? '', driver: driver ?? '' } : null;
  } catch {
    return null;
  }
}

export function doctor(): DoctorReport {
  const base = { version: packageVersion(), node: process.versions.node, platform: `${process.platform}-${process.arch}`, cpu: cpuInfo() };
  let loaded;
  try {
    loaded = loadAddon<NativeAddon>();
  } catch (e) {
    const err = e as NnArenaError;
    return {
      ...base,
      binary: { loaded: false, code: err.code ?? 'NO_ADDON', message: err.message },
      gpu: gpuBySmi(null),
      cublas: null,
      cublasLt: null,
      auto: { backend: 'cpu', why: 'no binary loaded' },
    };
  }
  const info: CudaInfo = loaded.addon.cudaInfo();
  const archs = (info.archs ?? '').split(/\s+/).filter(Boolean);
  const binary = {
    loaded: true as const,
    variant: loaded.variant,
    flavor: loaded.flavor,
    path: loaded.path,
    reason: loaded.reason,
    archs,
    cudaRuntime: info.built ? `${version(info.runtimeVersion)} (static)` : null,
  };
  const usable = info.built && info.devices > 0;
  let gpu: DoctorReport['gpu'];
  if (info.built && info.name) {
    gpu = { name: info.name, computeCapability: info.computeCapability, driver: version(info.driverVersion), covered: !info.noKernelImage, source: 'cuda' };
  } else {
    gpu = gpuBySmi(info.built ? archs : null);
  }
  const why = usable
    ? `CUDA device 0: ${info.name} (compute capability ${info.computeCapability})`
    : info.built
      ? info.why
      : gpu
        ? `this binary is CPU-only (${loaded.reason}); a GPU is here: install the CUDA variant or build from source with nvcc (see the README, Install)`
        : info.why || 'this binary is CPU-only';
  return {
    ...base,
    binary,
    gpu,
    cublas: usable ? info.gemm : null,
    cublasLt: usable ? (info.cublasLt ? info.cublasLt : 'found') : null,
    auto: { backend: usable ? 'cuda' : 'cpu', why },
  };
}

function gpuBySmi(archs: string[] | null): DoctorReport['gpu'] {
  if (!nvidiaDriverVisible()) return null;
  const s = smi();
  if (!s) return null;
  const cc = s.computeCapability.replace('.', '');
  const covered = archs ? archs.some((a) => a === `sm_${cc}`) : null;
  return { name: s.name, computeCapability: s.computeCapability, driver: s.driver, covered, source: 'nvidia-smi' };
}
