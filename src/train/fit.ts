// fit.ts: the fit loop. The data set goes up once (resident in the arena's data regions, again
// only when its contents change); each run trains a chunk of batches natively (the sample order
// is an affine permutation drawn per epoch), reads the 32-byte stats per report, and the
// weights and biases come back once at the end.
import type { View } from '../arena.js';
import { abortError, ArenaError, DataError, OptionError } from '../errors.js';
import { checkKnownKeys, keysOf } from '../known-keys.js';
import { STATS } from '../layout/header.js';
import { OPS, type RunPath } from '../native.js';
import type { Snapshot } from './data.js';
import { combine, metricsOf, type Metrics } from './metrics.js';
import { checkSeed, positiveInt } from './options.js';
import { Rng, affinePermutation } from './rng.js';
import { PARAM_KINDS, type Runner } from './runner.js';

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
  /** Stops training between two native runs (each a whole number of steps, at most
   *  ABORT_RUN_STEPS when a signal is given): fit() then rejects with an ArenaError ABORTED
   *  (name 'AbortError'), the steps taken are counted and the weights and biases are back on
   *  the host, as after a fit() that ended. */
  signal?: AbortSignal;
}

/** With a signal, a native run covers at most this many steps, so that an abort waits for at
 *  most this many; the reports and their figures do not change. */
export const ABORT_RUN_STEPS = 32;

const FIT_KEYS = keysOf<FitOptions>()(['epochs', 'shuffle', 'seed', 'onProgress', 'reportsPerEpoch', 'signal']);

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
  epochs: number; shuffle: boolean; seed: number; onProgress: ((p: Progress) => void) | undefined; reports: number; signal: AbortSignal | undefined;
}

export function fitPlan(options: unknown): FitPlan {
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { epochs, ... }');
  checkKnownKeys(options, FIT_KEYS, 'fit');
  const { epochs, shuffle, seed, onProgress, reportsPerEpoch, signal } = options as FitOptions;
  const o: FitPlan = {
    epochs: positiveInt('epochs', epochs),
    shuffle: shuffle === undefined ? true : shuffle as boolean,
    seed: seed === undefined ? 0 : checkSeed(seed),
    onProgress,
    reports: reportsPerEpoch === undefined ? 1 : positiveInt('reportsPerEpoch', reportsPerEpoch),
    signal,
  };
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new OptionError('BAD_OPTION', 'signal', signal, 'must be an AbortSignal');
  if (typeof o.shuffle !== 'boolean') throw new OptionError('BAD_OPTION', 'shuffle', shuffle, 'must be a boolean');
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new OptionError('BAD_OPTION', 'onProgress', onProgress, 'must be a function');
  return o;
}

/** The data set fit() trains on: it must fit the data regions. */
export function fitData(r: Runner, data: unknown): Snapshot {
  const d = r.snapshot(data, 'data');
  if (d.count > r.samples) {
    throw new DataError('DATA_TOO_LARGE', 'data.x.length', d.x.length, `holds ${d.count} samples; the arena's data regions hold ${r.samples} (plan with samples >= ${d.count})`);
  }
  return d;
}

function diverges(stats: View, runBase: number, epoch: number): void {
  if (stats[STATS.badStep]! >= 0) {
    const badStep = runBase + stats[STATS.badStep]!;
    throw new ArenaError('DIVERGED', `training diverged: the loss or the weights became non-finite at step ${badStep} (epoch ${epoch}); lower the learning rate`);
  }
}

/** The loop itself; runs in the arena's queue. */
export async function fitLoop(r: Runner, d: Snapshot, o: FitPlan): Promise<FitResult> {
  if (o.signal?.aborted) throw abortError('fit', o.signal);  // aborted while queued: nothing ran
  const { arenas, world } = r.target;
  for (const a of arenas) r.makeResident(d, a);
  const batch = r.globalBatch;
  const batches = Math.ceil(d.count / batch);
  const chunk = Math.ceil(batches / Math.min(o.reports, batches));
  r.checkSteps(r.state.steps, o.epochs * batches);
  const rng = new Rng(o.seed);
  const t0 = performance.now();
  let last: Metrics = { loss: NaN, accuracy: NaN };
  const diverged: boolean[] = Array<boolean>(r.models).fill(false);
  let path: RunPath = 'cpu';
  for (let epoch = 1; epoch <= o.epochs; epoch++) {
    const perm = o.shuffle ? affinePermutation(rng, d.count) : { a: 1, c: 0 };
    const epochStart = performance.now();
    for (let first = 0; first < batches; first += chunk) {
      const n = Math.min(chunk, batches - first);
      // One run per report, or runs of at most ABORT_RUN_STEPS with a signal (checked before
      // each); the stats accumulate over the runs of an epoch either way.
      const per = o.signal ? Math.min(n, ABORT_RUN_STEPS) : n;
      let lastBase = r.state.steps;
      for (let at = first; at < first + n; at += per) {
        if (o.signal?.aborted) {
          r.arena.toHost({ kinds: PARAM_KINDS });
          throw abortError('fit', o.signal);
        }
        const runBase = r.state.steps, m = Math.min(per, first + n - at);
        path = await r.runAll((rank) => ({
          op: OPS.train, resident: true, samples: d.count, firstBatch: at, numBatches: m,
          permA: perm.a, permC: perm.c, stepBase: runBase, resetStats: at === 0,
          ...(world > 1 ? { globalBatch: batch, shardOffset: rank * r.batch, reduce: true } : {}),
        }));
        r.addSteps(m);
        lastBase = runBase;
        // One model: a divergence ends fit() at the run that found it (the stats' bad step
        // counts from that run's first step); the last run of a report is checked below.
        if (r.models === 1 && at + m < first + n) diverges(r.stats()[0]!, runBase, epoch);
      }
      const stats = r.stats();
      if (r.models === 1) diverges(stats[0]!, lastBase, epoch);
      // K models: a model that diverged stopped (natively) and stays marked; the others go on.
      stats.forEach((st, m) => { if (st[STATS.badStep]! >= 0) diverged[m] = true; });
      last = combine(stats.map(metricsOf), [...diverged]);
      const done = first + n;
      o.onProgress?.({
        ...last, epoch, epochs: o.epochs, batch: done, batches, step: r.state.steps,
        samplesPerSecond: Math.min(done * batch, d.count) / ((performance.now() - epochStart) / 1000),
      });
    }
  }
  r.arena.toHost({ kinds: PARAM_KINDS });
  const seconds = (performance.now() - t0) / 1000;
  return { ...last, path, epochs: o.epochs, steps: o.epochs * batches, seconds, samplesPerSecond: (o.epochs * d.count) / seconds };
}
