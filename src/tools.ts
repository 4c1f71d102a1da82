// nn-arena/tools: what sits around the core (src/index.ts) rather than in it: the memory map and
// the training report, the PyTorch memory estimate, the MNIST digits (the `mnist` package), the
// machine and installation reports of the CLI. The core entry imports none of this.
export { loadMnist, loadMnistAll, type Dataset, type MnistSplit } from './data/mnist.js';
export { planToSVG, arenaSpans, KIND_COLORS, EXTRA_COLORS, type SvgOptions } from './report/svg.js';
export {
  estimatePytorchMemory,
  arenaBytesByStage,
  TORCH_STAGES,
  PYTORCH_PRECISIONS,
  type TorchStage,
  type PytorchEstimate,
  type TorchStageEstimate,
  type TorchTensor,
  type PytorchOptions,
  type PytorchPrecision,
  type ArenaStageBytes,
} from './report/pytorch.js';
export { bf16CopyBytes } from './report/bf16-copies.js';
export { trainingReportHtml, type TrainingReport, type ProgressPoint } from './report/html.js';
export { recordTransfers, purposeOf, PURPOSES, type Purpose, type PurposeTotals, type TransferRecorder } from './report/transfers.js';
export { machineInfo, type MachineInfo } from './report/machine.js';
export { doctor, type DoctorReport } from './native/doctor.js';
export { adviseDataParallel, type DataParallelAdvice, type DataParallelAdviceOptions } from './report/data-parallel-advice.js';
export { optimizers, schedules, type OptimizerInfo, type ScheduleInfo, type ParamInfo } from './layout/optimizers.js';
