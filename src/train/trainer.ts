// trainer.ts: training on an arena. The network owns no memory: weights, gradients, optimizer
// state, the batch and (for fit) the whole data set live in the arena; steps run natively off
// the JS thread and read back only the few bytes of the stats region.
//
// Transfers: init() writes the host side and uploads the whole arena (one transfer). fit()
// uploads the data set once (again only when its contents change), reads 32-byte stats per
// report, and downloads the weights and biases once at the end. evaluate() and predict()
// upload a data set that fits the data regions once and run over it resident. Nothing else
// moves per step.
//
// Which side is current: after init(), markHostChanged() and fit(), host and device hold the
// same weights and biases. After step() and gradients() the device is current (gradients()
// also brings dw/db back); syncToHost() brings everything back. Until a Trainer first runs on
// (or initialises) an arena, its host side is taken as current and goes up whole before the
// first run.
//
// Runs on one arena are queued in call order (src/train/queue.ts), across Trainers too: each
// async method holds the queue from its first transfer to its last read-back. Arguments are
// read once, at the call, into checked snapshots (src/train/data.ts).
//
// Data parallel (a DataParallel group instead of an arena): step(), gradients() and fit() split
// every global batch across the replicas (rows [r * batch, (r + 1) * batch) to rank r) and the
// native run all-reduces gradients and stats; the other methods use the first replica of this
// process (its weights are every replica's). `arena` is that replica.
import { Arena, runArena, transferRanges, type View } from '../arena.js';
import { ArenaError, DataError, OptionError } from '../errors.js';
import { STATS, type Dtype, type Kind } from '../layout/header.js';
import { LOSSES, native, OPS, PRECISIONS, type PrecisionName, type RunParams, type RunPath } from '../native.js';
import { loadArena } from '../checkpoint.js';
import type { ArenaOptions } from '../arena.js';
import { snapshotData, snapshotNumbers, type Data, type Snapshot, type Values } from './data.js';
import { assertIdle, enqueue, stateOf, type ArenaState } from './queue.js';
import { Rng, affinePermutation } from './rng.js';
import { DataParallel, runGroup } from '../parallel/data-parallel.js';

export type LossName = 'cross-entropy' | 'mse';

/** What backward() goes back from: the built-in loss with integer labels or target rows, or the
 *  gradient of your own loss with respect to the outputs forward() returned (rows x outputs
 *  values, dL/dz of the output layer: nn-arena applies the output activation's derivative). */
export type BackwardTarget = { labels: ArrayLike<number> } | { y: ArrayLike<number> } | { dOutput: ArrayLike<number> };

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

export interface Metrics {
  /** One model: its mean loss and accuracy. K models: the mean of the models' values. */
  loss: number;
  accuracy: number;
  /** K-model arenas only: model m's mean loss and accuracy (NaN loss once it diverged). */
  losses?: number[];
  accuracies?: number[];
  /** K-model arenas only: whether model m diverged (a non-finite loss; its training stopped
   *  at that step, as a run of it alone would). One model throws DIVERGED instead. */
  diverged?: boolean[];
}

export interface Progress extends Metrics {
  epoch: number;
  epochs: number;
  /** Batches done in this epoch, and in it all. */
  batch: number;
  batches: number;
  step: number;
  samplesPerSecond: number;
}

export interface FitOptions {
  epochs: number;
  /** Shuffle the sample order every epoch (seeded; default true). */
  shuffle?: boolean;
  seed?: number;
  onProgress?: (p: Progress) => void;
  /** Progress reports per epoch (default 1); each reads the 32-byte stats region once. */
  reportsPerEpoch?: number;
}

export interface FitResult extends Metrics {
  /** The code that ran the steps: 'cpu', 'fused' (one CUDA launch per run) or the per-layer
   *  CUDA path with cuBLAS or nn-arena's tiled products. */
  path: RunPath;
  epochs: number;
  steps: number;
  seconds: number;
  samplesPerSecond: number;
}

const OP = OPS;

/** Mean loss and accuracy from the accumulators of one stats region. */
const metricsOf = (s: View): Metrics => ({ loss: s[STATS.loss]! / s[STATS.rows]!, accuracy: s[STATS.correct]! / s[STATS.rows]! });

/** One model's metrics as they are; K models' as the mean plus per-model arrays. */
function combine(per: Metrics[], diverged: boolean[]): Metrics {
  // A diverged model's loss is NaN also when its weights, not its last loss, went non-finite.
  per = per.map((m, i) => (diverged[i] ? { ...m, loss: NaN } : m));
  if (per.length === 1) return per[0]!;
  const mean = (f: (m: Metrics) => number) => per.reduce((a, m) => a + f(m), 0) / per.length;
  return { loss: mean((m) => m.loss), accuracy: mean((m) => m.accuracy), losses: per.map((m) => m.loss), accuracies: per.map((m) => m.accuracy), diverged };
}
const PARAM_KINDS: Kind[] = ['w', 'b'];
const HYPER_KEYS = ['lr', 'momentum', 'beta1', 'beta2', 'eps'] as const;
type Hyper = Record<(typeof HYPER_KEYS)[number], number>;
const MAX_SEED = Number.MAX_SAFE_INTEGER;

// Brand check: the getter throws for anything that is not a real Arena (a Proxy included,
// whose private fields are out of reach).
const disposedOf = Object.getOwnPropertyDescriptor(Arena.prototype, 'disposed')!.get!;
function checkArena(arena: unknown): Arena {
  let disposed: unknown;
  try { disposed = disposedOf.call(arena); } catch {
    throw new OptionError('BAD_OPTION', 'arena', typeof arena === 'object' ? Object.prototype.toString.call(arena) : arena, 'must be an Arena');
  }
  if (disposed) throw new ArenaError('DISPOSED', 'the arena was disposed');
  return arena as Arena;
}

/** An options argument: undefined (defaults) or a plain object, read once per key. */
function optionsObject(v: unknown, field: string): Record<string, unknown> {
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

function checkSeed(seed: unknown, field = 'seed'): number {
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed)) throw new OptionError('BAD_SEED', field, seed, 'must be a safe integer');
  return seed;
}

function positiveInt(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw new OptionError('BAD_OPTION', field, v, 'must be a positive integer');
  return v;
}

/** A target argument of step() / gradients(): { labels } or { y }, read once. */
function targetOf(target: unknown): { labels?: ArrayLike<number>; y?: ArrayLike<number> } {
  if (target === null || typeof target !== 'object') throw new DataError('BAD_DATA', 'target', target, 'must be an object { labels } or { y }');
  const { labels, y } = target as { labels?: ArrayLike<number>; y?: ArrayLike<number> };
  return { labels, y };
}

interface FitPlan { epochs: number; shuffle: boolean; seed: number; onProgress: ((p: Progress) => void) | undefined; reports: number }

export class Trainer {
  /** The arena trained (a data-parallel group: this process's first replica). */
  readonly arena: Arena;
  /** The data-parallel group, when the Trainer was made for one. */
  readonly group: DataParallel | undefined;
  readonly loss: LossName;
  readonly inputs: number;
  readonly outputs: number;
  readonly precision: PrecisionName;
  #hyper: Hyper;
  /** K models with an lr array: one per model (else #hyper.lr for every model). */
  #lrs: number[] | undefined;
  #models: number;
  // The plan's shape, read once (the plan is frozen, but one read keeps every use consistent).
  #dtype: Dtype;
  #batch: number;
  #samples: number;
  #last: number;
  #state: ArenaState;
  #replicas: readonly Arena[];
  #firstRank: number;  // global rank of #replicas[0]
  #world: number;

  constructor(arena: Arena | DataParallel, options: TrainerOptions = {}) {
    if (arena instanceof DataParallel) {
      if (arena.disposed) throw new ArenaError('DISPOSED', 'the data-parallel group was disposed');
      this.group = arena;
      this.#replicas = arena.replicas.map((a) => checkArena(a));
      this.#firstRank = arena.rank;
      this.#world = arena.world;
      arena = arena.replicas[0]!;
    } else {
      this.group = undefined;
      this.#replicas = [checkArena(arena)];
      this.#firstRank = 0;
      this.#world = 1;
    }
    this.arena = checkArena(arena);
    const o = optionsObject(options, 'options');
    const s = arena.plan.spec;
    this.#dtype = s.dtype;
    this.#batch = s.batch;
    this.#samples = s.samples;
    this.#last = s.layers.length - 1;
    this.inputs = s.layers[0]!;
    this.outputs = s.layers[this.#last]!;
    const softmax = s.activations[s.activations.length - 1] === 'softmax';
    const loss = o.loss;
    this.loss = (loss ?? (softmax ? 'cross-entropy' : 'mse')) as LossName;
    if (this.loss !== 'cross-entropy' && this.loss !== 'mse') throw new OptionError('BAD_LOSS', 'loss', loss, "must be 'cross-entropy' or 'mse'");
    if ((this.loss === 'cross-entropy') !== softmax) {
      throw new OptionError('BAD_LOSS', 'loss', this.loss, softmax ? 'a softmax output layer trains with cross-entropy' : 'cross-entropy needs a softmax output layer');
    }
    this.#models = s.models;
    this.#hyper = { lr: s.optimizer === 'adam' ? 0.001 : 0.05, momentum: 0.9, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
    for (const k of HYPER_KEYS) {
      const v = o[k];
      if (k === 'lr' && Array.isArray(v)) {
        const n: unknown = v.length;
        if (n !== this.#models) throw new OptionError('BAD_OPTION', 'lr.length', n, `must equal the arena's ${this.#models} models (one learning rate per model)`);
        const lrs: number[] = [];
        for (let m = 0; m < this.#models; m++) lrs.push(checkHyper('lr', v[m], this.#dtype, `lr[${m}]`));
        this.#lrs = lrs;
        this.#hyper.lr = lrs[0]!;
      } else if (v !== undefined) {
        this.#hyper[k] = checkHyper(k, v, this.#dtype);
      }
    }
    this.precision = checkPrecision(o.precision, arena);
    this.#state = stateOf(arena);
  }

  /** Optimizer steps taken on this arena's parameters (shared by the Trainers of one arena). */
  get steps(): number { return this.#state.steps; }

  /** Rows of one step: the plan's batch, times the replicas of a data-parallel group. */
  get globalBatch(): number { return this.#batch * this.#world; }

  /** Saves everything needed to resume: the whole arena (brought back from the device first)
   *  and the optimizer step count. BUSY while a run is queued or in flight. */
  save(path: string): number {
    assertIdle(this.arena, 'save');
    this.arena.toHost();
    return this.arena.save(path, { steps: this.#state.steps });
  }

  /** Resumes from save(): same weights, optimizer state and step count, so further steps give
   *  the same result as if training had never stopped. */
  static load(path: string, arenaOptions: ArenaOptions = {}, options: TrainerOptions = {}): Trainer {
    const { arena, info } = loadArena(path, arenaOptions, (plan, o) => Arena.create(plan, o));
    try {
      const t = new Trainer(arena, options);
      t.#state.steps = info.steps;
      t.#state.deviceStale = false;  // loadArena sent the whole arena up
      return t;
    } catch (e) {
      arena.dispose();
      throw e;
    }
  }

  /** He (relu) or Xavier (other activations) normal weights from `seed`, zero biases and
   *  optimizer state; written on the host (identical on every backend) and uploaded with the
   *  whole arena in one transfer, so both sides hold them when init() returns. BUSY while a
   *  run is queued or in flight. K models: model m takes seed + m, or seed[m] from an array
   *  of K seeds; either way the weights a one-model arena gets from that seed. */
  init(seed: number | readonly number[]): void {
    const seeds = this.#seeds(seed);
    for (const a of this.#replicas) assertIdle(a, 'init');
    const { layers, activations } = this.arena.plan.spec;
    seeds.forEach((sm, m) => {
      const rng = new Rng(sm);
      for (let l = 1; l < layers.length; l++) {
        const fanIn = layers[l - 1]!, fanOut = layers[l]!;
        const std = activations[l - 1] === 'relu' ? Math.sqrt(2 / fanIn) : Math.sqrt(2 / (fanIn + fanOut));
        const w = this.arena.view(l, 'w', m);
        for (let i = 0; i < w.length; i++) w[i] = rng.normal() * std;
        this.arena.view(l, 'b', m).fill(0);
        for (const k of ['mw', 'mb', 'vw', 'vb'] as const) if (this.arena.plan.region(l, k)) this.arena.view(l, k, m).fill(0);
      }
    });
    // The other replicas of this process (groups hold one model): the same bytes (other
    // processes draw the same numbers).
    for (const a of this.#replicas) {
      if (a !== this.arena) this.#copyParams(a, ['w', 'b', 'mw', 'mb', 'vw', 'vb']);
      a.toDevice();
      const st = stateOf(a);
      st.steps = 0;
      st.deviceStale = false;
      st.forwardRows = undefined;  // new weights: no activations or gradients of them yet
      st.gradients = false;
    }
  }

  /** Model m's seed: seed + m, or the array's entry. */
  #seeds(seed: unknown): number[] {
    const K = this.#models;
    if (Array.isArray(seed)) {
      if (seed.length !== K) throw new OptionError('BAD_SEED', 'seed.length', seed.length, `must equal the arena's ${K} models (one seed per model)`);
      return Array.from({ length: K }, (_, m) => checkSeed(seed[m], `seed[${m}]`));
    }
    const s = checkSeed(seed);
    if (s + (K - 1) > MAX_SEED) throw new OptionError('BAD_SEED', 'seed', seed, `model ${K - 1} takes seed + ${K - 1}, which must stay a safe integer`);
    return Array.from({ length: K }, (_, m) => s + m);
  }

  /** Arenas of K models: the number of models (planLayout `models`); 1 otherwise. */
  get models(): number { return this.#models; }

  /** One step on one batch given by the caller (rows <= the plan's batch). */
  async step(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
    const d = this.#snapshotBatch(x, target, 'step');
    return enqueue(this.arena, async () => {
      const stepBase = this.#state.steps;
      this.#checkSteps(stepBase, 1);
      await this.#runShards(d, { op: OP.train, stepBase });
      this.#addSteps(1);
      const stats = this.#stats();
      if (this.#models === 1 && stats[0]![STATS.badStep]! >= 0) {
        throw new ArenaError('DIVERGED', `training diverged: the loss (${metricsOf(stats[0]!).loss}) or the weights became non-finite at step ${stepBase}; lower the learning rate`);
      }
      return combine(stats.map(metricsOf), stats.map((st) => st[STATS.badStep]! >= 0));
    });
  }

  // ---- primitives: a step as forward(), backward(), update() -------------------------------
  // Each is one native run (queued like step); together they give step()'s weights and
  // optimizer state (bit for bit on the CPU; see the README). Transfers: forward() uploads the
  // rows of x and downloads the output rows it returns, backward() uploads its targets or
  // dOutput rows, update() reads the 32-byte stats (DIVERGED when the weights went non-finite). One model per arena: on an arena of K models the
  // native runs would cover every model, but forward()'s outputs and backward()'s dOutput are
  // one model's rows, so the Trainer refuses (#primitiveArena) rather than answer for model 0
  // only; a data-parallel group too (no reduction between backward() and update()).

  /** Runs the network on x (at most the plan's batch of rows) and returns its outputs (rows x
   *  outputs, softmax applied): a view over the arena's host side, valid until the next run or
   *  transfer on this arena (copy it with slice() to keep it). Leaves every layer's activations
   *  for backward(). */
  async forward(x: ArrayLike<number>): Promise<View> {
    this.#primitiveArena('forward');
    const d = snapshotData({ x }, this.inputs, this.outputs, this.#dtype, 'forward', false);
    if (d.count > this.#batch) throw new DataError('BAD_DATA', 'forward.x.length', d.x.length, `holds ${d.count} samples, more than the batch of ${this.#batch}`);
    return enqueue(this.arena, async () => {
      this.#syncDevice();
      const rows = d.count;
      this.arena.view(0, 'z').set(d.x);
      this.#rowsTransfer('toDevice', 0, 'z', d.x.byteLength);
      await this.#run({ op: OP.forward, rows, resetStats: false });
      this.#state.forwardRows = rows;
      const L = this.#last;
      const out = this.arena.view(L, 'z').subarray(0, rows * this.outputs);
      this.#rowsTransfer('toHost', L, 'z', out.byteLength);
      return out;
    });
  }

  /** Gradients of the loss over the rows of the last forward(), left in the dw / db regions on
   *  the device (weights untouched; update() applies them, or bring them to the host with
   *  arena.toHost({ kinds: ['dw', 'db'] }) for an optimizer of your own). `{ labels }` / `{ y }`:
   *  the trainer's loss (its mean loss and accuracy go to the stats region: metrics());
   *  `{ dOutput }`: dL/dz of the output layer for your own loss, rows x outputs values (the
   *  derivative with respect to the outputs forward() returned, including any 1/rows of a
   *  mean; for softmax, with respect to the probabilities). ArenaError NO_FORWARD when no
   *  forward() output is in the arena (any other run since replaced it). */
  async backward(target: BackwardTarget): Promise<void> {
    this.#primitiveArena('backward');
    const t = this.#snapshotTarget(target);
    return enqueue(this.arena, async () => {
      const rows = this.#state.forwardRows;
      if (rows === undefined) {
        throw new ArenaError('NO_FORWARD', 'backward: no forward(x) to go back from; call forward(x) first (step, fit, evaluate, predict, gradients and update replace its activations)');
      }
      const n = rows * this.outputs;
      if (t.values.length !== n) {
        throw new DataError('BAD_DATA_WIDTH', `backward.${t.field}.length`, t.field === 'labels' ? t.values.length / this.outputs : t.values.length,
          t.field === 'labels' ? `must equal the ${rows} rows of the last forward()` : `must be the ${rows} rows of the last forward() x ${this.outputs} outputs = ${n}`);
      }
      const kind = t.field === 'dOutput' ? 'd' : 'y';
      this.arena.view(this.#last, kind).set(t.values);
      this.#rowsTransfer('toDevice', this.#last, kind, t.values.byteLength);
      const own = t.field === 'dOutput';
      await this.#run({ op: own ? OP.backwardFromOutput : OP.backward, rows, resetStats: !own });
      this.#state.gradients = true;
    });
  }

  /** The built-in optimizer step (the arena's sgd, momentum or adam, this Trainer's
   *  hyper-parameters) from the gradients of backward() or gradients(), on the device; counts
   *  one step (Adam's t) as step() does. ArenaError NO_GRADIENTS when there are none to apply
   *  (each set is applied once). */
  async update(): Promise<void> {
    this.#primitiveArena('update');
    return enqueue(this.arena, async () => {
      if (!this.#state.gradients) throw new ArenaError('NO_GRADIENTS', 'update: no gradients to apply; call backward() (or gradients()) first, once per update()');
      const stepBase = this.#state.steps;
      this.#checkSteps(stepBase, 1);
      await this.#run({ op: OP.update, stepBase });
      this.#state.steps++;
      if (this.#stats()[0]![STATS.badStep]! >= 0) throw new ArenaError('DIVERGED', `update diverged: the weights became non-finite at step ${stepBase}; lower the learning rate`);
    });
  }

  /** The primitives take one arena of one model: ArenaError NOT_SUPPORTED naming the
   *  data-parallel group (its replicas' gradients would need a reduction between backward()
   *  and update(), which the native primitive runs do not do), or `models`. */
  #primitiveArena(method: string): void {
    if (this.group) {
      throw new ArenaError('NOT_SUPPORTED', `${method}: forward / backward / update take one arena, not a data-parallel group (use step() or fit() on the group, or a Trainer on one arena)`);
    }
    if (this.#models !== 1) {
      throw new ArenaError('NOT_SUPPORTED', `${method}: forward / backward / update take an arena of one model; this one holds models: ${this.#models} (use step() or fit(), or one arena per model)`);
    }
  }

  /** Mean loss and accuracy in the stats region: of the last backward() with labels or y,
   *  step(), gradients() or evaluate() (one 32-byte read). */
  async metrics(): Promise<Metrics> {
    return enqueue(this.arena, async () => this.#readStats());
  }

  /** Trains `epochs` passes over `data`, resident in the arena's data regions. */
  async fit(data: Data, options: FitOptions): Promise<FitResult> {
    if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { epochs, ... }');
    const { epochs, shuffle, seed, onProgress, reportsPerEpoch } = options as FitOptions;
    const o: FitPlan = {
      epochs: positiveInt('epochs', epochs),
      shuffle: shuffle === undefined ? true : shuffle as boolean,
      seed: seed === undefined ? 0 : checkSeed(seed),
      onProgress,
      reports: reportsPerEpoch === undefined ? 1 : positiveInt('reportsPerEpoch', reportsPerEpoch),
    };
    if (typeof o.shuffle !== 'boolean') throw new OptionError('BAD_OPTION', 'shuffle', shuffle, 'must be a boolean');
    if (onProgress !== undefined && typeof onProgress !== 'function') throw new OptionError('BAD_OPTION', 'onProgress', onProgress, 'must be a function');
    const d = this.#snapshot(data, 'data');
    if (d.count > this.#samples) {
      throw new DataError('DATA_TOO_LARGE', 'data.x.length', d.x.length, `holds ${d.count} samples; the arena's data regions hold ${this.#samples} (plan with samples >= ${d.count})`);
    }
    return enqueue(this.arena, () => this.#fit(d, o));
  }

  async #fit(d: Snapshot, o: FitPlan): Promise<FitResult> {
    for (const a of this.#replicas) this.#makeResident(d, a);
    const batch = this.globalBatch;
    const batches = Math.ceil(d.count / batch);
    const chunk = Math.ceil(batches / Math.min(o.reports, batches));
    this.#checkSteps(this.#state.steps, o.epochs * batches);
    const rng = new Rng(o.seed);
    const t0 = performance.now();
    let last: Metrics = { loss: NaN, accuracy: NaN };
    const diverged: boolean[] = Array<boolean>(this.#models).fill(false);
    let path: RunPath = 'cpu';
    for (let epoch = 1; epoch <= o.epochs; epoch++) {
      const perm = o.shuffle ? affinePermutation(rng, d.count) : { a: 1, c: 0 };
      const epochStart = performance.now();
      for (let first = 0; first < batches; first += chunk) {
        const n = Math.min(chunk, batches - first);
        const stepBase = this.#state.steps;
        path = await this.#runGroup((rank) => ({
          op: OP.train, resident: true, samples: d.count, firstBatch: first, numBatches: n,
          permA: perm.a, permC: perm.c, stepBase, resetStats: first === 0,
          ...(this.#world > 1 ? { globalBatch: batch, shardOffset: rank * this.#batch, reduce: true } : {}),
        }));
        this.#addSteps(n);
        const stats = this.#stats();
        if (this.#models === 1 && stats[0]![STATS.badStep]! >= 0) {
          const badStep = stepBase + stats[0]![STATS.badStep]!;
          throw new ArenaError('DIVERGED', `training diverged: the loss or the weights became non-finite at step ${badStep} (epoch ${epoch}); lower the learning rate`);
        }
        // K models: a model that diverged stopped (natively) and stays marked; the others go on.
        stats.forEach((st, m) => { if (st[STATS.badStep]! >= 0) diverged[m] = true; });
        last = combine(stats.map(metricsOf), [...diverged]);
        const done = first + n;
        o.onProgress?.({
          ...last, epoch, epochs: o.epochs, batch: done, batches, step: this.#state.steps,
          samplesPerSecond: Math.min(done * batch, d.count) / ((performance.now() - epochStart) / 1000),
        });
      }
    }
    this.arena.toHost({ kinds: PARAM_KINDS });
    const seconds = (performance.now() - t0) / 1000;
    return { ...last, path, epochs: o.epochs, steps: o.epochs * batches, seconds, samplesPerSecond: (o.epochs * d.count) / seconds };
  }

  /** Mean loss and accuracy over `data`. A set that fits the data regions (count <= the plan's
   *  samples) is made resident (uploaded once, replacing the resident set, and again only when
   *  its contents change) and evaluated in one run; a larger one batch by batch. */
  async evaluate(data: Data): Promise<Metrics> {
    const d = this.#snapshot(data, 'data');
    return enqueue(this.arena, async () => {
      if (d.count <= this.#samples) {
        this.#makeResident(d);
        await this.#run({ op: OP.eval, resident: true, samples: d.count, numBatches: Math.ceil(d.count / this.#batch) });
        return this.#readStats();
      }
      for (let first = 0; first < d.count; first += this.#batch) {
        const rows = this.#stageBatch(d, first, Math.min(this.#batch, d.count - first));
        await this.#run({ op: OP.eval, rows, resetStats: first === 0 });
      }
      return this.#readStats();
    });
  }

  /** Outputs of the network (K models: of model `options.model`, default 0) for x (count x outputs values). Inputs that fit the data regions
   *  go up once (resident) and run one batch per run, each batch's outputs read back from z
   *  (a forward run leaves only its last batch there); larger ones go batch by batch. */
  async predict(x: ArrayLike<number>, options: { model?: number } = {}): Promise<View> {
    const o = optionsObject(options, 'options');
    const model = o.model === undefined ? 0 : o.model;
    if (typeof model !== 'number' || !Number.isSafeInteger(model) || model < 0 || model >= this.#models) {
      throw new OptionError('BAD_OPTION', 'model', model, `must be an integer in [0, ${this.#models - 1}]`);
    }
    const d = snapshotData({ x }, this.inputs, this.outputs, this.#dtype, 'predict', false);
    return enqueue(this.arena, async () => {
      const batch = this.#batch;
      const L = this.#last;
      const out = this.#dtype === 'float64' ? new Float64Array(d.count * this.outputs) : new Float32Array(d.count * this.outputs);
      const resident = d.count <= this.#samples;
      if (resident) this.#makeResident(d);
      for (let first = 0, b = 0; first < d.count; first += batch, b++) {
        const rows = Math.min(batch, d.count - first);
        if (resident) await this.#run({ op: OP.forward, resident: true, samples: d.count, firstBatch: b, numBatches: 1, resetStats: false });
        else await this.#run({ op: OP.forward, rows: this.#stageBatch(d, first, rows), resetStats: false });
        this.arena.toHost({ layers: [L], kinds: ['z'] });
        out.set(this.arena.view(L, 'z', model).subarray(0, rows * this.outputs), first * this.outputs);
      }
      return out;
    });
  }

  /** Gradients of the mean loss over one batch, left in the dw/db regions (weights untouched)
   *  on both sides. NOT_SUPPORTED on a compact plan. */
  async gradients(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
    if (this.arena.plan.spec.compact) {
      throw new ArenaError('NOT_SUPPORTED', 'gradients() needs a plan without compact: a compact arena keeps no gradients after a run (dw and db share bytes, and an SGD plan has no dw)');
    }
    const d = this.#snapshotBatch(x, target, 'gradients');
    return enqueue(this.arena, async () => {
      await this.#runShards(d, { op: OP.grad });
      this.arena.toHost({ kinds: ['dw', 'db'] });
      return this.#readStats();
    });
  }

  /** Brings every region back to the host (weights, gradients, optimizer state). BUSY while a
   *  run is queued or in flight. */
  syncToHost(): void {
    assertIdle(this.arena, 'syncToHost');
    this.arena.toHost();
  }

  /** Sends host-side edits of the weights and biases to the device now (only w and b go up:
   *  optimizer state on the device is never overwritten by a stale host copy). BUSY while a run
   *  is queued or in flight. */
  markHostChanged(): void {
    for (const a of this.#replicas) assertIdle(a, 'markHostChanged');
    for (const a of this.#replicas) {
      this.#syncDevice(a);
      if (a !== this.arena) this.#copyParams(a, PARAM_KINDS);
      a.toDevice({ kinds: PARAM_KINDS });
    }
  }

  // ---- internals ----------------------------------------------------------------------------

  #snapshot(data: unknown, field: string): Snapshot {
    return snapshotData(data, this.inputs, this.outputs, this.#dtype, field);
  }

  #snapshotBatch(x: unknown, target: unknown, field: string): Snapshot {
    const { labels, y } = targetOf(target);
    const d = snapshotData({ x, labels, y }, this.inputs, this.outputs, this.#dtype, field);
    const limit = this.globalBatch;
    if (d.count > limit) throw new DataError('BAD_DATA', `${field}.x.length`, d.x.length, `holds ${d.count} samples, more than the ${this.#world > 1 ? 'global ' : ''}batch of ${limit}`);
    return d;
  }

  /** backward()'s target, read once: exactly one of labels, y, dOutput, as rows of the
   *  arena's dtype (labels one-hot); the row count is checked when the run is due. */
  #snapshotTarget(target: unknown): { field: 'labels' | 'y' | 'dOutput'; values: Values } {
    if (target === null || typeof target !== 'object') throw new DataError('BAD_DATA', 'target', target, 'must be an object { labels }, { y } or { dOutput }');
    const { labels, y, dOutput } = target as { labels?: unknown; y?: unknown; dOutput?: unknown };
    const given = [labels, y, dOutput].filter((v) => v !== undefined).length;
    if (given !== 1) throw new DataError('BAD_DATA', 'target', given ? 'several' : 'none', 'needs exactly one of labels, y or dOutput');
    const rowsOf = (field: string) => (n: number) => {
      if (n === 0 || n % this.outputs !== 0) throw new DataError('BAD_DATA_WIDTH', `backward.${field}.length`, n, `is not a positive multiple of the output layer's ${this.outputs} units`);
    };
    if (dOutput !== undefined) return { field: 'dOutput', values: snapshotNumbers(dOutput, 'backward.dOutput', this.#dtype, rowsOf('dOutput')) };
    if (y !== undefined) return { field: 'y', values: snapshotNumbers(y, 'backward.y', this.#dtype, rowsOf('y')) };
    const ls = snapshotNumbers(labels, 'backward.labels', 'float64');
    const ys = this.#dtype === 'float64' ? new Float64Array(ls.length * this.outputs) : new Float32Array(ls.length * this.outputs);
    for (let i = 0; i < ls.length; i++) {
      const v = ls[i]!;
      if (!Number.isInteger(v) || v < 0 || v >= this.outputs) throw new DataError('BAD_LABEL', `backward.labels[${i}]`, v, `is not a class in [0, ${this.outputs - 1}]`);
      ys[i * this.outputs + v] = 1;
    }
    return { field: 'labels', values: ys };
  }

  /** Moves the first `bytes` of region (layer, kind): the rows a primitive uses, no more. */
  #rowsTransfer(dir: 'toDevice' | 'toHost', layer: number, kind: Kind, bytes: number): void {
    transferRanges(this.arena, dir, { layers: [layer], kinds: [kind] }, [this.arena.plan.region(layer, kind)!.offset, bytes]);
  }

  /** Step counts cross to the native side as exact integers. */
  #checkSteps(base: number, n: number): void {
    if (!Number.isSafeInteger(base + n)) throw new ArenaError('TOO_MANY_STEPS', `the step count ${base} + ${n} exceeds 2^53 - 1`);
  }

  /** Writes rows [first, first+rows) of d into z[0] and y and uploads just those regions. */
  #stageBatch(d: Snapshot, first: number, rows: number, arena: Arena = this.arena): number {
    this.#syncDevice(arena);
    if (rows === 0) return 0;
    const L = this.#last;
    arena.view(0, 'z').set(d.x.subarray(first * this.inputs, (first + rows) * this.inputs));
    arena.toDevice({ layers: [0], kinds: ['z'] });
    if (d.y) {
      arena.view(L, 'y').set(d.y.subarray(first * this.outputs, (first + rows) * this.outputs));
      arena.toDevice({ layers: [L], kinds: ['y'] });
    }
    return rows;
  }

  /** One step on the caller's batch d: each replica takes its shard (rank r: rows
   *  [r * batch, (r + 1) * batch), possibly none), and the loss mean is over all d.count rows. */
  async #runShards(d: Snapshot, params: RunParams): Promise<RunPath> {
    const rows = this.#replicas.map((a, i) => {
      const first = (this.#firstRank + i) * this.#batch;
      return this.#stageBatch(d, first, Math.max(0, Math.min(this.#batch, d.count - first)), a);
    });
    return this.#runGroup((rank, i) => ({ ...params, rows: rows[i]!, ...(this.#world > 1 ? { lossRows: d.count, reduce: true } : {}) }));
  }

  /** Copies region kinds `kinds` of every layer from this.arena's host side to `to`'s. */
  #copyParams(to: Arena, kinds: readonly Kind[]): void {
    const plan = this.arena.plan;
    for (let l = 1; l <= this.#last; l++) for (const k of kinds) if (plan.region(l, k)) to.view(l, k).set(this.arena.view(l, k));
  }

  #addSteps(n: number): void {
    for (const a of this.#replicas) stateOf(a).steps += n;
  }

  /** Makes d the resident data set (rows [0, count) of xdata, and of ydata when d has targets).
   *  The device holds what is resident as long as the host bytes of those rows are unchanged:
   *  a part goes up again unless its snapshot equals the host bytes byte for byte and those
   *  bytes still have the checksum they had at upload (an edit of the host copy that was not
   *  uploaded). Object identity plays no part: a data set changed in place goes up again. */
  #makeResident(d: Snapshot, arena: Arena = this.arena): void {
    this.#syncDevice(arena);
    const st = stateOf(arena);
    const L = this.#last;
    const plan = arena.plan;
    const xr = plan.region(0, 'xdata')!, yr = plan.region(L, 'ydata')!;
    const bytesOf = (v: Values) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    const hostX = arena.view(0, 'xdata').subarray(0, d.x.length);
    const hostY = arena.view(L, 'ydata').subarray(0, d.count * this.outputs);
    const same = (snap: Values, host: Values, crc: number | undefined) =>
      crc !== undefined && st.resident?.count === d.count && Buffer.compare(bytesOf(snap), bytesOf(host)) === 0 &&
      (native().crc32c(bytesOf(host)) >>> 0) === crc;
    const xKeep = same(d.x, hostX, st.resident?.xCrc);
    const yKeep = d.y === undefined || same(d.y, hostY, st.resident?.yCrc);
    if (xKeep && yKeep) return;
    const ranges: number[] = [];
    if (!xKeep) { hostX.set(d.x); ranges.push(xr.offset, d.x.byteLength); }
    if (!yKeep) { hostY.set(d.y!); ranges.push(yr.offset, d.y!.byteLength); }
    // x rows that reach the end of xdata and the ydata rows after it: one range (only
    // alignment padding lies between).
    if (ranges.length === 4 && d.x.byteLength === xr.bytes) ranges.splice(1, 3, yr.offset + ranges[3]! - xr.offset);
    // The record is dropped first: a failed transfer must not leave a stale claim. Inputs alone
    // (predict) leave the ydata rows unclaimed: they belong to another data set.
    st.resident = undefined;
    transferRanges(arena, 'toDevice', { kinds: ['xdata', 'ydata'] }, ranges);
    st.resident = {
      count: d.count,
      xCrc: native().crc32c(bytesOf(hostX)) >>> 0,
      yCrc: d.y === undefined ? undefined : native().crc32c(bytesOf(hostY)) >>> 0,
    };
  }

  /** Before the first run of any Trainer on this arena, the host side goes up whole. */
  #syncDevice(arena: Arena = this.arena): void {
    const st = stateOf(arena);
    if (st.deviceStale) {
      arena.toDevice();
      st.deviceStale = false;
    }
  }

  /** A run of this.arena alone (evaluate, predict: no shards, no reduction). */
  async #run(params: RunParams): Promise<RunPath> {
    this.#syncDevice();
    return this.#tracked([this.arena], params.op, () => runArena(this.arena, { ...this.#baseParams(), ...params }));
  }

  /** One run of every replica of this process; `params(rank, i)` for global rank `rank`. */
  async #runGroup(params: (rank: number, i: number) => RunParams): Promise<RunPath> {
    for (const a of this.#replicas) this.#syncDevice(a);
    const all = this.#replicas.map((_, i) => ({ ...this.#baseParams(), ...params(this.#firstRank + i, i) }));
    return this.#tracked(this.#replicas, all[0]!.op, () => (this.group ? runGroup(this.group, all) : runArena(this.arena, all[0]!)));
  }

  /** Runs `run` (of `op` on `arenas`) and records what the primitives may still use afterwards:
   *  a run with a forward pass replaces the activations (so does an update, by changing the
   *  weights); training runs overwrite dw/db (a Train step leaves them applied already), update
   *  consumes them. */
  async #tracked(arenas: readonly Arena[], op: RunParams['op'], run: () => Promise<RunPath>): Promise<RunPath> {
    for (const a of arenas) {
      const st = stateOf(a);
      if (op !== OP.backward && op !== OP.backwardFromOutput) st.forwardRows = undefined;
      if (op !== OP.forward && op !== OP.eval) st.gradients = false;
    }
    const path = await run();
    if (op === OP.grad) for (const a of arenas) stateOf(a).gradients = true;
    return path;
  }

  /** What every run of this Trainer passes: hyper-parameters, per-model lrs, loss, precision. */
  #baseParams(): Omit<RunParams, 'op'> {
    return { ...this.#hyper, ...(this.#lrs ? { lrs: this.#lrs } : {}), loss: LOSSES[this.loss], precision: PRECISIONS[this.precision] };
  }

  /** Every model's stats region (one transfer: the K copies are one range). */
  #stats(): View[] {
    const L = this.#last;
    this.arena.toHost({ layers: [L], kinds: ['stats'] });
    return Array.from({ length: this.#models }, (_, m) => this.arena.view(L, 'stats', m));
  }

  #readStats(): Metrics {
    const stats = this.#stats();
    return combine(stats.map(metricsOf), stats.map((s) => s[STATS.badStep]! >= 0));
  }
}
