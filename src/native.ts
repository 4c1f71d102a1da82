// native.ts: the addon (loaded by src/loader.ts) and turns its coded errors into ArenaError.
// Only this file touches the addon; the planner works without it.
import { ArenaError } from './errors.js';
import { loadAddon } from './loader.js';

export interface NativeStats {
  hostAllocs: number; deviceAllocs: number; hostFrees: number; deviceFrees: number;
  toDeviceTransfers: number; toDeviceBytes: number; toHostTransfers: number; toHostBytes: number;
}

export interface NativeHandle {
  transfer(dir: 'toDevice' | 'toHost', ranges: number[]): number;
  transferAll(dir: 'toDevice' | 'toHost'): number;
  prefetch(ranges: number[], where: 'device' | 'host'): void;
  advise(ranges: number[], advice: string, where: 'device' | 'host', unset: boolean): void;
  view(offset: number, bytes: number): ArrayBuffer;
  stats(): NativeStats;
  dispose(): boolean;
  addresses(): { host: bigint; device: bigint };
  probeBind(): BigUint64Array;
  deviceHeader(): DecodedHeader;
  /** One training / evaluation run (csrc/train/train.h RunParams); resolves when complete. */
  run(params: Record<string, number | boolean>): Promise<RunPath>;
  /** Budgeted arenas: where each region is, the plan's counters, the device memory measured. */
  residency(): NativeResidency;
}

export interface ResidencyCounters {
  runs: number; steps: number; fetches: number; fetchedBytes: number; placedBytes: number;
  writeBacks: number; writtenBackBytes: number; drops: number; droppedBytes: number;
  compactions: number; peakScheduledBytes: number;
}

export interface NativeResidency {
  placement: 'scheduler' | 'on-demand' | 'staged'; budget: number; granule: number; measured: boolean;
  baselineDeviceBytes: number; peakDeviceInUse: number; peakDeviceBytes: number; samples: number; scheduledBytes: number;
  waitMicros: number; fetchMicros: number; evictMicros: number;
  lastRun: ResidencyCounters; total: ResidencyCounters;
  regions: Array<{ layer: number; kind: number; offset: number; bytes: number; resident: boolean; lastPrefetch?: 'device' | 'host' | 'none'; location?: string }>;
}

/** Host <-> device rates in GB/s (csrc/bench/link_bench.cu). */
export interface LinkRates {
  bytes: number; copyToDevice: number; copyToHost: number; prefetchToDevice: number; prefetchToHost: number;
  /** The way back split over 4 threads and streams. */
  prefetchToHost4: number;
  /** Device memory still taken once the range is back on the host (the driver keeps GPU pages). */
  prefetchRetainedBytes: number;
  discardToHost: number; discardToDevice: number; discardOnly: number; discardFreedBytes: number;
  /** '' when the driver discards; else why not. */
  discard: string;
}

/** Which code ran a training run: the CPU backend, the fused CUDA kernel (one launch per run),
 *  or the per-layer CUDA path with cuBLAS or nn-arena's tiled products. */
export type RunPath = 'cpu' | 'fused' | 'layers (cublas)' | 'layers (tiled)';

export interface DecodedHeader {
  magic: number; version: number; dtype: number; order: number; optimizer: number; numLayers: number;
  batch: bigint; samples: bigint; align: bigint; headerBytes: bigint; totalBytes: bigint;
  layers: Array<{ units: bigint; fanIn: bigint; activation: number; regions: Array<[bigint, bigint]> }>;
}

export interface CudaInfo {
  built: boolean; devices: number; why: string; name: string; runtimeVersion: number; driverVersion: number;
  computeCapability: string; freeBytes: number; totalBytes: number;
  /** Who runs the per-layer products: 'cublas' (found at run time) or 'tiled (why not cuBLAS)'; '' without CUDA. */
  gemm: string;
  /** The architectures the binary holds, e.g. 'sm_75 sm_80 … compute_120' ('' without CUDA). */
  archs?: string;
  /** A GPU is present but the binary has no kernels for it (devices is 0; why says how to rebuild). */
  noKernelImage?: boolean;
}

export interface NativeAddon {
  ArenaHandle: new (header: Uint8Array, options: { cuda: boolean; pinned: boolean; managed: boolean; staged?: boolean; budget?: number; scheduled?: boolean }) => NativeHandle;
  CopyBench: new (cuda: boolean, sizes: number[], pinned: boolean) => { run(dir: 'toDevice' | 'toHost'): number; dispose(): void };
  decodeHeader(bytes: Uint8Array): DecodedHeader;
  validateHeader(bytes: Uint8Array, available?: number | bigint): string;
  layoutInfo(): Record<string, unknown>;
  cudaInfo(): CudaInfo;
  crc32c(bytes: Uint8Array, crc?: number): number;
  minDeviceBudget(header: Uint8Array, placement: 'managed' | 'staged'): { bytes: number; stage: string; layer: number };
  replayResidency(header: Uint8Array, placement: 'managed' | 'staged', budget: number, runs: Array<Record<string, number | boolean>>, blas?: boolean): { error: string; phases: number; counters: ResidencyCounters };
  measureLink(bytes: number): LinkRates;
}

/** The addon: a local build (build/Release) or the package's prebuilt binary (src/loader.ts). */
export function native(): NativeAddon {
  return loadAddon<NativeAddon>().addon;
}

/** Calls into the addon, rethrowing its coded errors as ArenaError. */
export function call<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw asArenaError(e);
  }
}

export function asArenaError(e: unknown): unknown {
  if (e instanceof ArenaError) return e;
  if (e instanceof Error && typeof (e as { code?: unknown }).code === 'string') {
    return new ArenaError((e as Error & { code: string }).code, e.message, { cause: e });
  }
  return e;
}

/** What the CUDA side of this build can do here (never throws for a missing GPU). */
export function cudaInfo(): CudaInfo {
  return call(() => native().cudaInfo());
}
