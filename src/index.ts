// nn-arena: plan a network's memory to the byte, allocate it once per side, move it in one transfer.
export { planLayout, type Plan, type Region, type BytesByKind } from './layout/plan.js';
export { type LayoutSpec, type NormalizedSpec, DEFAULT_ALIGN } from './layout/spec.js';
export { KINDS, type Kind, type Dtype, type Order, type Optimizer, type Activation } from './layout/header.js';
export { Arena, type ArenaOptions, type ArenaStats, type TransferResult, type View, type BackendName, type MemoryKind, type Advice, type Location } from './arena.js';
export { Kernel, type KernelParam, type KernelArg, type LaunchConfig, type Dims } from './jit.js';
export { type Selector, type SelectorKind, type ByteRange, selectRanges } from './selector.js';
export { NnArenaError, FieldError, LayoutError, OptionError, ArenaError, DataError, ERROR_CODES, errorClassOf, type ErrorCode } from './errors.js';
export { Trainer, type TrainerOptions, type FitOptions, type FitResult, type Metrics, type Progress, type LossName } from './train/trainer.js';
export { type Data } from './train/data.js';
export { cudaInfo, type CudaInfo, type RunPath, type ResidencyCounters, type LinkRates } from './native.js';
export { minDeviceBudget, type ResidencyMode, type ResidencyReport, type LayerResidency } from './residency.js';
export { loadMnist, loadMnistAll, type Dataset, type MnistSplit } from './data/mnist.js';
export { inspectCheckpoint, type CheckpointInfo, type SaveOptions } from './checkpoint.js';
export { planToSVG, arenaSpans, KIND_COLORS, type SvgOptions } from './report/svg.js';
export { estimatePytorchMemory, arenaBytesByStage, TORCH_STAGES, type TorchStage, type PytorchEstimate, type TorchStageEstimate, type TorchTensor, type PytorchOptions, type ArenaStageBytes } from './report/pytorch.js';
export { trainingReportHtml, type TrainingReport, type ProgressPoint } from './report/html.js';
export { recordTransfers, purposeOf, PURPOSES, type Purpose, type PurposeTotals, type TransferRecorder } from './report/transfers.js';
export { machineInfo, type MachineInfo } from './report/machine.js';
