// stream-fit.ts: fit() over a data source larger than the plan's data regions (the sources:
// src/train/stream.ts). The source goes through the data regions (xdata / ydata) a window of
// rows at a time, each window trained by one resident native run, exactly as fit() trains a
// resident data set.
//
// Overlap: three stages run at once, each on its own thread, so that a window costs the
// longest of them rather than their sum:
//   fill     window k + 2 is gathered from the file or the iterable's shuffle buffer by the
//            gather pool (csrc/addon/gather_pool.h, threads of its own; an unshuffled iterable's
//            large batches too, copy_bytes.cc) into one of two host slots (pinned on CUDA:
//            window_stager.h);
//   upload   window k + 1 is copied to a device staging buffer by a worker thread, on a CUDA
//            stream of its own;
//   run      window k trains natively: its worker first copies the staged window into the data
//            regions, checking it for non-finite values on the way (device to device:
//            microseconds), and reads the stats back at its end.
// The run of window k + 1 is queued while window k trains (window_stager.h), so the device goes
// from one window to the next without waiting on this thread. A window holds its rows in
// training order (the source shuffles: src/train/stream.ts), so each run keeps them in place.
// The seeded draws (a file's permutation per epoch, an iterable's shuffle buffer draws) happen
// as fills run, one fill after another, so the order is that of filling one window at a time.
import { handleOf, onDispose, type Arena, type View } from '../arena/arena.js';
import { notifyTransfer } from '../arena/transfer-events.js';
import { abortError, ArenaError, DataError, fromNative } from '../core/errors.js';
import { STATS } from '../layout/header.js';
import { call, native, OPS, type NativeWindowStager, type RunPath } from '../native/addon.js';
import type { FitPlan, FitResult } from './fit.js';
import { combine, metricsOf, type Metrics } from './metrics.js';
import { Rng } from './rng.js';
import { PARAM_KINDS, type Runner } from './runner.js';
import type { DataStream } from './stream.js';
import { StreamStop } from './stream-stop.js';
import type { Filled, WindowBuffers } from './window.js';

/** A window filled into a slot: its rows and where it falls in the epochs. */
interface Window extends Filled {
  slot: number;
  epoch: number;
  index: number;
}

/** The streaming fit. Runs in the arena's queue. */
export async function fitStream(r: Runner, stream: DataStream, o: FitPlan): Promise<FitResult> {
  const { arena, batch } = r;
  if (r.target.world > 1 || r.target.arenas.length > 1 || r.models !== 1) {
    throw new ArenaError(
      'NOT_SUPPORTED',
      `fit() from a stream takes one arena of one model${r.models !== 1 ? `; this one holds models: ${r.models}` : ', not a data-parallel group'}`,
    );
  }
  if (arena.deviceBudget !== undefined)
    throw new ArenaError('NOT_SUPPORTED', 'fit() from a stream needs an arena without a device budget (it refills the data regions between runs)');
  const window = Math.floor(r.samples / batch) * batch;
  if (window === 0)
    throw new DataError(
      'DATA_TOO_LARGE',
      'data',
      'a stream',
      `is streamed through the data regions a window of whole batches at a time: plan with samples >= the batch of ${batch} (this plan has ${r.samples})`,
    );
  const { inputs, outputs, dtype } = r;
  const bpe = dtype === 'float64' ? 8 : 4;
  const xCap = window * inputs * bpe,
    yCap = window * outputs * bpe;
  const xr = arena.plan.region(0, 'xdata')!,
    yr = arena.plan.region(r.last, 'ydata')!;
  // The buffers stay with the arena for its next streaming fit (pinning and first touches of
  // three windows cost as much as many steps); they go with the arena's dispose().
  let kept = buffersOf.get(arena);
  if (!kept) {
    const stager = call(() => new (native().WindowStager)(handleOf(arena), xr.offset, xCap, yr.offset, yCap, dtype === 'float64', 2));
    const V = dtype === 'float64' ? Float64Array : Float32Array;
    const slots: WindowBuffers[] = [0, 1].map((i) => {
      const ab = stager.slot(i);
      return { x: new V(ab, 0, window * inputs) as View, y: new V(ab, xCap, window * outputs) as View };
    });
    const k = (kept = { stager, slots, inflight: new Set<Promise<unknown>>(), stops: new Set<StreamStop>() });
    buffersOf.set(arena, k);
    // A fit waiting on its source stops waiting (DISPOSED). Fills in flight write the slots from
    // native threads: then the slots go once they, and any started while they ran, have settled.
    onDispose(arena, () => {
      for (const s of k.stops) s.dispose();
      buffersOf.delete(arena);
      const drain = async () => {
        while (k.inflight.size > 0) await Promise.allSettled([...k.inflight]);
      };
      void drain().then(() => stager.dispose());
    });
  }
  const pending: Array<Promise<unknown>> = []; // settled before the files close and the next fit
  const { inflight } = kept;
  const track = <T>(p: Promise<T>): Promise<T> => {
    pending.push(p);
    inflight.add(p);
    const off = () => {
      inflight.delete(p);
    };
    p.then(off, off); // also: no unhandled rejection
    return p;
  };
  // Waits on the user's source end with the signal, dispose() or the fit itself (a run's error
  // while a fill ahead of it waits): then every fill settles, and the source is closed.
  const stop = new StreamStop(o.signal);
  const { stops } = kept;
  stops.add(stop);
  try {
    const source = await stream.open({ inputs, outputs, dtype }, stop);
    try {
      return await train(r, o, window, stream, source, kept.slots, kept.stager, track);
    } finally {
      stop.end();
      await Promise.allSettled(pending);
      await source.close();
    }
  } finally {
    stop.end();
    stops.delete(stop);
  }
}

const disposedError = () => new ArenaError('DISPOSED', 'the arena was disposed');

/** A window's run that trained nothing (non-finite data) or diverged: the fit ends with it. */
const failed = (res: { bad: number; stats: ArrayLike<number>[] }) => res.bad >= 0 || (res.stats[0]?.[STATS.badStep] ?? -1) >= 0;

const buffersOf = new WeakMap<Arena, { stager: NativeWindowStager; slots: WindowBuffers[]; inflight: Set<Promise<unknown>>; stops: Set<StreamStop> }>();

type Source = Awaited<ReturnType<DataStream['open']>>;

/** Nothing overlaps a fit's first window: its fill and upload come before the first step. So
 *  the first windows are smaller, each half the next (W/8, W/4, W/2, then W: each fills while
 *  the one before it trains), while a window so cut still holds whole batches and at least
 *  RAMP_MIN_BYTES of x (below that a fill costs little more than its fixed cost). The rows and
 *  their order are the same for any window sizes (a source fills position after position), so
 *  are the steps and the weights. */
function rampRows(window: number, batch: number, rowBytes: number): number[] {
  const sizes: number[] = [];
  for (let k = RAMP_STEPS; k >= 1; k--) {
    const rows = Math.floor(window / 2 ** k / batch) * batch;
    if (rows >= batch && rows * rowBytes >= RAMP_MIN_BYTES) sizes.push(rows);
  }
  return sizes;
}
const RAMP_STEPS = 3,
  RAMP_MIN_BYTES = 1 << 20;

async function train(
  r: Runner,
  o: FitPlan,
  window: number,
  stream: DataStream,
  source: Source,
  slots: WindowBuffers[],
  stager: NativeWindowStager,
  track: <T>(p: Promise<T>) => Promise<T>,
): Promise<FitResult> {
  const { arena, batch, inputs, outputs } = r;
  const bpe = r.dtype === 'float64' ? 8 : 4;
  const rng = new Rng(o.seed);
  const batches = stream.rows === undefined ? undefined : Math.ceil(stream.rows / batch);
  let epoch = 1,
    index = 0,
    fills = 0;
  const ramp = rampRows(window, batch, inputs * bpe);
  const epochOf = () => source.epoch(o.shuffle ? rng : undefined, window, o.shuffleBuffer ?? window);
  let fill = epochOf();
  const t0 = performance.now();
  // NN_ARENA_STREAM_TRACE=1 (a diagnostic, docs/benchmarks.md): each window's stage times on stderr.
  const trace =
    process.env.NN_ARENA_STREAM_TRACE === '1' ? (what: string) => process.stderr.write(`stream ${(performance.now() - t0).toFixed(3)} ${what}\n`) : undefined;
  // The next window of the source into `slot` (undefined after the last epoch's last).
  const fillNext = async (slot: number): Promise<Window | undefined> => {
    if (arena.disposed) throw disposedError(); // its slots are going
    trace?.(`fill ${index} begin`);
    const rows = ramp[fills++] ?? window;
    let f = await fill(rows, slots[slot]!);
    while (f.rows === 0) {
      if (epoch === o.epochs) return undefined;
      epoch++;
      index = 0;
      fill = epochOf();
      f = await fill(rows, slots[slot]!);
    }
    trace?.(`fill ${index} end`);
    return { rows: f.rows, where: f.where, slot, epoch, index: index++ };
  };
  const upload = async (w: Window | undefined): Promise<Window | undefined> => {
    if (!w) return undefined;
    trace?.(`upload ${w.index} begin`);
    const xBytes = w.rows * inputs * bpe,
      yBytes = w.rows * outputs * bpe;
    try {
      await stager.upload(w.slot, xBytes, yBytes);
    } catch (e) {
      throw fromNative(e);
    }
    trace?.(`upload ${w.index} end`);
    notifyTransfer(arena, 'toDevice', { kinds: ['xdata', 'ydata'] }, { transfers: (xBytes > 0 ? 1 : 0) + (yBytes > 0 ? 1 : 0), bytes: xBytes + yBytes });
    return w;
  };

  let last: Metrics = { loss: NaN, accuracy: NaN };
  let path: RunPath = 'cpu',
    steps = 0,
    samples = 0,
    done = 0,
    seen = 0,
    epochStart = t0,
    queuedSteps = 0,
    lastEnd = 0;
  // Window k lives in slot k % 2: its host slot and its device staging buffer. Fills run one
  // after another (their seeded draws), and so do uploads.
  // A window goes up once it is filled and the window before it is up.
  const uploadAfter = (before: Promise<unknown>, filling: Promise<Window | undefined>) => track(Promise.all([before, filling]).then(([, f]) => upload(f)));
  const first = track(fillNext(0));
  let next = track(first.then((w) => (w ? fillNext(1) : undefined))); // window k + 1, filling
  const filled = track(first.then(upload)); // window 0, staged
  let staged = uploadAfter(filled, next); // window k + 1, going up
  // A window's run takes it from its staging buffer into the data regions, trains, and brings
  // the stats, clipping's norms and fp16's loss scale back (Runner.runWindow): nothing waits on
  // this thread between two runs. The next window's run is queued while this one trains, so the
  // device goes from one window to the next at once.
  interface Launched {
    w: Window;
    n: number;
    stepBase: number;
    at: number;
    run: ReturnType<Runner['runWindow']>;
    after: Promise<Window | undefined>;
  }
  let launches = 0;
  const launch = (w: Window): Launched => {
    if (arena.disposed) throw disposedError();
    trace?.(`window ${w.index} ready`);
    // The data regions then hold no resident data set of fit / evaluate (dropped first, so a
    // failed run leaves no stale claim).
    r.state.resident = undefined;
    const n = Math.ceil(w.rows / batch);
    const stepBase = r.state.steps + queuedSteps;
    r.checkSteps(stepBase, n);
    queuedSteps += n;
    trace?.(`run ${w.index} queued`);
    const run = track(
      r.runWindow(
        stager,
        w.slot,
        w.rows * inputs * bpe,
        w.rows * outputs * bpe,
        { op: OPS.train, resident: true, samples: w.rows, firstBatch: 0, numBatches: n, permA: 1, permC: 0, stepBase, resetStats: w.index === 0 },
        launches++ === 0,
      ),
    );
    // Window k's host slot is free (uploaded): window k + 2 fills it, then goes up after window
    // k + 1, and after this run has taken the staging buffer's window.
    next = track(next.then((f) => (f ? fillNext(w.slot) : undefined)));
    const after = track(Promise.all([staged, next, run.catch(() => undefined)]).then(([, f]) => upload(f)));
    return { w, n, stepBase, at: performance.now(), run, after };
  };
  // The next staged window, or the error its fill or upload met (thrown once the run before it is done).
  const nextStaged = async (): Promise<{ w?: Window; error?: unknown }> => {
    try {
      return { w: await staged };
    } catch (e) {
      // a fill into buffers that dispose() took away: say so
      return { error: arena.disposed ? disposedError() : e };
    }
  };
  const aborted = () => {
    if (!o.signal?.aborted) return;
    arena.toHost({ kinds: PARAM_KINDS }); // between windows: the weights are those of the last whole window
    throw abortError('fit', o.signal);
  };
  // A fill that stopped waiting on its source: the signal's abort (after the last whole window,
  // as above) or dispose(), whatever the wait rejected with.
  const stopped = (e: unknown): never => {
    if (arena.disposed) throw disposedError();
    aborted();
    throw e;
  };
  aborted();
  const w0 = await filled.catch(stopped);
  let cur = w0 ? launch(w0) : undefined;
  while (cur) {
    // The next window's run, queued behind this one (unless aborted).
    let queued: Launched | undefined, pending: { w?: Window; error?: unknown } | undefined;
    if (!o.signal?.aborted) {
      // A run that failed needs no window after it: its error is not held up by a source slow to
      // give the next one (then pending holds neither).
      const upcoming = nextStaged();
      pending = await Promise.race([
        upcoming,
        cur.run.then(
          (res) => (failed(res) ? {} : upcoming),
          () => ({}),
        ),
      ]);
      staged = cur.after;
      if (pending.w) queued = launch(pending.w);
    }
    const { w, n, stepBase } = cur;
    const res = await cur.run;
    // A queued run began when the one before it ended (or when it was queued, if later).
    const began = Math.max(cur.at, lastEnd);
    lastEnd = performance.now();
    trace?.(`run ${w.index} end`);
    // Before an error: the run queued behind this one ends first (its steps count if it trained).
    const settle = async () => {
      const q = queued && (await queued.run.catch(() => undefined));
      if (q?.bad === -1) r.addSteps(queued!.n);
    };
    if (res.bad >= 0) {
      // checked on its way into the data regions: nothing of it trained, nor after it
      await settle();
      const kind = res.bad < w.rows * inputs ? 'x' : 'y',
        i = kind === 'x' ? res.bad : res.bad - w.rows * inputs;
      throw new DataError('BAD_DATA', w.where(kind, i), res.value, `is not a finite ${r.dtype} number`);
    }
    path = res.path;
    queuedSteps -= n;
    r.addSteps(n);
    if (w.index === 0) {
      done = 0;
      seen = 0;
      epochStart = began;
    }
    steps += n;
    done += n;
    seen += w.rows;
    samples += w.rows;
    const stats = res.stats;
    if (stats[0]![STATS.badStep]! >= 0) {
      await settle();
      throw new ArenaError(
        'DIVERGED',
        `training diverged: the loss became non-finite at step ${stepBase + stats[0]![STATS.badStep]!} (epoch ${w.epoch}); ${r.divergedHint}`,
      );
    }
    last = combine(stats.map(metricsOf), [false]);
    o.onProgress?.({
      ...last,
      epoch: w.epoch,
      epochs: o.epochs,
      batch: done,
      batches: batches ?? done,
      step: r.state.steps,
      samplesPerSecond: seen / ((performance.now() - epochStart) / 1000),
      lr: r.learningRate(r.state.steps - 1),
      ...r.progressExtras(res.gradNorms),
    });
    trace?.(`progress ${w.index} end`);
    if (queued) {
      cur = queued;
      continue;
    }
    if (pending === undefined) aborted(); // the signal came before the next run was queued: throws
    if (pending?.error) stopped(pending.error);
    cur = undefined; // nothing was left to queue: the last window has trained
  }
  arena.toHost({ kinds: PARAM_KINDS });
  const seconds = (performance.now() - t0) / 1000;
  return { ...last, path, epochs: o.epochs, steps, seconds, samplesPerSecond: samples / seconds };
}
