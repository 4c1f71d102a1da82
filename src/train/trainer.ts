// trainer.ts: training on an arena. The network owns no memory: weights, gradients, optimizer
// state, the batch and (for fit) the whole data set live in the arena; steps run natively off
// the JS thread and read back only the few bytes of the stats region.
//
// Transfers: init() writes the host side and uploads it (on a new arena only what was written:
// the parameters and optimizer state, not the empty data regions; else the whole arena). fit()
// uploads the data set once (again only when its contents change), reads 32-byte stats per
// report, and downloads the weights and biases once at the end. evaluate() makes a data set that
// fits the data regions resident the same way; predict() goes batch by batch through z[0],
// leaving the resident set alone. Nothing else moves per step.
//
// Which side is current: after init(), markHostChanged() and fit(), host and device hold the
// same weights and biases. After step() and gradients() the device is current (gradients()
// also brings dw/db back); syncToHost() brings everything back. Until a Trainer first runs on
// (or initialises) an arena, its host side is taken as current and goes up whole before the
// first run.
//
// Runs on one arena are queued in call order (the arena's RunQueue), across Trainers too: each
// async method holds the queue from its first transfer to its last read-back. Arguments are
// read once, at the call, checked as they are written into the arena's regions (or into a
// snapshot while a run is queued: src/train/data.ts); a Dataset the arena holds is not read.
//
// Data parallel (a DataParallel group instead of an arena): step(), gradients() and fit() split
// every global batch across the replicas (rows [r * batch, (r + 1) * batch) to rank r) and the
// native run all-reduces gradients and stats; the other methods use the first replica of this
// process (its weights are every replica's). `arena` is that replica.
import { loadArena, loadArenaAsync, uploadWritten, type Arena, type ArenaOptions, type ViewOf } from '../arena/arena.js';
import { runTargetOf } from '../arena/run-target.js';
import type { CheckpointInfo, IoProgress, LoadOptions } from '../checkpoint/checkpoint.js';
import { activationInfo, type Dtype } from '../layout/header.js';
import { opWeights } from '../layout/ops/index.js';
import { abortError, ArenaError, OptionError } from '../core/errors.js';
import { OPS, type PrecisionName } from '../native/addon.js';
import type { DataParallel } from '../parallel/data-parallel.js';
import { checkKnownKeys } from '../core/known-keys.js';
import type { Data, Values } from './data.js';
import { Dataset } from './dataset.js';
import { fitData, fitLoop, fitPlan, type FitOptions, type FitResult } from './fit.js';
import { isStream, toStream, type DataStream } from './stream.js';
import { fitStream } from './stream-fit.js';
import type { Metrics } from './metrics.js';
import { checkModel, modelSeeds, optionsObject, trainerSettings, type LossName, type TrainerOptions } from './options.js';
import { backward, forward, update, type BackwardTarget } from './primitives.js';
import { Rng } from './rng.js';
import { PARAM_KINDS, Runner } from './runner.js';
import {
  loadOptions,
  positionOf,
  readTrainerMetadata,
  saveFile,
  saveFileAsync,
  settingsOf,
  setPosition,
  syncToHostInSteps,
  type TrainerRecord,
  type TrainerSaveOptions,
} from './resume.js';
import { stateOf } from './state.js';

export type { Metrics } from './metrics.js';
export type { FitOptions, FitResult, Progress } from './fit.js';
export type { LossName, LossScaleOptions, TrainerOptions } from './options.js';
export type { BackwardTarget } from './primitives.js';
export type { TrainerSaveOptions } from './resume.js';

/** Trains an arena (or a data-parallel group) of dtype D: forward() and predict() give
 *  ViewOf<D> (Float32Array for a float32 plan). */
export class Trainer<D extends Dtype = Dtype> implements Disposable, AsyncDisposable {
  /** The arena trained (a data-parallel group: this process's first replica). */
  readonly arena: Arena<D>;
  /** The data-parallel group, when the Trainer was made for one. */
  readonly group: DataParallel<D> | undefined;
  readonly loss: LossName;
  readonly inputs: number;
  readonly outputs: number;
  readonly precision: PrecisionName;
  readonly #r: Runner;
  /** The options as given, for a checkpoint (src/train/resume.ts). */
  readonly #given: { options: Record<string, unknown>; unsaved: string[] };
  /** Trainer.load made the arena: dispose() frees it. */
  #owned = false;

  constructor(arena: Arena<D> | DataParallel<D>, options: TrainerOptions = {}) {
    const target = runTargetOf<Arena>(arena);
    this.group = target.kind === 'group' ? (arena as DataParallel<D>) : undefined;
    this.arena = target.arenas[0]! as Arena<D>;
    // Every key read once: what is checked is what runs and what a checkpoint keeps.
    const given = { ...optionsObject(options, 'options') };
    const settings = trainerSettings(given, this.arena);
    this.#given = settingsOf(given);
    this.#r = new Runner(target, settings);
    this.loss = settings.loss;
    this.precision = settings.precision;
    this.inputs = this.#r.inputs;
    this.outputs = this.#r.outputs;
  }

  /** Optimizer steps taken on this arena's parameters (shared by the Trainers of one arena). */
  get steps(): number {
    return this.#r.state.steps;
  }

  /** The learning rate of 0-based optimizer step `step` (default: the next one) under this
   *  Trainer's schedule; model `model`'s where models have their own. */
  learningRate(step: number = this.#r.state.steps, model = 0): number {
    if (typeof step !== 'number' || !Number.isSafeInteger(step) || step < 0)
      throw new OptionError('BAD_OPTION', 'step', step, 'must be a non-negative integer (a 0-based optimizer step)');
    return this.#r.learningRate(step, checkModel(model, this.#r.models));
  }

  /** With clipGradNorm: the global gradient norm (before clipping) of each step of the last
   *  training run (step(), update(), or fit's last report); K models: step s, model m at s * K + m. */
  get gradNorms(): number[] {
    return this.#r.gradNorms();
  }

  /** precision 'fp16': the loss scale the next step multiplies the loss's gradient by (it moves
   *  as PyTorch's GradScaler's does: TrainerOptions.lossScale); undefined in other precisions. */
  get lossScale(): number | undefined {
    return this.#r.settings.lossScale ? this.#r.scaler.scale : undefined;
  }

  /** precision 'fp16': the steps this Trainer skipped because their scaled gradients overflowed
   *  (each still counts in `steps`: the schedule and Adam's step move on); 0 otherwise. */
  get skippedSteps(): number {
    return this.#r.scaler.skipped;
  }

  /** Rows of one step: the plan's batch, times the replicas of a data-parallel group. */
  get globalBatch(): number {
    return this.#r.globalBatch;
  }

  /** Arenas of K models: the number of models (planLayout `models`); 1 otherwise. */
  get models(): number {
    return this.#r.models;
  }

  /** Saves everything needed to resume exactly: the weights, biases, optimizer state, stats and
   *  user regions (brought back from the device first), gradients waiting for update(), the
   *  step count, the options this Trainer was made with and where an interrupted fit() stopped;
   *  the data set only with `data: true`. BUSY while a run is queued or in flight (saveAsync
   *  queues instead). Returns the file's size. */
  save(path: string, options: TrainerSaveOptions = {}): number {
    this.#r.assertIdle('save', false);
    return saveFile(this.arena, path, options, this.#record(), this.#r.state.steps);
  }

  /** save() queued behind this arena's runs, without blocking the event loop; `onProgress`. */
  async saveAsync(path: string, options: TrainerSaveOptions = {}): Promise<number> {
    return this.#r.queue.enqueue(() => saveFileAsync(this.arena, path, options, this.#record(), this.#r.state.steps));
  }

  #record(): TrainerRecord {
    const { params, lrs } = this.#r.settings.opt;
    const { lrs: _perModel, ...hyper } = params; // the resolved optimizer table entries, schedule and clipping
    const smoothing = this.#r.settings.labelSmoothing;
    return {
      ...this.#given,
      hyper: { ...hyper, ...(lrs ? { lr: [...lrs] } : {}), loss: this.loss, ...(smoothing ? { labelSmoothing: smoothing } : {}), precision: this.precision },
      gradients: this.#r.state.gradients && !this.arena.plan.spec.compact,
      fit: positionOf(this.arena),
      ...(this.#r.settings.lossScale ? { lossScale: { ...this.#r.scaler } } : {}),
    };
  }

  /** Resumes from save(): same weights, optimizer state, step count, options (those given here
   *  override the saved ones) and fit() position, so further steps give the same result as if
   *  training had never stopped. The Trainer owns the arena: dispose() frees it. */
  static load(path: string, arenaOptions: ArenaOptions = {}, options: TrainerOptions = {}): Trainer<Dtype> {
    const { arena, info } = loadArena(path, arenaOptions);
    return Trainer.#resume(arena, info, options);
  }

  /** load() without blocking the event loop; `onProgress({ bytes, totalBytes })` while reading. */
  static async loadAsync(path: string, arenaOptions: ArenaOptions = {}, options: TrainerOptions = {}, loadOptions: LoadOptions = {}): Promise<Trainer<Dtype>> {
    const { arena, info } = await loadArenaAsync(path, arenaOptions, loadOptions);
    return Trainer.#resume(arena, info, options);
  }

  static #resume(arena: Arena, info: CheckpointInfo, options: TrainerOptions): Trainer<Dtype> {
    try {
      const record = readTrainerMetadata(info.path, info.metadata);
      const t = new Trainer(arena, loadOptions(record, optionsObject(options, 'options')));
      t.#owned = true;
      const st = t.#r.state;
      st.steps = info.steps;
      st.deviceStale = false; // the load sent up what the file held; the rest is zero on both sides
      st.gradients = record.gradients && info.kinds.includes('dw');
      setPosition(arena, record.fit);
      if (record.lossScale && t.#r.settings.lossScale) Object.assign(t.#r.scaler, record.lossScale);
      return t;
    } catch (e) {
      arena.dispose();
      throw e;
    }
  }

  /** Frees the arena when this Trainer made it (Trainer.load); an arena you passed in stays
   *  yours. A run in flight finishes first (the memory goes when it ends). */
  dispose(): void {
    if (this.#owned) this.arena.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Waits for the work queued on the arena, then dispose(). */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#owned && !this.arena.disposed) await this.arena.synchronize();
    this.dispose();
  }

  /** He (relu-like activations) or Xavier (the others; the table's init) normal weights from
   *  `seed`, embedding tables N(0, 1), norms' gains 1, zero biases and
   *  optimizer state; written on the host (identical on every backend) and uploaded (a new
   *  arena: what was written, one transfer; else the whole arena), so both sides hold them when
   *  init() returns. BUSY while a
   *  run is queued or in flight. K models: model m takes seed + m, or seed[m] from an array
   *  of K seeds; either way the weights a one-model arena gets from that seed. */
  init(seed: number | readonly number[]): void {
    const r = this.#r;
    const seeds = modelSeeds(seed, r.models);
    r.assertIdle('init');
    const { layers, activations, ops } = this.arena.plan.spec;
    const plan = this.arena.plan;
    seeds.forEach((sm, m) => {
      const rng = new Rng(sm);
      for (let l = 1; l < layers.length; l++) {
        const fanIn = layers[l - 1]!,
          fanOut = layers[l]!;
        const std = activationInfo(activations[l - 1]!).init === 'he' ? Math.sqrt(2 / fanIn) : Math.sqrt(2 / (fanIn + fanOut));
        if (plan.region(l, 'w')) {
          // An op's w as its module says (src/layout/ops/): a norm's gain 1 with no draw, so the
          // dense layers' weights are those of the same seed without the ops; an embedding's
          // tables N(0, 1) as nn.Embedding's, drawn in layer order.
          const w = this.arena.view(l, 'w', m);
          const op = ops?.[l - 1]?.op ?? 'dense';
          const fill = op === 'dense' ? 'dense' : opWeights(op);
          if (fill === 'dense') for (let i = 0; i < w.length; i++) w[i] = rng.normal() * std;
          else if (fill === 'normal') for (let i = 0; i < w.length; i++) w[i] = rng.normal();
          else w.fill(1);
        }
        for (const k of ['b', 'mw', 'mb', 'vw', 'vb'] as const) if (plan.region(l, k)) this.arena.view(l, k, m).fill(0);
      }
    });
    // The other replicas of this process (groups hold one model): the same bytes (other
    // processes draw the same numbers).
    for (const a of r.target.arenas) {
      if (a !== this.arena) r.copyParams(a, ['w', 'b', 'mw', 'mb', 'vw', 'vb']);
      uploadWritten(a); // a new arena: what was written; else the whole arena
      const st = stateOf(a);
      st.steps = 0;
      st.deviceStale = false;
      st.forwardRows = undefined; // new weights: no activations or gradients of them yet
      st.gradients = false;
    }
    r.resetScaler(); // a new start: the loss scale too
  }

  /** One step on one batch given by the caller (rows <= the plan's batch). */
  async step(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
    const r = this.#r;
    const d = r.snapshotBatch(x, target, 'step');
    return r.queue.enqueue(async () => {
      const stepBase = r.state.steps;
      r.checkSteps(stepBase, 1);
      await r.runShards(d, { op: OPS.train, stepBase });
      r.addSteps(1);
      const m = r.readStats(true);
      if (r.models === 1 && r.diverged(0))
        throw new ArenaError('DIVERGED', `training diverged: the loss (${m.loss}) or the weights became non-finite at step ${stepBase}; ${r.divergedHint}`);
      return m;
    });
  }

  // ---- primitives: a step as forward(), backward(), update() (src/train/primitives.ts) -------

  /** Runs the network on x (at most the plan's batch of rows) and returns its outputs (rows x
   *  outputs, softmax applied): a view over the arena's host side, valid until the next run or
   *  transfer on this arena (copy it with slice() to keep it). Leaves every layer's activations
   *  for backward(). One arena of one model (NOT_SUPPORTED for a group or K models). */
  forward(x: ArrayLike<number>): Promise<ViewOf<D>> {
    return forward(this.#r, x) as Promise<ViewOf<D>>;
  }

  /** Gradients of the loss over the rows of the last forward(), left in the dw / db regions on
   *  the device (weights untouched; update() applies them, or bring them to the host with
   *  arena.toHost({ kinds: ['dw', 'db'] }) for an optimizer of your own). `{ labels }` / `{ y }`:
   *  the trainer's loss (its mean loss and accuracy go to the stats region: metrics());
   *  `{ dOutput }`: dL/dz of the output layer for your own loss, rows x outputs values (the
   *  derivative with respect to the outputs forward() returned, including any 1/rows of a
   *  mean; for softmax, with respect to the probabilities). ArenaError NO_FORWARD when no
   *  forward() output is in the arena (any other run since replaced it). */
  backward(target: BackwardTarget): Promise<void> {
    return backward(this.#r, target);
  }

  /** The built-in optimizer step (the arena's sgd, momentum or adam, this Trainer's
   *  hyper-parameters) from the gradients of backward() or gradients(), on the device; counts
   *  one step (Adam's t) as step() does. ArenaError NO_GRADIENTS when there are none to apply
   *  (each set is applied once). */
  update(): Promise<void> {
    return update(this.#r);
  }

  /** Mean loss and accuracy in the stats region: of the last backward() with labels or y (also
   *  once update() applied it), step(), gradients() or evaluate() (one 32-byte read). */
  async metrics(): Promise<Metrics> {
    return this.#r.queue.enqueue(async () => this.#r.readStats());
  }

  /** Trains `epochs` passes over `data`, resident in the arena's data regions (src/train/fit.ts):
   *  a { x, labels } / { x, y } object is read at the call, natively, into the regions and
   *  uploaded where it differs from what the device holds; a Dataset the arena holds is not
   *  read at all;
   *  or streamed through them (src/train/stream.ts) from streamNpy(files), an (async) iterable
   *  of batches or a function returning one per epoch. */
  async fit(
    data: Data | Dataset | DataStream | AsyncIterable<Data> | Iterable<Data> | (() => AsyncIterable<Data> | Iterable<Data>),
    options: FitOptions,
  ): Promise<FitResult> {
    const o = fitPlan(options, this.#r);
    if (o.signal?.aborted) throw abortError('fit', o.signal);
    if (!(data instanceof Dataset) && isStream(data)) return this.#r.queue.enqueue(() => fitStream(this.#r, toStream(data), o));
    const d = fitData(this.#r, data);
    return this.#r.queue.enqueue(() => fitLoop(this.#r, d, o));
  }

  /** Mean loss and accuracy over `data` (a { x, labels } / { x, y } object or a Dataset). A
   *  set that fits the data regions (count <= the plan's samples) is made resident (read into
   *  them at the call, uploaded where it differs from what the device holds; a Dataset the
   *  arena holds is not read) and evaluated in one run; a larger one batch by batch. */
  async evaluate(data: Data | Dataset): Promise<Metrics> {
    const r = this.#r;
    const { d, fits, dataset } = r.residentData(data, 'data');
    return r.queue.enqueue(async () => {
      if (fits) {
        r.makeResident(d, r.arena, dataset);
        await r.run({ op: OPS.eval, resident: true, samples: d.count, numBatches: Math.ceil(d.count / r.batch) });
        return r.readStats();
      }
      for (let first = 0; first < d.count; first += r.batch) {
        const rows = Math.min(r.batch, d.count - first);
        await r.runRows(d, first, rows, { op: OPS.eval, resetStats: first === 0 }, first + rows === d.count ? ['stats'] : []);
      }
      return r.readStats(d.count > 0);
    });
  }

  /** Outputs of the network (K models: of model `options.model`, default 0) for x (count x
   *  outputs values), batch by batch through z[0] (the resident data set stays where it is).
   *  `options.out`: an array of the arena's dtype with room for count x outputs values to write
   *  them into (and return), instead of a new one. */
  async predict(x: ArrayLike<number>, options: { model?: number; out?: ViewOf<D> } = {}): Promise<ViewOf<D>> {
    const r = this.#r;
    const o = optionsObject(options, 'options');
    checkKnownKeys(o, ['model', 'out'], 'predict');
    const model = checkModel(o.model === undefined ? 0 : o.model, r.models);
    const V = r.dtype === 'float64' ? Float64Array : Float32Array;
    const given = o.out;
    if (given !== undefined && !(given instanceof V)) throw new OptionError('BAD_OPTION', 'out', given, `must be a ${V.name} (the arena's dtype)`);
    const done = r.predictInline(x, given as Values | undefined, 'predict');
    if (done) return done as ViewOf<D>;
    const d = r.readInputs(x, 'predict');
    const n = d.count * r.outputs;
    if (given && (given as Values).length < n)
      throw new OptionError('BAD_OPTION', 'out.length', (given as Values).length, `must hold the ${d.count} rows x ${r.outputs} outputs = ${n} values`);
    const out = (given as Values | undefined) ?? new V(n);
    return r.queue.enqueue(async () => {
      const L = r.last;
      for (let first = 0; first < d.count; first += r.batch) {
        const rows = Math.min(r.batch, d.count - first);
        await r.runRows(d, first, rows, { op: OPS.forward, resetStats: false }, r.models === 1 ? ['outputs'] : []);
        if (r.models > 1) this.arena.toHost({ layers: [L], kinds: ['z'] });
        out.set(this.arena.view(L, 'z', model).subarray(0, rows * r.outputs), first * r.outputs);
      }
      return out as ViewOf<D>;
    });
  }

  /** Gradients of the mean loss over one batch, left in the dw/db regions (weights untouched)
   *  on both sides. NOT_SUPPORTED on a compact plan. */
  async gradients(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
    if (this.arena.plan.spec.compact) {
      throw new ArenaError(
        'NOT_SUPPORTED',
        'gradients() needs a plan without compact: a compact arena keeps no gradients after a run (dw and db share bytes, and an SGD plan has no dw)',
      );
    }
    const r = this.#r;
    const d = r.snapshotBatch(x, target, 'gradients');
    return r.queue.enqueue(async () => {
      await r.runShards(d, { op: OPS.grad });
      this.arena.toHost({ kinds: ['dw', 'db'] });
      return r.readStats(true);
    });
  }

  /** Brings every region back to the host (weights, gradients, optimizer state). BUSY while a
   *  run is queued or in flight. */
  syncToHost(): void {
    this.#r.assertIdle('syncToHost', false);
    this.arena.toHost();
  }

  /** syncToHost() queued behind this arena's runs, in steps that let the event loop run between
   *  them; `onProgress({ bytes, totalBytes })` after each. */
  async syncToHostAsync(options: { onProgress?: (p: IoProgress) => void } = {}): Promise<void> {
    const o = optionsObject(options, 'options');
    checkKnownKeys(o, ['onProgress'], 'syncToHostAsync');
    const { onProgress } = o;
    if (onProgress !== undefined && typeof onProgress !== 'function') throw new OptionError('BAD_OPTION', 'onProgress', onProgress, 'must be a function');
    return this.#r.queue.enqueue(() => syncToHostInSteps(this.arena, onProgress as ((p: IoProgress) => void) | undefined));
  }

  /** Sends host-side edits of the weights and biases to the device now (only w and b go up:
   *  optimizer state on the device is never overwritten by a stale host copy). BUSY while a run
   *  is queued or in flight. */
  markHostChanged(): void {
    const r = this.#r;
    r.assertIdle('markHostChanged');
    for (const a of r.target.arenas) {
      r.syncDevice(a);
      if (a !== this.arena) r.copyParams(a, PARAM_KINDS);
      a.toDevice({ kinds: PARAM_KINDS });
    }
  }
}
