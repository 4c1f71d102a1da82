// nn-arena: plan a network's memory to the byte, allocate it once per side, move it in one transfer.
// The core API. Data loaders, streaming sources and model export: 'nn-arena/io' (src/io.ts).
// Reports, the PyTorch estimate, MNIST and the CLI's helpers: 'nn-arena/tools' (src/tools.ts).
export { planLayout, type Plan, type Region, type KindRegion, type ExtraRegion, type BytesByKind } from './layout/plan.js';
export {
  type LayoutSpec,
  type LayerSpec,
  type LayerOp,
  type EmbeddingOp,
  type NormalizedSpec,
  type ExtraSpec,
  type NormalizedExtra,
  DEFAULT_ALIGN,
} from './layout/spec.js';
export { KINDS, type Kind, type ExtraLike, type Dtype, type Order, type Optimizer, type Activation, type EmbedColumn } from './layout/header.js';
export {
  Arena,
  type ArenaOptions,
  type ArenaStats,
  type TransferResult,
  type View,
  type BackendName,
  type MemoryKind,
  type Advice,
  type Location,
} from './arena/arena.js';
export { Kernel, type KernelParam, type KernelArg, type LaunchConfig, type Dims } from './arena/jit.js';
export { type Selector, type SelectorKind, type ByteRange, selectRanges } from './layout/selector.js';
export { NnArenaError, FieldError, LayoutError, OptionError, ArenaError, DataError, ERROR_CODES, errorClassOf, type ErrorCode } from './core/errors.js';
export {
  Trainer,
  type TrainerOptions,
  type LossScaleOptions,
  type FitOptions,
  type FitResult,
  type Metrics,
  type Progress,
  type LossName,
  type BackwardTarget,
  type TrainerSaveOptions,
} from './train/trainer.js';
export { Dataset } from './train/dataset.js';
export { type Data } from './train/data.js';
export { type Schedule } from './train/optimizer-options.js';
export { DataParallel, ncclInfo, type DataParallelOptions, type JoinOptions } from './parallel/data-parallel.js';
export { readParallelEnv, type ParallelEnv } from './parallel/env.js';
export { rendezvous, type RendezvousOptions } from './parallel/rendezvous.js';
export { cudaInfo, type CudaInfo, type GradientWire, type NcclInfo, type RunPath, type ResidencyCounters, type LinkRates } from './native/addon.js';
export { minDeviceBudget, type ResidencyMode, type ResidencyReport, type LayerResidency } from './arena/residency.js';
export { inspectCheckpoint, type CheckpointInfo, type SaveOptions, type LoadOptions, type IoProgress } from './checkpoint/checkpoint.js';
