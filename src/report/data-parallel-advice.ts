// data-parallel-advice.ts: whether a data-parallel group pays for a network on this machine,
// measured (`nn-arena doctor --data-parallel`, adviseDataParallel in nn-arena/tools). Two GPUs
// are slower than one where a step's all-reduce costs more than the step itself (S and M in tf32
// or bf16 on two H200s: docs/data-parallel.md), and no rule read from the plan alone tells that
// apart from a network that gains: so this times it. One GPU and the group train the same net on
// the same per-GPU batch (a data set of zeros, uploaded once by a warm-up fit), each by the wall
// clock of one fit; throughput is the group's samples per second over one GPU's.
import { Arena } from '../arena/arena.js';
import { OptionError } from '../core/errors.js';
import { checkKnownKeys, keysOf } from '../core/known-keys.js';
import { planLayout } from '../layout/plan.js';
import type { LayoutSpec } from '../layout/spec.js';
import { cudaInfo, type GradientWire, type PrecisionName } from '../native/addon.js';
import { DataParallel, ncclInfo } from '../parallel/data-parallel.js';
import { Dataset } from '../train/dataset.js';
import { checkPrecision } from '../train/options.js';
import { Trainer } from '../train/trainer.js';

export interface DataParallelAdviceOptions {
  /** The group's devices (default: every device, at least two). */
  devices?: readonly number[];
  /** The Trainer's precision, as the user would train (default 'fp32'). */
  precision?: PrecisionName;
  /** The group's wire (DataParallelOptions.gradients). */
  gradients?: GradientWire;
  /** Steps timed on each side (default 200; at least 20). */
  steps?: number;
  /** The group must beat one GPU by this factor to be advised (default 1.1). */
  margin?: number;
}

export interface DataParallelAdvice {
  /** 'group': the group trains more samples a second than one GPU by the margin; else 'one-gpu'. */
  advice: 'group' | 'one-gpu';
  /** Why, in one sentence, with the figures. */
  why: string;
  devices: number[];
  precision: PrecisionName;
  perGpuBatch: number;
  /** Wall clock of fit, a step; null where nothing was measured (fewer than 2 GPUs, no NCCL). */
  oneGpuUsPerStep: number | null;
  groupUsPerStep: number | null;
  /** The group's samples a second over one GPU's (devices x one GPU's step / the group's step). */
  throughput: number | null;
}

const ADVICE_KEYS = keysOf<DataParallelAdviceOptions>()(['devices', 'precision', 'gradients', 'steps', 'margin']);

const unmeasured = (why: string, devices: number[], precision: PrecisionName, perGpuBatch: number): DataParallelAdvice => ({
  advice: 'one-gpu',
  why,
  devices,
  precision,
  perGpuBatch,
  oneGpuUsPerStep: null,
  groupUsPerStep: null,
  throughput: null,
});

/** Times `spec` (its batch a GPU's) on one GPU and on a group, and says which to use. */
export async function adviseDataParallel(spec: LayoutSpec, options: DataParallelAdviceOptions = {}): Promise<DataParallelAdvice> {
  checkKnownKeys(options, ADVICE_KEYS, 'adviseDataParallel');
  const steps = options.steps ?? 200;
  if (!Number.isInteger(steps) || steps < 20) throw new OptionError('BAD_OPTION', 'steps', steps, 'must be an integer of at least 20');
  const margin = options.margin ?? 1.1;
  if (typeof margin !== 'number' || !(margin >= 1)) throw new OptionError('BAD_OPTION', 'margin', margin, 'must be a number of at least 1');
  const precision = checkPrecision(options.precision);
  const plan = planLayout({ ...spec, samples: 0 });
  const batch = plan.spec.batch;
  const info = cudaInfo();
  const devices = [...(options.devices ?? Array.from({ length: info.built ? info.devices : 0 }, (_, i) => i))];
  if (devices.length < 2)
    return unmeasured(
      `a group needs 2 or more GPUs; ${devices.length} ${options.devices ? 'given' : info.built ? 'found' : '(a CPU-only binary)'}`,
      devices,
      precision,
      batch,
    );
  const nccl = ncclInfo();
  if (!nccl.available) return unmeasured(`NCCL is not available (${nccl.why}): a group cannot reduce its gradients`, devices, precision, batch);

  const layers = plan.spec.layers;
  const zeros = (n: number) => (plan.spec.dtype === 'float64' ? new Float64Array(n) : new Float32Array(n));
  // A fit's wall clock a step on `target` (disposed after), over `rows` of zeros: category 0 for
  // an embedding's columns, class 0 for labels. One fit uploads the data set and captures the
  // graphs, then the timed one.
  const timed = async (target: Arena | DataParallel, rows: number) => {
    try {
      const t = new Trainer(target, { precision });
      t.init(1);
      const x = zeros(rows * layers[0]!);
      const set = t.loss === 'cross-entropy' ? new Dataset({ x, labels: new Int32Array(rows) }) : new Dataset({ x, y: zeros(rows * layers.at(-1)!) });
      await t.fit(set, { epochs: 1, shuffle: false });
      const t0 = performance.now();
      const r = await t.fit(set, { epochs: 1, shuffle: false });
      return ((performance.now() - t0) * 1e3) / r.steps;
    } finally {
      target.dispose();
    }
  };
  const oneUs = await timed(Arena.create(planLayout({ ...spec, samples: steps * batch }), { backend: 'cuda', device: devices[0] }), steps * batch);
  const groupRows = steps * batch * devices.length;
  const groupUs = await timed(
    DataParallel.create(planLayout({ ...spec, samples: groupRows }), { devices, ...(options.gradients ? { gradients: options.gradients } : {}) }),
    groupRows,
  );
  const throughput = (devices.length * oneUs) / groupUs;
  const figures = `one GPU ${oneUs.toFixed(1)} us a step, the group of ${devices.length} ${groupUs.toFixed(1)} us (throughput ${throughput.toFixed(2)}x, ${precision}, ${batch} rows a GPU)`;
  return {
    advice: throughput >= margin ? 'group' : 'one-gpu',
    why:
      throughput >= margin
        ? `the group trains ${throughput.toFixed(2)}x the samples a second: ${figures}`
        : `the group is ${throughput < 1 ? 'slower than one GPU' : `under ${margin}x one GPU`}: ${figures}; train on one GPU, or raise the batch a GPU`,
    devices,
    precision,
    perGpuBatch: batch,
    oneGpuUsPerStep: oneUs,
    groupUsPerStep: groupUs,
    throughput,
  };
}
