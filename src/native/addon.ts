// addon.ts: the addon (loaded by src/native/loader.ts: a local build or the package's prebuilt binary)
// and its coded errors, turned into the class of their code (src/core/errors.ts). Only this file
// touches the addon.
import { fromNative } from '../core/errors.js';
import { LOSS_TABLE, PRECISION_TABLE, RUN_CODES } from './tables.generated.js';
import { loadAddon } from './loader.js';

export interface NativeStats {
  hostAllocs: number;
  deviceAllocs: number;
  hostFrees: number;
  deviceFrees: number;
  toDeviceTransfers: number;
  toDeviceBytes: number;
  toHostTransfers: number;
  toHostBytes: number;
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
  /** One training / evaluation run; resolves when complete. */
  run(params: RunParams): Promise<RunPath>;
  /** A run that may be queued while this arena's earlier queued runs are in flight (it starts
   *  when they end), bringing back what the next run would change: the arena's bytes
   *  [statsOffset, + statsBytes), clipping's norms, fp16's [scale, good, skipped]. skipped:
   *  nothing ran, because a run queued before it failed or found its one model diverged (until
   *  a run with `first`). */
  runQueued(params: RunParams, statsOffset: number, statsBytes: number, first: boolean): Promise<QueuedRun>;
  /** run()'s work on the calling thread, for runs shorter than a worker's round trip (the
   *  Trainer's choice: src/train/runner.ts). `into` / `back`: byte ranges [offset, bytes, ...]
   *  uploaded before the run and read back after it, with it (on plain device memory, on the
   *  run's stream: one wait for all). The run's parameters are `base`'s with `params`' over
   *  them; `base` must be frozen, and is read once for as long as the same object comes back
   *  (the Trainer's shared parameters: a step reads only its own few). BUSY with anything in
   *  flight; NOT_SUPPORTED on a group's or a budgeted arena. */
  runInline(base: Readonly<Partial<RunParams>>, params: Partial<RunParams>, into?: number[], back?: number[]): RunPath;
  /** predict()'s batches on the calling thread in one call (csrc/addon/inline_run.h): x's rows
   *  read natively into z[0] batch by batch, each run forward (`params`, rows set per batch) with
   *  its upload and the read-back of its outputs, copied into `out` (the arena's dtype). bad >= 0:
   *  x[bad] is not finite (`value`), nothing from its batch on ran. null: an x it does not read
   *  (Float16Array). As runInline: BUSY, NOT_SUPPORTED on a group's or a budgeted arena. */
  predictRows(
    base: Readonly<Partial<RunParams>>,
    params: Partial<RunParams>,
    x: ArrayBufferView,
    count: number,
    out: Float32Array | Float64Array,
    shape: [z0Offset: number, zOutOffset: number, inputs: number, outputs: number, batch: number],
  ): { path: RunPath; batches: number; bad: number; value: number } | null;
  /** The global gradient norm of each step of the last run that clipped (step s, model m at s * K + m). */
  gradNorms(): Float64Array;
  /** [scale, good steps, steps skipped] after the last run that scaled its loss. */
  lossScale(): Float64Array;
  /** Steps of the last run that ran as a CUDA graph launch (the per-layer path's captured step). */
  graphSteps(): number;
  /** Products of the last run's first step with a fused cuBLASLt epilogue (bias, activation, their gradients); for tests. */
  epilogues(): number;
  /** Budgeted arenas: where each region is, the plan's counters, the device memory measured. */
  residency(): NativeResidency;
  /** Resolves once no run or JIT launch is in flight on this arena. */
  synchronize(): Promise<void>;
}

export interface ResidencyCounters {
  runs: number;
  steps: number;
  fetches: number;
  fetchedBytes: number;
  placedBytes: number;
  writeBacks: number;
  writtenBackBytes: number;
  drops: number;
  droppedBytes: number;
  compactions: number;
  peakScheduledBytes: number;
}

export interface NativeResidency {
  placement: 'scheduler' | 'on-demand' | 'staged';
  budget: number;
  granule: number;
  measured: boolean;
  baselineDeviceBytes: number;
  peakDeviceInUse: number;
  peakDeviceBytes: number;
  samples: number;
  scheduledBytes: number;
  waitMicros: number;
  fetchMicros: number;
  evictMicros: number;
  lastRun: ResidencyCounters;
  total: ResidencyCounters;
  regions: Array<{
    layer: number;
    kind: number;
    offset: number;
    bytes: number;
    resident: boolean;
    lastPrefetch?: 'device' | 'host' | 'none';
    location?: string;
  }>;
}

/** Host <-> device rates in GB/s (the bench's test/native/link_bench.cu). */
export interface LinkRates {
  bytes: number;
  copyToDevice: number;
  copyToHost: number;
  prefetchToDevice: number;
  prefetchToHost: number;
  /** The way back split over 4 threads and streams. */
  prefetchToHost4: number;
  /** Device memory still taken once the range is back on the host (the driver keeps GPU pages). */
  prefetchRetainedBytes: number;
  discardToHost: number;
  discardToDevice: number;
  discardOnly: number;
  discardFreedBytes: number;
  /** '' when the driver discards; else why not. */
  discard: string;
}

/** Numeric codes that cross to the native side: generated from the C enums (csrc/train/train.h
 *  Op, csrc/core/backend.h Memory), the loss and precision tables (NNA_LOSSES, NNA_PRECISIONS). */
export const OPS = RUN_CODES.ops;
type LossRow = (typeof LOSS_TABLE)[number];
export const LOSSES = Object.fromEntries(LOSS_TABLE.map((l) => [l.name, l.code])) as { readonly [L in LossRow as L['name']]: L['code'] };
export type LossName = LossRow['name'];
/** How a run's products are computed (the generated table of NNA_PRECISIONS,
 *  csrc/descriptors/precisions.h); storage stays float32. */
type PrecisionRow = (typeof PRECISION_TABLE)[number];
export const PRECISIONS = Object.fromEntries(PRECISION_TABLE.map((p) => [p.name, p.code])) as { readonly [P in PrecisionRow as P['name']]: P['code'] };
export type PrecisionName = PrecisionRow['name'];
export const MEMORY_KINDS = RUN_CODES.memory;

/** One run's parameters: the TS mirror of struct RunParams in csrc/train/train.h. The addon
 *  converts every field before it touches the arena: an unknown key or a wrong type is
 *  ArenaError BAD_ARGUMENT, never a silent default. Omitted fields take the struct's defaults. */
export interface RunParams {
  op: (typeof OPS)[keyof typeof OPS];
  loss?: (typeof LOSSES)[keyof typeof LOSSES];
  /** Label smoothing of the losses that take it (cross-entropy): [0, 1]. */
  labelSmoothing?: number;
  /** Dropout layers' masks (nna_dropout_keep): the Trainer's dropoutSeed. */
  dropoutSeed?: number;
  /** Products in FP32 (default), TF32 or 3xTF32 (CUDA, float32 arenas only). */
  precision?: (typeof PRECISIONS)[PrecisionName];
  /** Rows from the resident data set (xdata/ydata), else z[0]/y as they stand. */
  resident?: boolean;
  /** Zero the stats region first (default true). */
  resetStats?: boolean;
  rows?: number;
  samples?: number;
  firstBatch?: number;
  numBatches?: number;
  permA?: number;
  permC?: number;
  stepBase?: number;
  lr?: number;
  /** The optimizers' other hyperparameters, by their names in the optimizer table
   *  (src/layout/optimizers.ts): momentum, nesterov, beta1, beta2, eps, weightDecay,
   *  decayBiases; and clipGradNorm. */
  [hyper: string]: number | boolean | number[] | ScheduleParams | undefined;
  /** The learning rate of step t: a schedule of the table, evaluated natively per step. */
  schedule?: ScheduleParams;
  /** Data parallelism (one replica of a group): resident runs read rows
   *  [shardOffset, shardOffset + batch) of every global batch of globalBatch rows, and the loss
   *  mean divides by the group's rows; runs on z[0]/y divide by lossRows. */
  globalBatch?: number;
  shardOffset?: number;
  lossRows?: number;
  /** All-reduce gradients and stats over the arena's group (CUDA + NCCL). */
  reduce?: boolean;
  /** K-model arenas: one learning rate per model (length = the header's models); else `lr`. */
  lrs?: number[];
  /** precision 'fp16' (csrc/train/loss_scale.h): the loss scale and its growth tracker at the
   *  run's start, and the GradScaler settings; the run leaves them in the handle's lossScale(). */
  lossScale?: number;
  lossScaleGood?: number;
  lossScaleGrowth?: number;
  lossScaleBackoff?: number;
  lossScaleInterval?: number;
}

/** A learning-rate schedule: its type and parameters, by their names in the schedule table. */
export interface ScheduleParams {
  type: string;
  [param: string]: number | string;
}

/** Options of a native arena: the TS mirror of struct BlockOptions (csrc/core/block.h) plus the
 *  budget of csrc/budget/budgeted_block.h. */
export interface NativeArenaOptions {
  cuda: boolean;
  pinned: boolean;
  memory: (typeof MEMORY_KINDS)[keyof typeof MEMORY_KINDS];
  /** Managed or staged memory: bytes of the arena the device may hold; absent: no budget. The
   *  native side is the one place a budget is checked (csrc/budget/budgeted_block.cc). */
  budget?: number;
  /** Managed memory with a budget: run the prefetch scheduler (else pages fault in on demand). */
  scheduled: boolean;
  /** CUDA device index (default 0). */
  device?: number;
}

/** What a data-parallel group's all-reduce carries (DataParallelOptions.gradients). */
export type GradientWire = 'full' | 'bf16';

export interface NcclInfo {
  available: boolean;
  /** NCCL_VERSION_CODE of the library found (22805 is 2.28.5); 0 when none. */
  version: number;
  why: string;
}

/** Which code ran a training run: the CPU backend, the fused CUDA kernel (one launch per run),
 *  or the per-layer CUDA path with cuBLAS or nn-arena's tiled products. */
export type RunPath = 'cpu' | 'fused' | 'layers (cublas)' | 'layers (tiled)';

export interface DecodedHeader {
  magic: number;
  version: number;
  dtype: number;
  order: number;
  optimizer: number;
  numLayers: number;
  batch: bigint;
  samples: bigint;
  align: bigint;
  headerBytes: bigint;
  totalBytes: bigint;
  flags: bigint;
  /** Networks in the arena; 0 (one model) in older headers and one-model plans. */
  models: bigint;
  layers: Array<{ units: bigint; fanIn: bigint; activation: number; regions: Array<[bigint, bigint]> }>;
  /** The kind table, read through nna_extra_* of the public header; `found` is nna_extra_find of the name. */
  extras: Array<{ name: string; found: number; rule: number; like: number; elemBytes: number; regions: Array<[bigint, bigint]> }>;
}

export interface CudaInfo {
  built: boolean;
  devices: number;
  why: string;
  name: string;
  runtimeVersion: number;
  driverVersion: number;
  computeCapability: string;
  freeBytes: number;
  totalBytes: number;
  /** Who runs the per-layer products: 'cublas' (found at run time) or 'tiled (why not cuBLAS)'; '' without CUDA. */
  gemm: string;
  /** '' where cuBLASLt was found (the forward products' epilogues use it by default; NN_ARENA_CUBLASLT), else why not ('' without CUDA). */
  cublasLt?: string;
  /** The architectures the binary holds, e.g. 'sm_75 sm_80 … compute_120' ('' without CUDA). */
  archs?: string;
  /** A GPU is present but the binary has no kernels for it (devices is 0; why says how to rebuild). */
  noKernelImage?: boolean;
}

/** What a queued run brings back (runQueued, NativeWindowStager.run); stats is empty where it did not run. */
export interface Readback {
  path: RunPath;
  stats: ArrayBuffer;
  gradNorms: Float64Array;
  lossScale: Float64Array;
}
export interface QueuedRun extends Readback {
  skipped: boolean;
}

/** A streaming fit's window buffers (csrc/addon/window_stager.h): host slots JS fills, checked
 *  and uploaded to a device staging buffer off the JS thread, committed into the data regions. */
export interface NativeWindowStager {
  /** Slot i: x rows at byte 0, y rows at xCapacity. */
  slot(i: number): ArrayBuffer;
  /** Slot i's rows to its device staging buffer; resolves once there. */
  upload(slot: number, xBytes: number, yBytes: number): Promise<void>;
  /** A run on slot i's staged rows: they go into xdata / ydata first, checked on the way, and
   *  the arena's bytes [statsOffset, + statsBytes) come back with it. May be queued behind a
   *  run in flight. gradNorms: the run's clipping norms; lossScale: [scale, good, skipped] after it
   *  (fp16: a run after a fit's first goes on from the scale the run before it left). bad: -1, or the first non-finite value's index (x's, then y's; `value`: it)
   *  and nothing trained, or -2: a run after such a window (until a run with `first`), nothing done. */
  run(
    slot: number,
    xBytes: number,
    yBytes: number,
    params: RunParams,
    statsOffset: number,
    statsBytes: number,
    first: boolean,
  ): Promise<Readback & { bad: number; value: number }>;
  dispose(): void;
}

/** A streamed .npy file's rows (csrc/addon/read_rows.cc): windows gathered off the JS thread. */
export interface NativeRowFile {
  /** File rows (a k + c) mod rows for k in [start, start + n) into dest's rows 0..n-1. Resolves
   *  with the bytes read (fewer: the file ended), or -errno. */
  gather(dest: Uint8Array, start: number, n: number, a: number, c: number): Promise<number>;
  close(): void;
}

/** An iterable's shuffle buffer rows (csrc/addon/shuffle_pool.cc); `state` is the Rng's. */
export interface NativeShufflePool {
  push(
    x: Uint8Array,
    y: Uint8Array,
    batch: number,
    firstRow: number,
    outX: Uint8Array,
    outY: Uint8Array,
    outRow: number,
    maxOut: number,
    state: BigUint64Array,
    where: Float64Array,
  ): [taken: number, out: number, done: Promise<number>];
  drain(outX: Uint8Array, outY: Uint8Array, outRow: number, maxOut: number, state: BigUint64Array, where: Float64Array): [out: number, done: Promise<number>];
  reset(): void;
  dispose(): void;
}

/** What the planner hands the native rules of a spec: activations[l] is layer l's code; extras:
 *  how many user regions. */
export interface PlannerShape {
  batch: number;
  samples: number;
  optimizer: number;
  compact: boolean;
  models: number;
  extras: number;
  units: number[];
  activations: number[];
  /** One op code per layer (nna_op), where some layer is not dense; with each layer's `from` of
   *  the op parameter table (a residual's earlier layer: the phase table reads it). */
  ops?: number[];
  opFrom?: number[];
  /** Layer 1's embedding columns, where it is an embedding (its tables are its w). */
  embedding?: ReadonlyArray<{ readonly cardinality: number; readonly dim: number }>;
}

/** Bits of regionRules' flags (csrc/addon/descriptors.cc). */
export const REGION_FLAGS = { outlivesRun: 1, perModel: 2 } as const;

/** Where a run would go, for the checks of what it needs there (csrc/train/check.cc checkTarget). */
export interface RunTarget {
  cuda: boolean;
  budgeted: boolean;
}

export interface NativeAddon {
  ArenaHandle: new (header: Uint8Array, options: NativeArenaOptions) => NativeHandle;
  WindowStager: new (
    handle: NativeHandle,
    xOffset: number,
    xCapacity: number,
    yOffset: number,
    yCapacity: number,
    f64: boolean,
    slots: number,
  ) => NativeWindowStager;
  RowFile: new (fd: number, dataOffset: number, rowBytes: number, rows: number) => NativeRowFile;
  ShufflePool: new (rows: number, xRowBytes: number, yRowBytes: number) => NativeShufflePool;
  /** src's first `count` values of .npy type `type` into out, converted as a JS Number stored into
   *  out would be, on the gather pool (csrc/addon/decode_values.cc). Resolves with `count`. */
  decodeValues(src: Uint8Array, type: string, littleEndian: boolean, out: Float32Array | Float64Array, count: number): Promise<number>;
  /** src into dst and src2 into dst2 (same lengths), in parallel on the gather pool (copy_bytes.cc). */
  copyBytes(dst: Uint8Array, src: Uint8Array, dst2: Uint8Array, src2: Uint8Array): Promise<number>;
  /** src (a numeric typed array) into dst[0, src.length) in one pass, converted as a JS
   *  Number stored into dst would be, checked finite, compared with dst's old bits when
   *  `compare` (csrc/core/checked_copy.h): whether dst's bits changed, where every element is
   *  finite; else [the first bad index, its value, 0]; null for a typed array it does not read
   *  (Float16Array). */
  checkedCopy(dst: Float32Array | Float64Array, src: ArrayBufferView, compare: boolean): boolean | [number, number, number] | null;
  /** labels into one-hot rows of `outputs` values at dst: whether dst changed, or [bad, value,
   *  1 where bad is finite but not a class in [0, outputs)]; null as checkedCopy. */
  oneHot(dst: Float32Array | Float64Array, labels: ArrayBufferView, outputs: number, compare: boolean): boolean | [number, number, number] | null;
  cudaInfo(): CudaInfo;
  crc32c(bytes: Uint8Array, crc?: number): number;
  minDeviceBudget(header: Uint8Array, placement: 'managed' | 'staged'): { bytes: number; stage: string; layer: number };
  /** The one check of a device budget (csrc/budget/budgeted_block.cc); throws its coded error. */
  checkDeviceBudget(header: Uint8Array, memory: number, budget?: number): void;
  /** The optimizer and schedule tables (csrc/addon/descriptors.cc; read by src/layout/optimizers.ts). */
  descriptors(): unknown;
  /** The learning rate of 0-based step `step` under `schedule` from base rate lr (csrc/descriptors/schedules.h). */
  lrAt(schedule: ScheduleParams, lr: number, step: number): number;
  /** The native rules of every (layer, kind) of a shape, layers x KINDS: counts (csrc/core/validate.cc
   *  expectedCount, the validator's rule; 2^64 - 1 where one overflows) and flags (REGION_FLAGS:
   *  keeps its bytes after every run, aliasing.cc outlivesRun; one copy per model,
   *  nna_kind_per_model). Throws the planner's coded error for a combination the format refuses. */
  regionRules(shape: PlannerShape): { counts: BigUint64Array; flags: Uint8Array };
  /** The phase table of one step of a shape (csrc/train/phases.cc StepModel::step, which the
   *  native replay of a compact plan walks): uses are [layer, kind, reads]. */
  stepPhases(
    shape: PlannerShape,
    op: number,
    resident: boolean,
    fused: boolean,
  ): Array<{ stage: string; layer: number; uses: Array<[number, string, boolean]> }>;
  /** The bytes of a bf16 / fp16 CUDA run's 16-bit operand copies beside the arena (csrc/train/half_copies.h). */
  halfCopyBytes(shape: PlannerShape): number;
  /** The run checks (csrc/train/check.cc) without a run, and with `target` what the run needs of
   *  where it would go (checkTarget): throws their coded error. */
  checkRun(header: Uint8Array, params: RunParams, target?: RunTarget): void;
  /** What a data-parallel group needs of its plan (csrc/train/check.cc checkGroup). */
  checkGroup(header: Uint8Array): void;
  /** '' when a header is sound for an arena of `available` bytes (validator and aliasing replay), else why not. */
  validateHeader(header: Uint8Array, available: number): string;
  /** The loss rules of a run (csrc/train/check.cc checkLoss): throws BAD_LOSS / BAD_OPTION naming the field. */
  checkLoss(header: Uint8Array, params: RunParams): void;
  /** JIT kernels (csrc/addon/jit.cc): compile (or find cached) a kernel; its id. */
  jitCompile(handle: NativeHandle, source: string, name: string, params: string[], header: string): number;
  /** Resolves once the kernel completed; a run of the arena while in flight. */
  jitLaunch(handle: NativeHandle, id: number, grid: number[], block: number[], sharedBytes: number, args: Array<number | bigint>): Promise<void>;
  /** Data parallelism (csrc/addon/nccl.cc). */
  ncclInfo(): NcclInfo;
  ncclUniqueId(): Uint8Array;
  ncclInitAll(handles: NativeHandle[], gradients?: GradientWire): void;
  ncclInitRank(handle: NativeHandle, id: Uint8Array, rank: number, world: number, gradients?: GradientWire): Promise<void>;
  ncclLeave(handle: NativeHandle): void;
  runReplicas(handles: NativeHandle[], params: RunParams[]): Promise<RunPath>;
  groupInfo(handle: NativeHandle): { rank: number; world: number; device: number } | undefined;
}

/** The addon: a local build (build/Release) or the package's prebuilt binary (src/native/loader.ts). */
export function native(): NativeAddon {
  return loadAddon<NativeAddon>().addon;
}

/** Calls into the addon, rethrowing its coded errors as the class of their code; `values` are
 *  the call's inputs, by field name, for the error's `value`. */
export function call<T>(f: () => T, values?: Record<string, unknown>): T {
  try {
    return f();
  } catch (e) {
    throw fromNative(e, values);
  }
}

/** What the CUDA side of this build can do here (never throws for a missing GPU). */
export function cudaInfo(): CudaInfo {
  return call(() => native().cudaInfo());
}
