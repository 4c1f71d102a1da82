// options.ts: the Trainer's options, checked once at construction into the values every run
// passes (hyper-parameters as the arena's dtype holds them, the loss, the products' precision).
import type { Arena } from '../arena/arena.js';
import { OptionError } from '../core/errors.js';
import { checkKnownKeys, keysOf } from '../core/known-keys.js';
import { commonParams, optimizers } from '../layout/optimizers.js';
import { PRECISION_TABLE } from '../native/tables.generated.js';
import { call, LOSSES, native, OPS, PRECISIONS, type LossName, type PrecisionName } from '../native/addon.js';
import { checkOptimizerOptions, type OptimizerSettings, type Schedule } from './optimizer-options.js';

export type { LossName } from '../native/addon.js';

export interface TrainerOptions {
  /** Default: cross-entropy for a softmax output layer, mse otherwise (the first loss of the
   *  table that the output layer trains with: README, "Activations and losses"). */
  loss?: LossName;
  /** Label smoothing of cross-entropy, in [0, 1] (F.cross_entropy's label_smoothing; default 0). */
  labelSmoothing?: number;
  /** Learning rate (default 0.05 for sgd and momentum, 0.001 for adam and adamw; a schedule's
   *  base, one-cycle's maximum); on an arena of K models (planLayout `models`) also one per
   *  model: an array of K (model m trains with lr[m]). */
  lr?: number | readonly number[];
  /** momentum: velocity decay (default 0.9); nesterov: Nesterov momentum (PyTorch's formula). */
  momentum?: number;
  nesterov?: boolean;
  /** adam, adamw (defaults 0.9, 0.999, 1e-8). */
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** sgd, momentum, adam: L2 penalty added to the gradient (PyTorch's weight_decay; default 0);
   *  adamw: decoupled decay w *= 1 - lr * weightDecay (default 0.01). Weights only, unless
   *  decayBiases. */
  weightDecay?: number;
  decayBiases?: boolean;
  /** The learning rate of each step (evaluated natively, PyTorch's lr_scheduler formulas). */
  schedule?: Schedule;
  /** Clip the gradients to this global norm before each step (torch.nn.utils.clip_grad_norm_);
   *  each step's norm goes to fit's onProgress (gradNorms) and Trainer.gradNorms. Not on
   *  compact plans or with a deviceBudget. A hyperparameter of another optimizer than the
   *  arena's is refused; the table of them all: docs/optimizers.md. */
  clipGradNorm?: number;
  /** How the matrix products are computed; weights and activations stay float32. 'fp32'
   *  (default); 'tf32x3': each product as three TF32 tensor-core products of the operands split
   *  into big and small parts (FP32-level accuracy, faster on large layers); 'tf32': one TF32
   *  product (about 3 significant digits per operand: less accurate). The TF32 modes need the
   *  CUDA backend, a float32 arena and a GPU of compute capability 8.0+; 'tf32x3' also a device
   *  workspace beside the arena, so not a deviceBudget. 'bf16': the products read bf16 roundings
   *  of their operands (CUDA; emulated on the CPU); 'fp16': fp16 roundings, with dynamic loss
   *  scaling (`lossScale`; CUDA, one model; emulated on the CPU). */
  precision?: PrecisionName;
  /** precision 'fp16': dynamic loss scaling, as PyTorch's GradScaler (whose defaults these
   *  are): the loss's gradient is multiplied by the scale (initially `init`, 65536); a step
   *  whose gradients overflow is skipped and the scale multiplied by `backoffFactor` (0.5);
   *  after `growthInterval` (2000) good steps in a row it is multiplied by `growthFactor` (2). */
  lossScale?: LossScaleOptions;
  /** The seed of the dropout layers' masks (a non-negative safe integer; default 0). A unit's
   *  mask depends on this seed, the optimizer step, the layer, the row of the batch and the
   *  column only, so a resumed run drops what the straight run would have (docs/ops.md). */
  dropoutSeed?: number;
}

export interface LossScaleOptions {
  init?: number;
  growthFactor?: number;
  backoffFactor?: number;
  growthInterval?: number;
}

/** Every option name a Trainer reads: loss, labelSmoothing, precision, the schedule and every
 *  name of the optimizer tables (a name of another optimizer than the arena's is refused with its
 *  reason). The static list is checked against TrainerOptions; the tables' names join it. */
const TRAINER_KEYS = keysOf<TrainerOptions>()([
  'loss',
  'labelSmoothing',
  'precision',
  'lossScale',
  'dropoutSeed',
  'lr',
  'momentum',
  'nesterov',
  'beta1',
  'beta2',
  'eps',
  'weightDecay',
  'decayBiases',
  'schedule',
  'clipGradNorm',
]);
const LOSS_SCALE_KEYS = keysOf<LossScaleOptions>()(['init', 'growthFactor', 'backoffFactor', 'growthInterval']);
const trainerKeys = (): string[] => [
  ...new Set([...TRAINER_KEYS, ...optimizers().flatMap((o) => o.hypers.map((h) => h.name)), ...commonParams().map((p) => p.name)]),
];

/** lossScale: only with a precision that scales (fp16), defaults as PyTorch's GradScaler. The
 *  native side checks the same ranges for every run (checkLossScale, csrc/train/check.cc). */
export function checkLossScaleOptions(v: unknown, precision: PrecisionName): Required<LossScaleOptions> | undefined {
  const scaled = PRECISION_TABLE.find((r) => r.name === precision)!.scaled;
  if (!scaled) {
    if (v !== undefined) throw new OptionError('BAD_OPTION', 'lossScale', v, `goes with precision 'fp16' (this Trainer's is '${precision}')`);
    return undefined;
  }
  const o = optionsObject(v, 'lossScale');
  checkKnownKeys(o, LOSS_SCALE_KEYS, 'lossScale', 'lossScale');
  const num = (k: keyof LossScaleOptions, def: number, ok: (x: number) => boolean, what: string): number => {
    const x = o[k] === undefined ? def : o[k];
    if (typeof x !== 'number' || !ok(x)) throw new OptionError('BAD_OPTION', `lossScale.${k}`, x, `must be ${what}`);
    return x;
  };
  return {
    init: num(
      'init',
      65536,
      (x) => x > 0 && Number.isFinite(Math.fround(x)),
      "a positive number, finite in float32 (the scale is kept in float32, as GradScaler's)",
    ),
    growthFactor: num('growthFactor', 2, (x) => x >= 1 && Number.isFinite(x), 'a finite number >= 1'),
    backoffFactor: num('backoffFactor', 0.5, (x) => x > 0 && x <= 1, 'in (0, 1]'),
    growthInterval: num('growthInterval', 2000, (x) => Number.isSafeInteger(x) && x >= 1, 'a positive integer (steps)'),
  };
}

/** A run's loss scaling parameters (RunParams): the settings, and the scale and growth tracker
 *  where the last run left them. */
export function lossScaleParams(s: Required<LossScaleOptions> | undefined, scale: number, good: number) {
  return s
    ? { lossScale: scale, lossScaleGood: good, lossScaleGrowth: s.growthFactor, lossScaleBackoff: s.backoffFactor, lossScaleInterval: s.growthInterval }
    : {};
}

/** The options as checked: what every run of the Trainer passes. */
export interface TrainerSettings {
  loss: LossName;
  /** 0: none (and no labelSmoothing key in the runs' parameters). */
  labelSmoothing: number;
  /** The optimizer's hyperparameters (per-model lrs), schedule and clipping. */
  opt: OptimizerSettings;
  precision: PrecisionName;
  /** precision 'fp16': the loss scaling's settings (defaults filled in); else undefined. */
  lossScale: Required<LossScaleOptions> | undefined;
  /** 0: the default (and no dropoutSeed key in the runs' parameters). */
  dropoutSeed: number;
}

const MAX_SEED = Number.MAX_SAFE_INTEGER;

/** An options argument: undefined (defaults) or a plain object, read once per key. */
export function optionsObject(v: unknown, field: string): Record<string, unknown> {
  if (v === undefined) return {};
  // An array is an object too, but never a bag of options (lossScale: [] was taken as the defaults).
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new OptionError('BAD_OPTION', field, v, 'must be an object');
  return v as Record<string, unknown>;
}

/** A number in [0, 1]: the range the native side checks too, here for a message before any run. */
function checkUnit(k: string, v: unknown): number {
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw new OptionError('BAD_OPTION', k, v, 'must be a number in [0, 1]');
  return v;
}

/** The loss: the one given (a name of the loss table), or the first of the table the output
 *  layer trains with; which go together is the native side's rule (checkLoss, csrc/train/check.cc). */
function checkLoss(header: Uint8Array, loss: unknown, labelSmoothing: number): LossName {
  const names = Object.keys(LOSSES) as LossName[];
  const why = (name: LossName, smoothing: number): unknown => {
    try {
      call(() => native().checkLoss(header, { op: OPS.train, loss: LOSSES[name], labelSmoothing: smoothing }), { loss: name, labelSmoothing: smoothing });
      return undefined;
    } catch (e) {
      return e;
    }
  };
  if (loss !== undefined && (typeof loss !== 'string' || !names.includes(loss as LossName))) {
    throw new OptionError('BAD_LOSS', 'loss', loss, `must be one of ${names.map((n) => `'${n}'`).join(', ')}`);
  }
  const name = (loss as LossName | undefined) ?? names.find((n) => why(n, 0) === undefined) ?? names[0]!;
  const e = why(name, labelSmoothing);
  if (e !== undefined) throw e;
  return name;
}

/** The products' precision by name (a row of the generated NNA_PRECISIONS). What it needs of the
 *  arena (float32, the CUDA backend, no workspace under a deviceBudget, one model) is the native
 *  side's rule (csrc/train/check.cc), asked with the run checks below. */
export function checkPrecision(v: unknown): PrecisionName {
  if (v === undefined) return 'fp32';
  const row = PRECISION_TABLE.find((r) => r.name === v);
  if (typeof v !== 'string' || !row)
    throw new OptionError('BAD_OPTION', 'precision', v, `must be one of ${PRECISION_TABLE.map((r) => `'${r.name}'`).join(', ')}`);
  return row.name;
}

/** The Trainer's options for `arena` (the first arena of its run target), read once per key. */
export function trainerSettings(options: unknown, arena: Arena): TrainerSettings {
  const o = optionsObject(options, 'options');
  checkKnownKeys(o, trainerKeys(), 'Trainer');
  const labelSmoothing = o.labelSmoothing === undefined ? 0 : checkUnit('labelSmoothing', o.labelSmoothing);
  const loss = checkLoss(arena.plan.header, o.loss, labelSmoothing);
  const precision = checkPrecision(o.precision);
  const lossScale = checkLossScaleOptions(o.lossScale, precision);
  const dropoutSeed = o.dropoutSeed === undefined ? 0 : checkSeed(o.dropoutSeed, 'dropoutSeed');
  if (dropoutSeed < 0) throw new OptionError('BAD_SEED', 'dropoutSeed', dropoutSeed, 'must be a non-negative safe integer');
  const run = {
    loss: LOSSES[loss],
    ...(labelSmoothing !== 0 ? { labelSmoothing } : {}),
    precision: PRECISIONS[precision],
    ...lossScaleParams(lossScale, lossScale?.init ?? 0, 0),
  };
  const opt = checkOptimizerOptions(
    arena.plan,
    o,
    run,
    { cuda: arena.backend === 'cuda', budgeted: arena.deviceBudget !== undefined },
    { precision: o.precision },
  );
  return { loss, labelSmoothing, opt, precision, lossScale, dropoutSeed };
}

/** A model index of an arena of `models` (predict, learningRate): BAD_OPTION naming `model`. */
export function checkModel(model: unknown, models: number): number {
  if (typeof model !== 'number' || !Number.isSafeInteger(model) || model < 0 || model >= models) {
    throw new OptionError('BAD_OPTION', 'model', model, `must be an integer in [0, ${models - 1}]`);
  }
  return model;
}

export function checkSeed(seed: unknown, field = 'seed'): number {
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed)) throw new OptionError('BAD_SEED', field, seed, 'must be a safe integer');
  return seed;
}

/** Model m's seed of K models: seed + m, or the array's entry. */
export function modelSeeds(seed: unknown, K: number): number[] {
  if (Array.isArray(seed)) {
    if (seed.length !== K) throw new OptionError('BAD_SEED', 'seed.length', seed.length, `must equal the arena's ${K} models (one seed per model)`);
    return Array.from({ length: K }, (_, m) => checkSeed(seed[m], `seed[${m}]`));
  }
  const s = checkSeed(seed);
  if (s + (K - 1) > MAX_SEED) throw new OptionError('BAD_SEED', 'seed', seed, `model ${K - 1} takes seed + ${K - 1}, which must stay a safe integer`);
  return Array.from({ length: K }, (_, m) => s + m);
}

export function positiveInt(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw new OptionError('BAD_OPTION', field, v, 'must be a positive integer');
  return v;
}
