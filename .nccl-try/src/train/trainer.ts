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
import { LOSSES, native, OPS, type RunParams, type RunPath } from '../native.js';
import { loadArena } from '../checkpoint.js';
import type { ArenaOptions } from '../arena.js';
import { snapshotData, type Data, type Snapshot, type Values } from './data.js';
import { assertIdle, enqueue, stateOf, type ArenaState } from './queue.js';
import { Rng, affinePermutation } from './rng.js';
import { DataParallel, runGroup } from '../parallel/data-parallel.js';

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
const HYPER_KEYS = ['lr', 'momentum', 'beta1', 'beta2', 'eps'] as const;
type Hyper = Record<(typeof HYPER_KEYS)[number], number>;

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
function checkHyper(k: keyof Hyper, v: unknown, dtype: Dtype): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new OptionError('BAD_OPTION', k, v, 'must be a finite number');
  const r = round(dtype, v);
  if (k === 'lr' || k === 'eps') {
    if (!(r > 0) || !Number.isFinite(r)) throw new OptionError('BAD_OPTION', k, v, `must be > 0 and finite as a ${dtype} (it is ${r})`);
  } else if (!(r >= 0 && r < 1)) {
    throw new OptionError('BAD_OPTION', k, v, `must be in [0, 1) as a ${dtype} (it is ${r})`);
  }
  return v;
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
  #hyper: Hyper;
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
    this.#hyper = { lr: s.optimizer === 'adam' ? 0.001 : 0.05, momentum: 0.9, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
    for (const k of HYPER_KEYS) {
      const v = o[k];
      if (v !== undefined) this.#hyper[k] = checkHyper(k, v, this.#dtype);
    }
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
   *  run is queued or in flight. */
  init(seed: number): void {
    checkSeed(seed);
    for (const a of this.#replicas) assertIdle(a, 'init');
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
    // The other replicas of this process: the same bytes (other processes draw the same numbers).
    for (const a of this.#replicas) {
      if (a !== this.arena) this.#copyParams(a, ['w', 'b', 'mw', 'mb', 'vw', 'vb']);
      a.toDevice();
      const st = stateOf(a);
      st.steps = 0;
      st.deviceStale = false;
    }
  }

  /** One step on one batch given by the caller (rows <= the plan's batch). */
  async step(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
    const d = this.#snapshotBatch(x, target, 'step');
    return enqueue(this.arena, async () => {
      const stepBase = this.#state.steps;
      this.#checkSteps(stepBase, 1);
      await this.#runShards(d, { op: OP.train, stepBase });
      this.#addSteps(1);
      const m = this.#readStats();
      if (!Number.isFinite(m.loss)) throw new ArenaError('DIVERGED', `training diverged: the loss is ${m.loss} at step ${stepBase}`);
      return m;
    });
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
        if (stats[STATS.badStep]! >= 0) {
          const badStep = stepBase + stats[STATS.badStep]!;
          throw new ArenaError('DIVERGED', `training diverged: the loss became non-finite at step ${badStep} (epoch ${epoch}); lower the learning rate`);
        }
        last = metricsOf(stats);
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

  /** Outputs of the network for x (count x outputs values). Inputs that fit the data regions
   *  go up once (resident) and run one batch per run, each batch's outputs read back from z
   *  (a forward run leaves only its last batch there); larger ones go batch by batch. */
  async predict(x: ArrayLike<number>): Promise<View> {
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
        out.set(this.arena.view(L, 'z').subarray(0, rows * this.outputs), first * this.outputs);
      }
      return out;
    });
  }

  /** Gradients of the mean loss over one batch, left in the dw/db regions (weights untouched)
   *  on both sides. */
  async gradients(x: ArrayLike<number>, target: { labels: ArrayLike<number> } | { y: ArrayLike<number> }): Promise<Metrics> {
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
    return runArena(this.arena, { ...this.#hyper, loss: LOSSES[this.loss], ...params });
  }

  /** One run of every replica of this process; `params(rank, i)` for global rank `rank`. */
  async #runGroup(params: (rank: number, i: number) => RunParams): Promise<RunPath> {
    for (const a of this.#replicas) this.#syncDevice(a);
    const all = this.#replicas.map((_, i) => ({ ...this.#hyper, loss: LOSSES[this.loss], ...params(this.#firstRank + i, i) }));
    if (!this.group) return runArena(this.arena, all[0]!);
    return runGroup(this.group, all);
  }

  #stats(): View {
    const L = this.#last;
    this.arena.toHost({ layers: [L], kinds: ['stats'] });
    return this.arena.view(L, 'stats');
  }

  #readStats(): Metrics { return metricsOf(this.#stats()); }
}
