// trainer.ts: training on an arena. The network owns no memory: weights, gradients, optimizer
// state, the batch and (for fit) the whole data set live in the arena; steps run natively off
// the JS thread and read back only the few bytes of the stats region.
//
// Transfers: init() writes the host side; the first run uploads the whole arena once. fit()
// uploads the data set once, reads 32-byte stats per report, and downloads the weights and
// biases once at the end. Nothing else moves per step.
import { Arena, runArena, type View } from '../arena.js';
import { ArenaError, DataError, OptionError } from '../errors.js';
import { STATS, type Kind } from '../layout/header.js';
import { LOSSES, OPS, type RunParams, type RunPath } from '../native.js';
import { loadArena } from '../checkpoint.js';
import type { ArenaOptions } from '../arena.js';
import { checkData, type CheckedData, type Data } from './data.js';
import { Rng, affinePermutation } from './rng.js';

export type LossName = 'cross-entropy' | 'mse';

export interface TrainerOptions {
  /** Default: cross-entropy for a softmax output layer, mse otherwise. */
  loss?: LossName;
  lr?: number;
  /** SGD with momentum: velocity decay (default 0.9). */
  momentum?: number;
  /** Adam (defaults 0.9, 0.999, 1e-8). */
  beta1?: number;
  beta2?: number;
  eps?: number;
}

export interface Metrics { loss: number; accuracy: number }

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

/** Mean loss and accuracy from the accumulators of the stats region. */
const metricsOf = (s: View): Metrics => ({ loss: s[STATS.loss]! / s[STATS.rows]!, accuracy: s[STATS.correct]! / s[STATS.rows]! });
const PARAM_KINDS: Kind[] = ['w', 'b'];

export class Trainer {
  readonly arena: Arena;
  readonly loss: LossName;
  readonly inputs: number;
  readonly outputs: number;
  #hyper: Required<Omit<TrainerOptions, 'loss'>>;
  /** Optimizer steps taken (Adam's t). */
  #steps = 0;
  /** The whole arena must go up (after init); or only the parameters (after host edits). */
  #deviceStale = true;
  #paramsStale = false;
  /** The data set now in xdata/ydata (by identity) and its checked form. */
  #resident: { data: Data; checked: CheckedData } | undefined;

  constructor(arena: Arena, options: TrainerOptions = {}) {
    this.arena = arena;
    const s = arena.plan.spec;
    this.inputs = s.layers[0]!;
    this.outputs = s.layers[s.layers.length - 1]!;
    const softmax = s.activations[s.activations.length - 1] === 'softmax';
    this.loss = options.loss ?? (softmax ? 'cross-entropy' : 'mse');
    if (this.loss !== 'cross-entropy' && this.loss !== 'mse') throw new OptionError('BAD_LOSS', 'loss', this.loss, "must be 'cross-entropy' or 'mse'");
    if ((this.loss === 'cross-entropy') !== softmax) {
      throw new OptionError('BAD_LOSS', 'loss', this.loss, softmax ? 'a softmax output layer trains with cross-entropy' : 'cross-entropy needs a softmax output layer');
    }
    const defaults = { lr: s.optimizer === 'adam' ? 0.001 : 0.05, momentum: 0.9, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
    this.#hyper = { ...defaults };
    for (const k of Object.keys(defaults) as Array<keyof typeof defaults>) {
      const v = options[k];
      if (v === undefined) continue;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (k === 'lr' && v === 0)) {
        throw new OptionError('BAD_OPTION', k, v, k === 'lr' ? 'must be a positive finite number' : 'must be a finite number >= 0');
      }
      this.#hyper[k] = v;
    }
  }

  get steps(): number { return this.#steps; }

  /** Saves everything needed to resume: the whole arena (brought back from the device first)
   *  and the optimizer step count. */
  save(path: string): number {
    this.arena.toHost();
    return this.arena.save(path, { steps: this.#steps });
  }

  /** Resumes from save(): same weights, optimizer state and step count, so further steps give
   *  the same result as if training had never stopped. */
  static load(path: string, arenaOptions: ArenaOptions = {}, options: TrainerOptions = {}): Trainer {
    const { arena, info } = loadArena(path, (plan) => Arena.create(plan, arenaOptions));
    const t = new Trainer(arena, options);
    t.#steps = info.steps;
    t.#deviceStale = false;  // loadArena sent the whole arena up
    return t;
  }

  /** He (relu) or Xavier (other activations) normal weights from `seed`, zero biases and
   *  optimizer state; on the host, identical on every backend. */
  init(seed: number): void {
    if (!Number.isSafeInteger(seed)) throw new OptionError('BAD_SEED', 'seed', seed, 'must be a safe integer');
    const { layers, activations } = this.arena.plan.spec;
    const rng = new Rng(seed);
    for (let l = 1; l < layers.length; l++) {
      const fanIn = layers[l - 1]!, fanOut = layers[l]!;
      const std = activations[l - 1] === 'relu' ? Math.sqrt(2 / fanIn) : Math.sqrt(2 / (fanIn + fanOut));
      const w = this.arena.view(l, 'w');
      for (let i = 0; i < w.length; i++) w[i] = rng.normal() * std;
      this.arena.view(l, 'b').fill(0);
      for (const k of ['mw', 'mb', 'vw', 'vb'] as const) if (this.arena.plan.region(l, k)) this.arena.view(l, k).fill(0);
    }
    this.#steps = 0;
    this.#deviceStale = true;
    this.#resident = undefined;
  }

  /** One step on one batch given by the caller (rows <= the plan's batch). */
  async step(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
    const d = checkData({ x, ...target }, this.inputs, this.outputs, 'step');
    const rows = this.#stageBatch(d, 0, d.count);
    await this.#run({ op: OP.train, rows, stepBase: this.#steps });
    this.#steps++;
    const m = this.#readStats();
    if (!Number.isFinite(m.loss)) throw new ArenaError('DIVERGED', `training diverged: the loss is ${m.loss} at step ${this.#steps - 1}`);
    return m;
  }

  /** Trains `epochs` passes over `data`, resident in the arena's data regions. */
  async fit(data: Data, options: FitOptions): Promise<FitResult> {
    const { epochs, shuffle = true, seed = 0, onProgress } = options;
    if (!Number.isSafeInteger(epochs) || epochs < 1) throw new OptionError('BAD_OPTION', 'epochs', epochs, 'must be a positive integer');
    const reports = options.reportsPerEpoch ?? 1;
    if (!Number.isSafeInteger(reports) || reports < 1) throw new OptionError('BAD_OPTION', 'reportsPerEpoch', reports, 'must be a positive integer');
    const d = this.#makeResident(data);
    const batch = this.arena.plan.spec.batch;
    const batches = Math.ceil(d.count / batch);
    const chunk = Math.ceil(batches / Math.min(reports, batches));
    const rng = new Rng(seed);
    const t0 = performance.now();
    let last: Metrics = { loss: NaN, accuracy: NaN };
    let path: RunPath = 'cpu';
    for (let epoch = 1; epoch <= epochs; epoch++) {
      const perm = shuffle ? affinePermutation(rng, d.count) : { a: 1, c: 0 };
      const epochStart = performance.now();
      for (let first = 0; first < batches; first += chunk) {
        const n = Math.min(chunk, batches - first);
        path = await this.#run({
          op: OP.train, resident: true, samples: d.count, firstBatch: first, numBatches: n,
          permA: perm.a, permC: perm.c, stepBase: this.#steps, resetStats: first === 0,
        });
        const stepBase = this.#steps;
        this.#steps += n;
        const stats = this.#stats();
        if (stats[STATS.badStep]! >= 0) {
          const badStep = stepBase + stats[STATS.badStep]!;
          throw new ArenaError('DIVERGED', `training diverged: the loss became non-finite at step ${badStep} (epoch ${epoch}); lower the learning rate`);
        }
        last = metricsOf(stats);
        const done = first + n;
        onProgress?.({
          ...last, epoch, epochs, batch: done, batches, step: this.#steps,
          samplesPerSecond: Math.min(done * batch, d.count) / ((performance.now() - epochStart) / 1000),
        });
      }
    }
    this.arena.toHost({ kinds: PARAM_KINDS });
    const seconds = (performance.now() - t0) / 1000;
    return { ...last, path, epochs, steps: epochs * batches, seconds, samplesPerSecond: (epochs * d.count) / seconds };
  }

  /** Mean loss and accuracy over `data` (batch by batch through z[0]/y, or the resident set). */
  async evaluate(data: Data): Promise<Metrics> {
    if (data === this.#resident?.data) {
      const d = this.#resident.checked;
      await this.#run({ op: OP.eval, resident: true, samples: d.count, numBatches: Math.ceil(d.count / this.arena.plan.spec.batch) });
      return this.#readStats();
    }
    const d = checkData(data, this.inputs, this.outputs, 'evaluate');
    const batch = this.arena.plan.spec.batch;
    for (let first = 0; first < d.count; first += batch) {
      const rows = this.#stageBatch(d, first, Math.min(batch, d.count - first));
      await this.#run({ op: OP.eval, rows, resetStats: first === 0 });
    }
    return this.#readStats();
  }

  /** Outputs of the network for x (count x outputs values). */
  async predict(x: ArrayLike<number>): Promise<View> {
    const count = x.length / this.inputs;
    const d = checkData({ x, y: new Float64Array(count * this.outputs) }, this.inputs, this.outputs, 'predict');
    const batch = this.arena.plan.spec.batch;
    const L = this.arena.plan.spec.layers.length - 1;
    const out = this.arena.plan.spec.dtype === 'float64' ? new Float64Array(d.count * this.outputs) : new Float32Array(d.count * this.outputs);
    for (let first = 0; first < d.count; first += batch) {
      const rows = this.#stageBatch(d, first, Math.min(batch, d.count - first));
      await this.#run({ op: OP.forward, rows, resetStats: false });
      this.arena.toHost({ layers: [L], kinds: ['z'] });
      out.set(this.arena.view(L, 'z').subarray(0, rows * this.outputs), first * this.outputs);
    }
    return out;
  }

  /** Gradients of the mean loss over one batch, left in the dw/db regions (weights untouched). */
  async gradients(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
    const d = checkData({ x, ...target }, this.inputs, this.outputs, 'gradients');
    const rows = this.#stageBatch(d, 0, d.count);
    await this.#run({ op: OP.grad, rows });
    this.arena.toHost({ kinds: ['dw', 'db'] });
    return this.#readStats();
  }

  /** Brings every region back to the host (weights, gradients, optimizer state). */
  syncToHost(): void { this.arena.toHost(); }

  /** Marks host-side edits of the weights and biases for upload before the next run (only
   *  w and b go up: optimizer state on the device is never overwritten by a stale host copy). */
  markHostChanged(): void { this.#paramsStale = true; }

  // ---- internals ----------------------------------------------------------------------------

  /** Writes rows [first, first+rows) of d into z[0] and y and uploads just those regions. */
  #stageBatch(d: CheckedData, first: number, rows: number): number {
    const batch = this.arena.plan.spec.batch;
    if (rows > batch) throw new DataError('BAD_DATA', 'x.length', d.x.length, `holds ${rows} samples, more than the batch of ${batch}`);
    this.#syncDevice();
    const z0 = this.arena.view(0, 'z');
    const L = this.arena.plan.spec.layers.length - 1;
    const y = this.arena.view(L, 'y');
    const xs = d.x;
    for (let i = 0; i < rows * this.inputs; i++) z0[i] = xs[first * this.inputs + i]!;
    for (let r = 0; r < rows; r++) d.target(first + r, y, r * this.outputs);
    this.arena.toDevice({ layers: [0], kinds: ['z'] });
    this.arena.toDevice({ layers: [L], kinds: ['y'] });
    return rows;
  }

  #makeResident(data: Data): CheckedData {
    if (this.#resident?.data === data) {
      this.#syncDevice();
      return this.#resident.checked;
    }
    const d = checkData(data, this.inputs, this.outputs);
    const samples = this.arena.plan.spec.samples;
    if (d.count > samples) {
      throw new DataError('DATA_TOO_LARGE', 'data.x.length', d.x.length, `holds ${d.count} samples; the arena's data regions hold ${samples} (plan with samples >= ${d.count})`);
    }
    this.#syncDevice();
    const L = this.arena.plan.spec.layers.length - 1;
    const xd = this.arena.view(0, 'xdata');
    const yd = this.arena.view(L, 'ydata');
    if (ArrayBuffer.isView(d.x)) xd.set(d.x as unknown as ArrayLike<number>);
    else for (let i = 0; i < d.x.length; i++) xd[i] = d.x[i]!;
    for (let i = 0; i < d.count; i++) d.target(i, yd, i * this.outputs);
    this.arena.toDevice({ kinds: ['xdata', 'ydata'] });
    this.#resident = { data, checked: d };
    return d;
  }

  #syncDevice(): void {
    if (this.#deviceStale) this.arena.toDevice();
    else if (this.#paramsStale) this.arena.toDevice({ kinds: PARAM_KINDS });
    this.#deviceStale = this.#paramsStale = false;
  }

  async #run(params: RunParams): Promise<RunPath> {
    this.#syncDevice();
    return runArena(this.arena, { ...this.#hyper, loss: LOSSES[this.loss], ...params });
  }

  #stats(): View {
    const L = this.arena.plan.spec.layers.length - 1;
    this.arena.toHost({ layers: [L], kinds: ['stats'] });
    return this.arena.view(L, 'stats');
  }

  #readStats(): Metrics { return metricsOf(this.#stats()); }
}
