// fit.ts: the fit loop. The data set goes up once (resident in the arena's data regions, again
// only when its contents change); each run trains a chunk of batches natively (the sample order
// is an affine permutation drawn per epoch) and brings the 32-byte stats back, and the weights
// and biases come back once at the end.
import type { View } from '../arena/arena.js';
import { abortError, ArenaError, DataError, OptionError } from '../core/errors.js';
import { checkKnownKeys, keysOf } from '../core/known-keys.js';
import { STATS } from '../layout/header.js';
import { OPS, type RunPath } from '../native/addon.js';
import type { Snapshot } from './data.js';
import type { Dataset } from './dataset.js';
import { combine, metricsOf, type Metrics } from './metrics.js';
import { checkSeed, positiveInt } from './options.js';
import { Rng, affinePermutation } from './rng.js';
import { positionOf, resumeFitPlan, setPosition, type FitPosition } from './resume.js';
import { PARAM_KINDS, type Runner } from './runner.js';

export interface Progress extends Metrics {
  epoch: number;
  epochs: number;
  /** Batches done in this epoch, and in it all. */
  batch: number;
  batches: number;
  step: number;
  samplesPerSecond: number;
  /** The learning rate of the last step (model 0's where models have their own). */
  lr: number;
  /** With clipGradNorm: each step's global gradient norm (before clipping) since the previous
   *  report; K models: step-major, model m of step s at s * K + m. */
  gradNorms?: number[];
  /** precision 'fp16': the loss scale after the last step, and the steps skipped so far (their
   *  scaled gradients overflowed) by this Trainer. */
  lossScale?: number;
  skippedSteps?: number;
}

export interface FitOptionsBase {
  /** Shuffle the sample order every epoch (seeded; default true). */
  shuffle?: boolean;
  /** A shuffled iterable stream's shuffle buffer, in rows (default: the streaming window's,
   *  floor(samples / batch) * batch): rows are drawn at random from it (src/train/
   *  shuffle-buffer.ts). Files and resident data shuffle over all rows and do not use it. */
  shuffleBuffer?: number;
  seed?: number;
  onProgress?: (p: Progress) => void;
  /** Progress reports per epoch (default 1): a native run each (runs of at most ABORT_RUN_STEPS
   *  with a signal), each bringing the 32-byte stats region back. */
  reportsPerEpoch?: number;
  /** Stops training between two native runs (each a whole number of steps, at most
   *  ABORT_RUN_STEPS when a signal is given): fit() then rejects with an ArenaError ABORTED
   *  (name 'AbortError'), the steps taken are counted and the weights and biases are back on
   *  the host, as after a fit() that ended. */
  signal?: AbortSignal;
}

/** fit()'s options: `epochs` passes, or `resume: true` to continue the fit() that stopped early
 *  on this arena (a signal, an error thrown by onProgress, or a save and Trainer.load in between)
 *  where it stopped, as if it never had: same data (checked by checksum), same order, same seed;
 *  `epochs` (default: the interrupted call's) then counts from the interrupted call's start, and
 *  seed, shuffle and reportsPerEpoch, if given, must be its own. */
export type FitOptions = FitOptionsBase & ({ epochs: number; resume?: false } | { epochs?: number; resume: true });

/** With a signal, a native run covers at most this many steps, so that an abort waits for at
 *  most this many; the reports and their figures do not change. */
export const ABORT_RUN_STEPS = 32;

const FIT_KEYS = keysOf<FitOptionsBase & { epochs?: number; resume?: boolean }>()([
  'epochs',
  'shuffle',
  'shuffleBuffer',
  'seed',
  'onProgress',
  'reportsPerEpoch',
  'signal',
  'resume',
]);

export interface FitResult extends Metrics {
  /** The code that ran the steps: 'cpu', 'fused' (one CUDA launch per run) or the per-layer
   *  CUDA path with cuBLAS or nn-arena's tiled products. */
  path: RunPath;
  epochs: number;
  steps: number;
  seconds: number;
  samplesPerSecond: number;
}

/** fit()'s options as checked. */
export interface FitPlan {
  epochs: number;
  shuffle: boolean;
  shuffleBuffer?: number;
  seed: number;
  onProgress: ((p: Progress) => void) | undefined;
  reports: number;
  signal: AbortSignal | undefined;
  /** resume: true: where the interrupted fit stopped. */
  resume: FitPosition | undefined;
}

export function fitPlan(options: unknown, r: Runner): FitPlan {
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { epochs, ... }');
  checkKnownKeys(options, FIT_KEYS, 'fit');
  const { epochs, shuffle, shuffleBuffer, seed, onProgress, reportsPerEpoch, signal, resume } = options as FitOptionsBase & {
    epochs?: number;
    resume?: boolean;
  };
  if (shuffleBuffer !== undefined) positiveInt('shuffleBuffer', shuffleBuffer);
  if (resume !== undefined && typeof resume !== 'boolean') throw new OptionError('BAD_OPTION', 'resume', resume, 'must be a boolean');
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new OptionError('BAD_OPTION', 'signal', signal, 'must be an AbortSignal');
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new OptionError('BAD_OPTION', 'onProgress', onProgress, 'must be a function');
  if (resume) {
    const limits = { models: r.models, samples: r.samples, globalBatch: r.globalBatch };
    return { ...resumeFitPlan(positionOf(r.arena), { epochs, shuffle, seed, reportsPerEpoch }, limits), onProgress, signal };
  }
  const o: FitPlan = {
    epochs: positiveInt('epochs', epochs),
    shuffle: shuffle === undefined ? true : (shuffle as boolean),
    shuffleBuffer,
    seed: seed === undefined ? 0 : checkSeed(seed),
    onProgress,
    reports: reportsPerEpoch === undefined ? 1 : positiveInt('reportsPerEpoch', reportsPerEpoch),
    signal,
    resume: undefined,
  };
  if (typeof o.shuffle !== 'boolean') throw new OptionError('BAD_OPTION', 'shuffle', shuffle, 'must be a boolean');
  return o;
}

/** The data set fit() trains on, read at the call (Runner.residentData): it must fit the data regions. */
export function fitData(r: Runner, data: unknown): FitData {
  const { d, dataset } = r.residentData(data, 'data', (count, n) => {
    throw new DataError(
      'DATA_TOO_LARGE',
      'data.x.length',
      n,
      `holds ${count} samples; the arena's data regions hold ${r.samples} (plan with samples >= ${count})`,
    );
  });
  return { d, dataset };
}

/** What fitLoop trains on: the rows read (or, for a Dataset the arena holds, its resident rows). */
export interface FitData {
  d: Snapshot;
  dataset?: { handle: Dataset; version: number };
}

function diverges(stats: View, runBase: number, epoch: number, hint: string): void {
  if (stats[STATS.badStep]! >= 0) {
    const badStep = runBase + stats[STATS.badStep]!;
    throw new ArenaError('DIVERGED', `training diverged: the loss or the weights became non-finite at step ${badStep} (epoch ${epoch}); ${hint}`);
  }
}

/** One native run of a fit: which batches of which epoch, and where the fit stands after it. */
interface FitRun {
  epoch: number;
  /** The epoch's first batch of the run, its batch count, and the optimizer steps before it. */
  at: number;
  m: number;
  base: number;
  /** The epoch's order, and the generator's state once it was drawn (a resume's position). */
  perm: { a: number; c: number };
  rng: string;
  /** The first run this call makes of the epoch. */
  epochFirst: boolean;
  /** The run ends a report. */
  reportEnd: boolean;
}

/** Where a fit starts: a resumed one goes on from the recorded batch (possibly inside a report's
 *  batches: the report still comes where it would have). */
interface FitStart {
  epoch: number;
  at: number;
}

/** The runs of a fit in order: one per report, or runs of at most ABORT_RUN_STEPS with a signal
 *  (the stats accumulate over the runs of an epoch either way). Each epoch's order is drawn when
 *  its first run is asked for. */
function* fitRuns(o: FitPlan, start: FitStart, count: number, batches: number, steps: number, rng: Rng): Generator<FitRun> {
  const chunk = Math.ceil(batches / Math.min(o.reports, batches));
  const p = o.resume;
  let base = steps;
  for (let epoch = start.epoch; epoch <= o.epochs; epoch++) {
    const resumed = p !== undefined && epoch === start.epoch;
    const perm = resumed ? p.perm : o.shuffle ? affinePermutation(rng, count) : { a: 1, c: 0 };
    const from = resumed ? start.at : 0;
    let epochFirst = true;
    for (let first = Math.floor(from / chunk) * chunk; first < batches; first += chunk) {
      const n = Math.min(chunk, batches - first);
      const per = o.signal ? Math.min(n, ABORT_RUN_STEPS) : n;
      for (let at = Math.max(first, from); at < first + n; at += per) {
        const m = Math.min(per, first + n - at);
        yield { epoch, at, m, base, perm, rng: rng.state, epochFirst, reportEnd: at + m === first + n };
        epochFirst = false;
        base += m;
      }
    }
  }
}

/** The loop itself; runs in the arena's queue. An arena's runs come back with their stats (read
 *  by the run's worker); where nothing looks at the arena between runs (no onProgress, no
 *  signal), the next run is queued while one trains, so the device does not wait for the JS
 *  thread between them. */
export async function fitLoop(r: Runner, { d, dataset }: FitData, o: FitPlan): Promise<FitResult> {
  if (o.signal?.aborted) throw abortError('fit', o.signal); // aborted while queued: nothing ran
  const { arenas, world } = r.target;
  for (const a of arenas) r.makeResident(d, a, dataset);
  const batch = r.globalBatch;
  const batches = Math.ceil(d.count / batch);
  const { xCrc = 0, yCrc = 0 } = r.state.resident!; // both uploaded by makeResident
  const p = o.resume;
  if (p && (p.count !== d.count || p.xCrc !== xCrc || p.yCrc !== yCrc)) {
    throw new DataError(
      'BAD_DATA',
      'data',
      `${d.count} samples`,
      `is not the data set of the interrupted fit (${p.count} samples; contents compared by checksum)`,
    );
  }
  const start: FitStart = p ? { epoch: p.epoch, at: p.next } : { epoch: 1, at: 0 };
  const todo = (o.epochs - start.epoch + 1) * batches - start.at;
  r.checkSteps(r.state.steps, todo);
  const rng = p ? Rng.fromState(p.rng) : new Rng(o.seed);
  const t0 = performance.now();
  let last: Metrics = { loss: NaN, accuracy: NaN };
  const diverged: boolean[] = p ? [...p.diverged] : Array<boolean>(r.models).fill(false);
  let path: RunPath = 'cpu';
  let epochStart = t0;
  // Where to go on from if this fit stops after `next` batches of f's epoch.
  const mark = (f: FitRun, next: number) =>
    setPosition(r.arena, {
      seed: o.seed,
      shuffle: o.shuffle,
      reports: o.reports,
      epochs: o.epochs,
      epoch: f.epoch,
      next,
      rng: f.rng,
      perm: f.perm,
      count: d.count,
      xCrc,
      yCrc,
      diverged: [...diverged],
    });
  const one = r.target.kind === 'arena'; // a group's runs go through runAll, its stats read after
  const ahead = one && !o.onProgress && !o.signal;
  const launch = async (f: FitRun, first: boolean): Promise<{ path: RunPath; stats?: View[] }> => {
    const params = (rank: number) => ({
      op: OPS.train,
      resident: true,
      samples: d.count,
      firstBatch: f.at,
      numBatches: f.m,
      permA: f.perm.a,
      permC: f.perm.c,
      stepBase: f.base,
      resetStats: f.at === 0,
      ...(world > 1 ? { globalBatch: batch, shardOffset: rank * r.batch, reduce: true } : {}),
    });
    if (one) return r.runQueued(params(0), first); // skipped only behind a run that failed or diverged
    return { path: await r.runAll((rank) => params(rank)) };
  };
  const settle = (f: FitRun, run: { path: RunPath; stats?: View[] }) => {
    path = run.path;
    r.addSteps(f.m);
    mark(f, f.at + f.m);
    // One model: a divergence ends fit() at the run that found it (the stats' bad step counts
    // from that run's first step). K models: a model that diverged stopped (natively) and stays
    // marked at its report; the others go on.
    if (r.models === 1 || f.reportEnd) {
      const stats = run.stats ?? r.stats();
      if (r.models === 1) diverges(stats[0]!, f.base, f.epoch, r.divergedHint);
      if (!f.reportEnd) return;
      stats.forEach((st, m) => {
        if (st[STATS.badStep]! >= 0) diverged[m] = true;
      });
      last = combine(stats.map(metricsOf), [...diverged]);
      mark(f, f.at + f.m);
      if (o.onProgress) {
        const done = f.at + f.m;
        o.onProgress({
          ...last,
          epoch: f.epoch,
          epochs: o.epochs,
          batch: done,
          batches,
          step: r.state.steps,
          samplesPerSecond: Math.min(done * batch, d.count) / ((performance.now() - epochStart) / 1000),
          lr: r.learningRate(r.state.steps - 1),
          ...r.progressExtras(),
        });
      }
    }
  };
  let queued: { f: FitRun; run: Promise<{ path: RunPath; stats?: View[] }> } | undefined;
  let first = true;
  try {
    for (const f of fitRuns(o, start, d.count, batches, r.state.steps, rng)) {
      if (o.signal?.aborted) {
        r.arena.toHost({ kinds: PARAM_KINDS });
        throw abortError('fit', o.signal);
      }
      if (f.epochFirst) epochStart = performance.now();
      const run = launch(f, first);
      run.catch(() => undefined); // awaited below, maybe after the run before it
      first = false;
      if (ahead) {
        const before = queued;
        queued = { f, run };
        if (before) settle(before.f, await before.run);
      } else {
        settle(f, await run);
      }
    }
    if (queued) settle(queued.f, await queued.run);
    queued = undefined;
  } catch (e) {
    await queued?.run.catch(() => undefined); // a run queued behind the one that failed or diverged: skipped natively
    throw e;
  }
  setPosition(r.arena, undefined); // finished
  r.arena.toHost({ kinds: PARAM_KINDS });
  const seconds = (performance.now() - t0) / 1000;
  const samples = (o.epochs - start.epoch + 1) * d.count - Math.min(start.at * batch, d.count);
  return { ...last, path, epochs: o.epochs, steps: todo, seconds, samplesPerSecond: samples / seconds };
}
