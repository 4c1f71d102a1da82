// runner.ts: how a Trainer runs on its run target (an Arena, or a DataParallel group: one
// interface, src/arena/arena.ts RunTarget). Everything the Trainer's methods share: the plan's
// shape and the reading of their data (inputs.ts), the checked options, the arena's queue,
// staging rows and runs; what the runs leave is read by run-reports.ts (which it extends).
import { handleOf, queueOf, runArena, transferRanges, uploadWritten, type Arena, type RunTarget, type View } from '../arena/arena.js';
import type { Selector } from '../layout/selector.js';
import { ArenaError, fromNative } from '../core/errors.js';
import { notifyRanges, notifyTransfer } from '../arena/transfer-events.js';
import type { Kind } from '../layout/header.js';
import { call, LOSSES, OPS, PRECISIONS, type NativeWindowStager, type Readback, type RunParams, type RunPath } from '../native/addon.js';
import type { RunQueue } from '../arena/run-queue.js';
import { notFinite, numericTypedLength, type Snapshot, type Values } from './data.js';
import type { Dataset } from './dataset.js';
import { makeResident } from './resident.js';
import { RunReports } from './run-reports.js';
import { stateOf } from './state.js';
import { lossScaleParams, type TrainerSettings } from './options.js';

export const PARAM_KINDS: Kind[] = ['w', 'b'];

/** The most multiply-adds a run may have to run on the JS thread (Runner.inlineRun): work
 *  short enough to hold the thread for, on each backend at its own rate (the CPU's bound takes a
 *  step of 784-128-10 on 100 rows, 3e7; CUDA's a step of 784-1024-1024-10 on 256 rows, 1.4e9).
 *  `fed`: a predict() of many rows on CUDA device memory, one fed run (csrc/cuda/run_feed.cuh):
 *  the device runs a group of batches while the host checks the next into a page-locked slot, so
 *  the thread is held about the device's time; past the per-run bound such a predict went batch
 *  by batch from JavaScript, each batch a call with a wait of its own, several times as long. */
const INLINE_MACS = { cpu: 2 ** 25, cuda: 2 ** 32, fed: 2 ** 34 } as const;

/** o and every object or array under it, frozen (a native reader keeps what it read of them). */
function deepFreeze<T extends object>(o: T): Readonly<T> {
  for (const v of Object.values(o)) if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) deepFreeze(v as object);
  return Object.freeze(o);
}

/** Byte ranges [offset, bytes, ...] of an arena and the regions they belong to (what observers
 *  of its transfers are told). */
interface Moved {
  regions: Selector;
  ranges: number[];
}
/** What z[0]'s rows alone belong to (frozen: every call's transfers share it). */
const X_REGIONS: Selector = deepFreeze({ layers: [0], kinds: ['z'] as Kind[] });

export class Runner extends RunReports {
  readonly queue: RunQueue;
  /** Multiply-adds of one row through the net (Runner.inlineRun). */
  readonly #macs: number;

  constructor(target: RunTarget, settings: TrainerSettings) {
    super(target, settings);
    const s = this.arena.plan.spec;
    this.#macs = s.layers.reduce((m, u, l) => (l === 0 ? 0 : m + s.layers[l - 1]! * u), 0);
    this.queue = queueOf(this.arena);
  }

  /** Every arena of this process is idle (the synchronous methods refuse to race a run). */
  assertIdle(what: string, all = true): void {
    for (const a of all ? this.target.arenas : [this.arena]) queueOf(a).assertIdle(what);
  }

  /** Step counts cross to the native side as exact integers. */
  checkSteps(base: number, n: number): void {
    if (!Number.isSafeInteger(base + n)) throw new ArenaError('TOO_MANY_STEPS', `the step count ${base} + ${n} exceeds 2^53 - 1`);
  }

  addSteps(n: number): void {
    for (const a of this.target.arenas) stateOf(a).steps += n;
  }

  /** Moves the first `bytes` of region (layer, kind): the rows a primitive uses, no more. */
  rowsTransfer(dir: 'toDevice' | 'toHost', layer: number, kind: Kind, bytes: number): void {
    transferRanges(this.arena, dir, { layers: [layer], kinds: [kind] }, [this.arena.plan.region(layer, kind)!.offset, bytes]);
  }

  /** Before the first run of any Trainer on an arena, its host side goes up (what was written
   *  of it, on a new arena: Arena's uploadWritten). */
  syncDevice(arena: Arena = this.arena): void {
    const st = stateOf(arena);
    if (st.deviceStale) {
      uploadWritten(arena);
      st.deviceStale = false;
    }
  }

  /** Writes rows [first, first+rows) of d into z[0] and y (unless d was read there: staged)
   *  and uploads just those rows. */
  stageBatch(d: Snapshot, first: number, rows: number, arena: Arena = this.arena): number {
    this.syncDevice(arena);
    if (rows === 0) return 0;
    const up = this.#writeRows(d, first, rows, arena);
    transferRanges(arena, 'toDevice', up.regions, up.ranges);
    return rows;
  }

  /** Rows [first, first+rows) of d written into the host rows of z[0] and y of `arena` (unless
   *  d was read there: staged): the ranges that then go up. */
  #writeRows(d: Snapshot, first: number, rows: number, arena: Arena): Moved {
    const L = this.last;
    const xs = rows * this.inputs,
      ys = rows * this.outputs;
    const bpe = d.x.BYTES_PER_ELEMENT;
    const inPlace = d.staged === 'batch' && arena === this.arena && first === 0;
    if (!inPlace) arena.view(0, 'z').set(d.x.subarray(first * this.inputs, first * this.inputs + xs));
    const ranges = [arena.plan.region(0, 'z')!.offset, xs * bpe];
    if (d.y) {
      if (!inPlace) arena.view(L, 'y').set(d.y.subarray(first * this.outputs, first * this.outputs + ys));
      ranges.push(arena.plan.region(L, 'y')!.offset, ys * bpe);
    }
    return { regions: d.y ? (this.#xyRegions ??= deepFreeze({ layers: [0, L], kinds: ['z', 'y'] as Kind[] })) : X_REGIONS, ranges };
  }
  #xyRegions: Selector | undefined;

  /** The first `bytes` of region (layer, kind) of the first arena, or all of it. */
  #rowsOf(layer: number, kind: Kind, bytes?: number): Moved {
    const region = this.arena.plan.region(layer, kind)!;
    return { regions: { layers: [layer], kinds: [kind] }, ranges: [region.offset, bytes ?? region.bytes] };
  }

  /** A run of the first arena on rows [first, first + rows) of d (written into its z[0] / y
   *  host rows, unless d was read there) that brings `back` (the stats region: 'stats'; the
   *  outputs of those rows: 'outputs') to the host with it. Where the run is short enough for
   *  this thread (inlineRun), the upload, the run and the read-back are one native call with
   *  one wait; else transfers of their own around the run. */
  async runRows(d: Snapshot, first: number, rows: number, params: RunParams, back: readonly ('stats' | 'outputs')[]): Promise<RunPath> {
    const arena = this.arena;
    this.syncDevice(arena);
    const up = rows > 0 ? this.#writeRows(d, first, rows, arena) : { regions: {}, ranges: [] };
    const down = back.map((b) => (b === 'stats' ? this.#statsRows() : this.#rowsOf(this.last, 'z', rows * this.outputs * d.x.BYTES_PER_ELEMENT)));
    const own = { ...params, rows };
    if (!this.inlineRun(own))
      return this.#tracked([arena], params.op, async () => {
        if (up.ranges.length) transferRanges(arena, 'toDevice', up.regions, up.ranges);
        const path = await runArena(arena, { ...this.#baseParams(), ...own });
        for (const m of down) transferRanges(arena, 'toHost', m.regions, m.ranges);
        return path;
      });
    // On this thread: tracked without a closure or a promise of its own (a step() in a loop
    // allocated several kilobytes a call, and the collector's time showed in its fixed cost).
    this.#trackBefore(this.#first, params.op);
    const path = call(() => handleOf(arena).runInline(this.#baseParams(), own, up.ranges, down.length === 1 ? down[0]!.ranges : down.flatMap((m) => m.ranges)));
    if (up.ranges.length) notifyRanges(arena, 'toDevice', up.regions, up.ranges);
    for (const m of down) notifyRanges(arena, 'toHost', m.regions, m.ranges);
    this.#trackAfter(this.#first, params.op);
    return path;
  }

  /** The stats region of the first arena, whole: what a step brings back (made once). */
  #statsRows(): Moved {
    return (this.#stats ??= deepFreeze(this.#rowsOf(this.last, 'stats')));
  }
  #stats: Moved | undefined;
  /** [the first arena], made once. */
  get #first(): readonly Arena[] {
    return (this.#firstList ??= [this.arena]);
  }
  #firstList: readonly Arena[] | undefined;

  /** predict() of a typed array x on this thread, in one native call that reads each batch of
   *  x into z[0] as it goes (no copy of x) and runs it with its copies (Arena handle's
   *  predictRows): where the whole predict is short enough for this thread (inlineRun of its
   *  rows as a fed run) and nothing is queued, for one model of one arena. Returns false
   *  (nothing done) where it does not apply: the caller goes batch by batch. Reading x at the
   *  call, all of it, keeps predict()'s promise: what ran is what x held when it was called. */
  predictInline(x: unknown, out: Values | undefined, field: string): Values | false {
    const n = numericTypedLength(x);
    if (n === undefined || n === 0 || n % this.inputs !== 0 || this.models !== 1 || this.target.kind !== 'arena' || !this.idle) return false;
    const count = n / this.inputs;
    const own = { op: OPS.forward, resetStats: false, rows: this.batch };
    if (!this.inlineRun({ ...own, rows: count }, true)) return false;
    if (out !== undefined && out.length < count * this.outputs) return false; // the caller's check names it
    const arena = this.arena;
    if (arena.disposed) throw new ArenaError('DISPOSED', 'the arena was disposed');
    this.syncDevice(arena);
    const V = this.dtype === 'float64' ? Float64Array : Float32Array;
    const dest = out ?? new V(count * this.outputs);
    const z0 = arena.plan.region(0, 'z')!,
      zL = arena.plan.region(this.last, 'z')!;
    stateOf(arena).forwardRows = undefined; // a forward run replaces the activations
    const r = call(() =>
      handleOf(arena).predictRows(this.#baseParams(), own, x as ArrayBufferView, count, dest, [z0.offset, zL.offset, this.inputs, this.outputs, this.batch]),
    );
    if (r === null) return false;
    const bpe = dest.BYTES_PER_ELEMENT;
    const up: number[] = [],
      down: number[] = [];
    for (let b = 0; b < r.batches; b++) {
      const rows = Math.min(this.batch, count - b * this.batch);
      up.push(z0.offset, rows * this.inputs * bpe);
      down.push(zL.offset, rows * this.outputs * bpe);
    }
    if (up.length) notifyRanges(arena, 'toDevice', { layers: [0], kinds: ['z'] }, up);
    if (down.length) notifyRanges(arena, 'toHost', { layers: [this.last], kinds: ['z'] }, down);
    if (r.bad >= 0) throw notFinite(`${field}.x`, r.bad, r.value, this.dtype);
    return dest;
  }

  /** Makes d the resident data set of `arena` (src/train/resident.ts). */
  makeResident(d: Snapshot, arena: Arena = this.arena, dataset?: { handle: Dataset; version: number }): void {
    this.syncDevice(arena);
    makeResident(arena, d, this.outputs, dataset);
  }

  /** Copies region kinds `kinds` of every layer from the first arena's host side to `to`'s. */
  copyParams(to: Arena, kinds: readonly Kind[]): void {
    const plan = this.arena.plan;
    for (let l = 1; l <= this.last; l++) for (const k of kinds) if (plan.region(l, k)) to.view(l, k).set(this.arena.view(l, k));
  }

  /** A run of the first arena alone (evaluate, predict, the primitives: no shards, no
   *  reduction); a short one on this thread (inlineRun). */
  async run(params: RunParams): Promise<RunPath> {
    this.syncDevice();
    return this.#tracked(
      [this.arena],
      params.op,
      this.#dispatch(params, () => runArena(this.arena, { ...this.#baseParams(), ...params })),
    );
  }

  /** Whether a run is short enough to run on the JS thread: handing it to a libuv worker and
   *  back (two thread wake-ups, tens to hundreds of microseconds) would cost more than its work.
   *  One arena without a device budget; a run of at most INLINE_MACS multiply-adds (rows x the
   *  net's weights x 3 for a step, x 1 for a forward pass; K models count K times). Reads the
   *  call's own parameters only (op, rows, resident, numBatches): none is a base parameter.
   *  `fed`: the run is a predict's fed run, whose bound on CUDA device memory is INLINE_MACS.fed. */
  inlineRun(p: RunParams, fed = false): boolean {
    const a = this.arena;
    if (this.target.kind !== 'arena' || a.deviceBudget !== undefined) return false;
    const rows = p.resident ? (p.numBatches ?? 1) * this.batch : (p.rows ?? this.batch);
    const passes = p.op === OPS.forward || p.op === OPS.eval ? 1 : 3;
    const bound = a.backend !== 'cuda' ? INLINE_MACS.cpu : fed && a.memory === 'device' ? INLINE_MACS.fed : INLINE_MACS.cuda;
    return rows * this.#macs * passes * this.models <= bound;
  }

  /** A run on the first arena, `own` its parameters beside the base ones: on this thread where
   *  it is short (inlineRun), else on a worker (`worker`: the run of every arena of the target). */
  #dispatch(own: RunParams, worker: () => Promise<RunPath>): () => Promise<RunPath> {
    return this.inlineRun(own) ? async () => call(() => handleOf(this.arena).runInline(this.#baseParams(), own)) : worker;
  }

  /** A streamed window's run (src/train/stream-fit.ts): the window staged in `slot` goes into
   *  the data regions, checked on the way, then the run, then the stats come back with it (one
   *  transfer, as stats() makes). It may be queued while the run before it trains: the runs keep
   *  their order. `bad` >= 0: the window held a NaN or infinity there (`value`), nothing trained;
   *  -2: a window before it did (nothing done). `first`: a fit's first run. */
  async runWindow(
    stager: NativeWindowStager,
    slot: number,
    xBytes: number,
    yBytes: number,
    params: RunParams,
    first: boolean,
  ): Promise<{ path: RunPath; stats: View[]; gradNorms: number[]; bad: number; value: number }> {
    this.syncDevice();
    const region = this.arena.plan.region(this.last, 'stats')!;
    const { r, stats } = await this.#readingBack(params.op, () =>
      stager.run(slot, xBytes, yBytes, { ...this.#baseParams(), ...params }, region.offset, region.bytes, first),
    );
    if (r.bad !== -1) return { path: r.path, stats: [], gradNorms: [], bad: r.bad, value: r.value };
    return { path: r.path, stats, gradNorms: Array.from(r.gradNorms), bad: -1, value: 0 };
  }

  /** A run queued behind this arena's earlier queued runs (one arena; the next may be queued
   *  while it trains), its stats read back by its worker. `first`: a fit's first run. skipped:
   *  nothing ran (a run before it failed, or found the one model diverged). */
  async runQueued(params: RunParams, first: boolean): Promise<{ path: RunPath; stats: View[]; skipped: boolean }> {
    if (first) this.syncDevice(); // never with a run in flight: nothing writes the host side between
    const region = this.arena.plan.region(this.last, 'stats')!;
    const { r, stats } = await this.#readingBack(params.op, () =>
      handleOf(this.arena).runQueued({ ...this.#baseParams(), ...params }, region.offset, region.bytes, first),
    );
    return { path: r.path, stats, skipped: r.skipped };
  }

  /** Where the results of this arena's queued runs are taken, in call order: libuv may report a
   *  run's end after the end of the run queued behind it (its thread paused once the turn had
   *  passed), and the loss scale and the host's stats must end as the last run left them. */
  #taken: Promise<unknown> = Promise.resolve();

  /** A queued run that brings its stats, norms and loss scale back (none where it did not run:
   *  its stats are empty): tracked, its results taken in call order, its transfer reported;
   *  `stats`: each model's, its own copy (the host side holds what was read last, as after stats()). */
  async #readingBack<R extends Readback>(op: RunParams['op'], run: () => Promise<R>): Promise<{ r: R; stats: View[] }> {
    const ran = (x: R) => x.stats.byteLength > 0;
    const before = this.#taken;
    let r!: R;
    let stats: View[] = [];
    const taken = this.#tracked(
      [this.arena],
      op,
      async () => {
        try {
          r = await run(); // queued at the call: call order is turn order
        } catch (e) {
          throw fromNative(e);
        } finally {
          await before;
        }
        if (ran(r)) stats = this.#statsOf(r.stats);
        return r.path;
      },
      () => (ran(r) ? r.lossScale : undefined),
    );
    this.#taken = taken.catch(() => undefined);
    await taken;
    const region = this.arena.plan.region(this.last, 'stats')!;
    if (ran(r)) notifyTransfer(this.arena, 'toHost', { layers: [this.last], kinds: ['stats'] }, { transfers: 1, bytes: region.bytes });
    return { r, stats };
  }

  /** Each model's stats from bytes read back (views of them), also copied to the host side. */
  #statsOf(bytes: ArrayBuffer): View[] {
    const region = this.arena.plan.region(this.last, 'stats')!;
    const V = this.dtype === 'float64' ? Float64Array : Float32Array;
    return Array.from({ length: this.models }, (_, m) => {
      const own = new V(bytes, m * region.stride, region.length) as View;
      this.arena.view(this.last, 'stats', m).set(own);
      return own;
    });
  }

  /** One run of every arena of this process; `params(rank, i)` for global rank `rank`. */
  async runAll(params: (rank: number, i: number) => RunParams): Promise<RunPath> {
    const arenas = this.target.arenas;
    for (const a of arenas) this.syncDevice(a);
    const own = arenas.map((_, i) => params(this.target.rank + i, i));
    return this.#tracked(
      arenas,
      own[0]!.op,
      this.#dispatch(own[0]!, () => this.target.run(own.map((q) => ({ ...this.#baseParams(), ...q })))),
    );
  }

  /** One step on the caller's batch d: each replica takes its shard (rank r: rows
   *  [r * batch, (r + 1) * batch), possibly none), and the loss mean is over all d.count rows.
   *  The first arena's stats region comes back to the host with it (readStats(true)). */
  async runShards(d: Snapshot, params: RunParams): Promise<RunPath> {
    const world = this.target.world;
    if (this.target.kind === 'arena') return this.runRows(d, 0, Math.min(this.batch, d.count), params, ['stats']);
    const rows = this.target.arenas.map((a, i) => {
      const first = (this.target.rank + i) * this.batch;
      return this.stageBatch(d, first, Math.max(0, Math.min(this.batch, d.count - first)), a);
    });
    const path = await this.runAll((rank, i) => ({ ...params, rows: rows[i]!, ...(world > 1 ? { lossRows: d.count, reduce: true } : {}) }));
    this.stats();
    return path;
  }

  /** Runs `run` (of `op` on `arenas`) and records what the primitives may still use afterwards:
   *  a run with a forward pass replaces the activations (so does an update, by changing the
   *  weights); training runs overwrite dw/db (a Train step leaves them applied already), update
   *  consumes them. fp16: the loss scale the run left (`lossScale`: the handle's, or what a
   *  window's run brought back) becomes the Trainer's. */
  async #tracked(
    arenas: readonly Arena[],
    op: RunParams['op'],
    run: () => Promise<RunPath>,
    lossScale?: () => ArrayLike<number> | undefined,
  ): Promise<RunPath> {
    this.#trackBefore(arenas, op);
    const path = await run();
    this.#trackAfter(arenas, op, lossScale);
    return path;
  }
  #trackBefore(arenas: readonly Arena[], op: RunParams['op']): void {
    // A run refused as DISPOSED changes nothing: checked before the state (an update() on a
    // disposed arena used to consume its gradients and forward rows, so a later call said
    // NO_FORWARD or NO_GRADIENTS instead of DISPOSED).
    for (const a of arenas) if (a.disposed) throw new ArenaError('DISPOSED', 'the arena was disposed');
    for (const a of arenas) {
      const st = stateOf(a);
      if (op !== OPS.backward && op !== OPS.backwardFromOutput) st.forwardRows = undefined;
      if (op !== OPS.forward && op !== OPS.eval) st.gradients = false;
    }
  }
  /** `lossScale`: where the run left the loss scale (by default the handle's). */
  #trackAfter(arenas: readonly Arena[], op: RunParams['op'], lossScale?: () => ArrayLike<number> | undefined): void {
    if (op === OPS.grad) for (const a of arenas) stateOf(a).gradients = true;
    if (op !== OPS.train || !this.settings.lossScale) return;
    const left = lossScale ? lossScale() : handleOf(this.arena).lossScale(); // none: it did not run
    if (left) Object.assign(this.scaler, { scale: left[0]!, good: left[1]!, skipped: this.scaler.skipped + left[2]! });
  }

  /** What every run of this Trainer passes: hyper-parameters, per-model lrs, loss, precision;
   *  one frozen object for as long as the loss scale stays (the settings never change), which a
   *  native inline run reads once (runInline's `base`). */
  #baseParams(): Readonly<Omit<RunParams, 'op'>> {
    const { scale, good } = this.scaler;
    if (this.#base?.scale !== scale || this.#base.good !== good) this.#base = { scale, good, params: deepFreeze(this.#freshBaseParams()) };
    return this.#base.params;
  }
  #base: { scale: number; good: number; params: Readonly<Omit<RunParams, 'op'>> } | undefined;

  #freshBaseParams(): Omit<RunParams, 'op'> {
    const s = this.settings;
    return {
      ...s.opt.params,
      ...(s.opt.lrs ? { lrs: [...s.opt.lrs] } : {}),
      loss: LOSSES[s.loss],
      precision: PRECISIONS[s.precision],
      ...(s.labelSmoothing ? { labelSmoothing: s.labelSmoothing } : {}),
      ...(s.dropoutSeed ? { dropoutSeed: s.dropoutSeed } : {}),
      ...lossScaleParams(s.lossScale, this.scaler.scale, this.scaler.good),
    };
  }
}
