// options.ts: the Trainer's options, checked once at construction into the values every run
// passes (hyper-parameters as the arena's dtype holds them, the loss, the products' precision).
import type { Arena } from '../arena.js';
import { OptionError } from '../errors.js';
import { checkKnownKeys, keysOf } from '../known-keys.js';
import type { Dtype } from '../layout/header.js';
import type { NormalizedSpec } from '../layout/spec.js';
import { PRECISIONS, type PrecisionName } from '../native.js';

export type LossName = 'cross-entropy' | 'mse';

export interface TrainerOptions {
  /** Default: cross-entropy for a softmax output layer, mse otherwise. */
  loss?: LossName;
  /** Learning rate; on an arena of K models (planLayout `models`) also one per model: an array
   *  of K (model m trains with lr[m]). */
  lr?: number | readonly number[];
  /** SGD with momentum: velocity decay (default 0.9). */
  momentum?: number;
  /** Adam (defaults 0.9, 0.999, 1e-8). */
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** How the matrix products are computed; weights and activations stay float32. 'fp32'
   *  (default); 'tf32x3': each product as three TF32 tensor-core products of the operands split
   *  into big and small parts (FP32-level accuracy, faster on large layers); 'tf32': one TF32
   *  product (about 3 significant digits per operand: less accurate). The TF32 modes need the
   *  CUDA backend, a float32 arena and a GPU of compute capability 8.0+; 'tf32x3' also a device
   *  workspace beside the arena, so not a deviceBudget. */
  precision?: PrecisionName;
}

export const HYPER_KEYS = ['lr', 'momentum', 'beta1', 'beta2', 'eps'] as const;
const TRAINER_KEYS = keysOf<TrainerOptions>()(['loss', 'precision', ...HYPER_KEYS]);
export type Hyper = Record<(typeof HYPER_KEYS)[number], number>;

/** The options as checked: what every run of the Trainer passes. */
export interface TrainerSettings {
  loss: LossName;
  hyper: Hyper;
  /** K models with an lr array: one per model (else hyper.lr for every model). */
  lrs: number[] | undefined;
  precision: PrecisionName;
}

const MAX_SEED = Number.MAX_SAFE_INTEGER;

/** An options argument: undefined (defaults) or a plain object, read once per key. */
export function optionsObject(v: unknown, field: string): Record<string, unknown> {
  if (v === undefined) return {};
  if (v === null || typeof v !== 'object') throw new OptionError('BAD_OPTION', field, v, 'must be an object');
  return v as Record<string, unknown>;
}

const round = (dtype: Dtype, v: number) => (dtype === 'float32' ? Math.fround(v) : v);

/** Hyper-parameters as the arena's dtype will hold them: a learning rate of 1e-50 is 0 in
 *  float32 (no weight would change), a momentum of 0.999999999 is 1 (no decay). */
function checkHyper(k: keyof Hyper, v: unknown, dtype: Dtype, field: string = k): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new OptionError('BAD_OPTION', field, v, 'must be a finite number');
  const r = round(dtype, v);
  if (k === 'lr' || k === 'eps') {
    if (!(r > 0) || !Number.isFinite(r)) throw new OptionError('BAD_OPTION', field, v, `must be > 0 and finite as a ${dtype} (it is ${r})`);
  } else if (!(r >= 0 && r < 1)) {
    throw new OptionError('BAD_OPTION', field, v, `must be in [0, 1) as a ${dtype} (it is ${r})`);
  }
  return v;
}

/** The products' precision: known, and one this arena can run (the native side checks the GPU). */
function checkPrecision(v: unknown, arena: Arena): PrecisionName {
  if (v === undefined) return 'fp32';
  if (typeof v !== 'string' || !Object.hasOwn(PRECISIONS, v)) throw new OptionError('BAD_OPTION', 'precision', v, "must be 'fp32', 'tf32' or 'tf32x3'");
  const p = v as PrecisionName;
  if (p === 'fp32') return p;
  if (arena.plan.spec.dtype !== 'float32') throw new OptionError('BAD_OPTION', 'precision', v, `applies to float32 arenas; this one is ${arena.plan.spec.dtype}`);
  if (arena.backend !== 'cuda') throw new OptionError('BAD_OPTION', 'precision', v, 'needs the CUDA backend (a GPU with TF32 tensor cores); the CPU backend computes in fp32');
  if (p === 'tf32x3' && arena.deviceBudget !== undefined) {
    throw new OptionError('BAD_OPTION', 'precision', v, 'needs a device workspace beside the arena, which a deviceBudget does not allow; use \'tf32\' or \'fp32\'');
  }
  return p;
}

/** The Trainer's options for `arena` (the first arena of its run target), read once per key. */
export function trainerSettings(options: unknown, arena: Arena): TrainerSettings {
  const o = optionsObject(options, 'options');
  checkKnownKeys(o, TRAINER_KEYS, 'Trainer');
  const s: NormalizedSpec = arena.plan.spec;
  const softmax = s.activations[s.activations.length - 1] === 'softmax';
  const given = o.loss;
  const loss = (given ?? (softmax ? 'cross-entropy' : 'mse')) as LossName;
  if (loss !== 'cross-entropy' && loss !== 'mse') throw new OptionError('BAD_LOSS', 'loss', given, "must be 'cross-entropy' or 'mse'");
  if ((loss === 'cross-entropy') !== softmax) {
    throw new OptionError('BAD_LOSS', 'loss', loss, softmax ? 'a softmax output layer trains with cross-entropy' : 'cross-entropy needs a softmax output layer');
  }
  const hyper: Hyper = { lr: s.optimizer === 'adam' ? 0.001 : 0.05, momentum: 0.9, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
  let lrs: number[] | undefined;
  for (const k of HYPER_KEYS) {
    const v = o[k];
    if (k === 'lr' && Array.isArray(v)) {
      const n: unknown = v.length;
      if (n !== s.models) throw new OptionError('BAD_OPTION', 'lr.length', n, `must equal the arena's ${s.models} models (one learning rate per model)`);
      lrs = [];
      for (let m = 0; m < s.models; m++) lrs.push(checkHyper('lr', v[m], s.dtype, `lr[${m}]`));
      hyper.lr = lrs[0]!;
    } else if (v !== undefined) {
      hyper[k] = checkHyper(k, v, s.dtype);
    }
  }
  return { loss, hyper, lrs, precision: checkPrecision(o.precision, arena) };
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
