// stream.ts: fit() over a data source larger than the plan's data regions: an async iterable of
// batches, or .npy files read in chunks (streamNpy). The source goes through the arena's
// resident data regions (xdata / ydata) a window of rows at a time, each window trained by one
// resident native run, exactly as fit() trains a resident data set.
//
// Overlap: while window k trains (off the JS thread), window k + 1 is read from the file or
// pulled from the iterable, checked and converted into a staging buffer of the stream's own (not
// the arena's memory: an arena disposed meanwhile must not be written). Between runs it is
// copied into the host side of the data regions and uploaded (a transfer while a run holds the
// arena is BUSY): what is left between runs is a memcpy and one host -> device copy of its rows.
//
// Order: a window holds W = floor(samples / batch) * batch rows, so every batch but the
// source's last is full, as in resident training. With shuffle, a .npy source is cut into
// windows of W consecutive rows, the windows are visited in a seeded random order each epoch,
// and the rows within a window in the seeded random order of a resident epoch (the native
// affine permutation): every sample once per epoch, but two samples of different windows never
// share a batch. An async iterable is consumed in its own order, W rows to a window, shuffled
// within the window only. Without shuffle, rows go in source order: the same batches, steps
// and weights as resident training on the whole source (test/stream.test.ts).
import { open, type FileHandle } from 'node:fs/promises';
import { transferRanges, type View } from '../arena.js';
import { abortError, ArenaError, DataError, OptionError } from '../errors.js';
import type { Dtype } from '../layout/header.js';
import { STATS } from '../layout/header.js';
import { OPS, type RunPath } from '../native.js';
import { parseNpyHeader, type NpyHeader } from '../formats/npy.js';
import { checkPath } from '../formats/file.js';
import { snapshotData, type Data } from './data.js';
import type { FitPlan, FitResult } from './fit.js';
import { combine, metricsOf, type Metrics } from './metrics.js';
import { PARAM_KINDS, type Runner } from './runner.js';
import { affinePermutation, Rng } from './rng.js';

/** Writes up to `max` rows into the staging buffers (StreamTarget) at row 0; the rows written
 *  (0: the epoch's source is exhausted). */
type Fill = (max: number) => Promise<number>;

/** A data source fit() streams: opened once per fit, one reader per epoch. */
export interface DataStream {
  /** Rows in all, when known before reading (a .npy source); undefined for an iterable. */
  readonly rows: number | undefined;
  /** @internal */
  open(target: StreamTarget): Promise<{ epoch(rng: Rng | undefined, window: number): Fill; close(): Promise<void> }>;
}

/** Where a source writes: staging buffers of a window's rows, and the network's widths. */
export interface StreamTarget { x: View; y: View; inputs: number; outputs: number; dtype: Dtype }

const STREAM = Symbol('nn-arena.stream');
type Iterableish = AsyncIterable<Data> | Iterable<Data>;

/** Whether fit() streams `data`: a DataStream, an (async) iterable (an array of batches too; a
 *  data set { x, labels } is neither) or a function returning one. */
export function isStream(data: unknown): boolean {
  if (typeof data === 'function') return true;
  if (data === null || typeof data !== 'object') return false;
  return STREAM in data || Symbol.asyncIterator in data || (Symbol.iterator in data && !ArrayBuffer.isView(data));
}

/** fit()'s stream argument as a DataStream. */
export function toStream(data: unknown): DataStream {
  if (data !== null && typeof data === 'object' && STREAM in data) return data as unknown as DataStream;
  return streamBatches(data as Iterableish | (() => Iterableish));
}

/** An iterable (async or not) of batches `{ x, labels }` / `{ x, y }` of any number of rows,
 *  or a function returning one, called once per epoch (an iterable that cannot restart, such
 *  as an async generator, trains one epoch: the next yields nothing, a DataError). */
export function streamBatches(source: Iterableish | (() => Iterableish)): DataStream {
  if (typeof source !== 'function' && (source === null || typeof source !== 'object' || !(Symbol.asyncIterator in source || Symbol.iterator in source))) {
    throw new DataError('BAD_DATA', 'data', source, 'must be an (async) iterable of batches or a function returning one');
  }
  const stream = {
    [STREAM]: true,
    rows: undefined,
    async open(t: StreamTarget) {
      let epochs = 0;
      return {
        epoch(rng: Rng | undefined, window: number): Fill {
          void rng;
          epochs++;
          const it = typeof source === 'function' ? source() : source;
          if (it === null || typeof it !== 'object' || !(Symbol.asyncIterator in it || Symbol.iterator in it)) throw new DataError('BAD_DATA', 'data()', it, 'must return an (async) iterable of batches');
          const iter = Symbol.asyncIterator in it ? (it as AsyncIterable<Data>)[Symbol.asyncIterator]() : (it as Iterable<Data>)[Symbol.iterator]();
          let rest: { x: View; y: View; count: number; at: number } | undefined;
          let index = 0, total = 0, done = false;
          return async (max: number) => {
            let rows = 0;
            while (rows < max) {
              if (!rest) {
                if (done) break;
                const r = await iter.next();
                if (r.done) { done = true; break; }
                const d = snapshotData(r.value, t.inputs, t.outputs, t.dtype, `batch ${index++}`);
                rest = { x: d.x, y: d.y!, count: d.count, at: 0 };
              }
              const n = Math.min(max - rows, rest.count - rest.at);
              t.x.set(rest.x.subarray(rest.at * t.inputs, (rest.at + n) * t.inputs), rows * t.inputs);
              t.y.set(rest.y.subarray(rest.at * t.outputs, (rest.at + n) * t.outputs), rows * t.outputs);
              rows += n;
              rest.at += n;
              if (rest.at === rest.count) rest = undefined;
            }
            total += rows;
            if (rows === 0 && total === 0) throw new DataError('BAD_DATA', 'data', `epoch ${epochs}`, 'yielded no batches (an iterable that cannot restart trains one epoch: pass a function that returns a new one)');
            return rows;
          };
        },
        async close() {},
      };
    },
  };
  return stream as DataStream;
}

export interface NpyStreamFiles {
  /** count x inputs values (float32 or float64, any byte order). */
  x: string;
  /** count integer class labels (any integer or float type; shape [count] or [count, 1]). */
  labels?: string;
  /** Or count x outputs target values. */
  y?: string;
}

interface OpenNpy { fd: FileHandle; h: NpyHeader; path: string }

async function openNpy(path: string, field: string): Promise<OpenNpy> {
  let fd: FileHandle;
  try { fd = await open(path, 'r'); } catch (e) { throw new OptionError('BAD_PATH', field, path, `cannot be read (${(e as Error).message})`); }
  try {
    const head = new Uint8Array(12);
    await fd.read(head, 0, 12, 0);
    const len = head[6] === 1 ? head[8]! | (head[9]! << 8) : new DataView(head.buffer).getUint32(8, true);
    const all = new Uint8Array(Math.min(12 + len, 2 ** 26));
    const { bytesRead } = await fd.read(all, 0, all.length, 0);
    const h = parseNpyHeader(all.subarray(0, bytesRead));
    if (h.fortranOrder && h.shape.length > 1 && h.shape[1] !== 1) throw new DataError('BAD_FILE', `${field} fortran_order`, true, 'is not streamed: rows must be contiguous (save it in C order)');
    const size = (await fd.stat()).size;
    if (size - h.dataOffset !== h.count * h.itemBytes) throw new DataError('BAD_FILE', `${field} data`, size - h.dataOffset, `must be ${h.count * h.itemBytes} bytes (shape [${h.shape.join(', ')}])`);
    return { fd, h, path };
  } catch (e) {
    await fd.close();
    throw e;
  }
}

/** Reads rows [first, first + n) of `f` (row width `width`) as numbers into `out` from 0. */
async function readRows(f: OpenNpy, first: number, n: number, width: number, out: Float32Array | Float64Array): Promise<void> {
  const { h } = f;
  const bytes = n * width * h.itemBytes;
  const position = h.dataOffset + first * width * h.itemBytes;
  const sameType = h.littleEndian && ((h.dtype === 'float32' && out instanceof Float32Array) || (h.dtype === 'float64' && out instanceof Float64Array));
  // The staging buffer's own dtype, little-endian: read straight into it.
  const buf = sameType ? new Uint8Array(out.buffer, out.byteOffset, bytes) : new Uint8Array(bytes);
  const { bytesRead } = await f.fd.read(buf, 0, bytes, position);
  if (bytesRead !== bytes) throw new DataError('BAD_FILE', f.path, bytesRead, `ended early: ${bytes} bytes expected at byte ${position}`);
  if (sameType) return;
  if (!h.littleEndian) for (let i = 0; i < bytes; i += h.itemBytes) buf.subarray(i, i + h.itemBytes).reverse();
  const dv = new DataView(buf.buffer);
  const read: (at: number) => number = {
    float32: (at: number) => dv.getFloat32(at, true), float64: (at: number) => dv.getFloat64(at, true),
    int8: (at: number) => dv.getInt8(at), uint8: (at: number) => dv.getUint8(at), bool: (at: number) => dv.getUint8(at),
    int16: (at: number) => dv.getInt16(at, true), uint16: (at: number) => dv.getUint16(at, true),
    int32: (at: number) => dv.getInt32(at, true), uint32: (at: number) => dv.getUint32(at, true),
    int64: (at: number) => Number(dv.getBigInt64(at, true)), uint64: (at: number) => Number(dv.getBigUint64(at, true)),
  }[h.dtype];
  for (let i = 0; i < n * width; i++) out[i] = read(i * h.itemBytes);
}

/** .npy files streamed in windows of rows (shuffled window order and rows within each window:
 *  see the top of this file). Files are opened by fit(), read as it goes, closed at its end. */
export function streamNpy(files: NpyStreamFiles): DataStream {
  if (files === null || typeof files !== 'object') throw new DataError('BAD_DATA', 'files', files, 'must be an object { x, labels } or { x, y }');
  const { x, labels, y } = files;
  checkPath(x, 'x');
  if ((labels === undefined) === (y === undefined)) throw new DataError('BAD_DATA', 'files', labels === undefined ? 'neither' : 'both', 'needs exactly one of labels or y');
  const targetPath = checkPath(labels ?? y, labels !== undefined ? 'labels' : 'y');
  const stream = {
    [STREAM]: true,
    rows: undefined as number | undefined,
    async open(t: StreamTarget) {
      const fx = await openNpy(x, 'x');
      let fy: OpenNpy | undefined;
      try {
        fy = await openNpy(targetPath, labels !== undefined ? 'labels' : 'y');
        const rows = fx.h.shape[0] ?? 0;
        if (fx.h.shape.length !== 2 || fx.h.shape[1] !== t.inputs) throw new DataError('BAD_DATA_WIDTH', 'x shape', fx.h.shape, `must be [count, ${t.inputs}] (the input layer's units)`);
        if (fx.h.dtype !== 'float32' && fx.h.dtype !== 'float64') throw new DataError('BAD_FILE', 'x dtype', fx.h.dtype, 'must be float32 or float64');
        const ys = fy.h.shape;
        const want = labels !== undefined ? (ys.length === 1 || (ys.length === 2 && ys[1] === 1)) : ys.length === 2 && ys[1] === t.outputs;
        if (ys[0] !== rows || !want) throw new DataError('BAD_DATA_WIDTH', `${labels !== undefined ? 'labels' : 'y'} shape`, ys, labels !== undefined ? `must be [${rows}] (one label per row of x)` : `must be [${rows}, ${t.outputs}]`);
        if (rows === 0) throw new DataError('BAD_DATA', 'x shape', fx.h.shape, 'holds no rows');
        stream.rows = rows;
      } catch (e) {
        await fx.fd.close();
        await fy?.fd.close();
        throw e;
      }
      const fyy = fy;
      const rows = stream.rows!;
      const staging = labels !== undefined ? new Float64Array(0) : undefined;
      let labelBuf = staging;
      return {
        epoch(rng: Rng | undefined, window: number): Fill {
          const windows = Math.ceil(rows / window);
          const order = Array.from({ length: windows }, (_, i) => i);
          if (rng) for (let i = windows - 1; i > 0; i--) { const j = rng.int(i + 1); [order[i], order[j]] = [order[j]!, order[i]!]; }
          let k = 0;
          return async (max: number) => {
            if (k === windows) return 0;
            const first = order[k++]! * window;
            const n = Math.min(window, max, rows - first);
            const xs = t.x.subarray(0, n * t.inputs);
            if (labels !== undefined) {
              if (labelBuf!.length < n) labelBuf = new Float64Array(window);
              await Promise.all([readRows(fx, first, n, t.inputs, xs), readRows(fyy, first, n, 1, labelBuf!)]);
              t.y.fill(0, 0, n * t.outputs);
              for (let i = 0; i < n; i++) {
                const v = labelBuf![i]!;
                if (!Number.isInteger(v) || v < 0 || v >= t.outputs) throw new DataError('BAD_LABEL', `labels[${first + i}]`, v, `is not a class in [0, ${t.outputs - 1}]`);
                t.y[i * t.outputs + v] = 1;
              }
            } else {
              await Promise.all([readRows(fx, first, n, t.inputs, xs), readRows(fyy, first, n, t.outputs, t.y.subarray(0, n * t.outputs))]);
              checkFinite(t.y, n * t.outputs, 'y', first, t.outputs, t.dtype);
            }
            checkFinite(t.x, n * t.inputs, 'x', first, t.inputs, t.dtype);
            return n;
          };
        },
        async close() { await fx.fd.close(); await fyy.fd.close(); },
      };
    },
  };
  return stream as DataStream;
}

function checkFinite(v: View, n: number, field: string, firstRow: number, width: number, dtype: Dtype): void {
  for (let i = 0; i < n; i++) {
    if (!Number.isFinite(v[i]!)) throw new DataError('BAD_DATA', `${field}[${(firstRow + Math.floor(i / width)) * width + (i % width)}]`, v[i], `is not a finite ${dtype} number`);
  }
}

/** The streaming fit: window by window through the data regions, the next window prepared while
 *  the current one trains. Runs in the arena's queue. */
export async function fitStream(r: Runner, stream: DataStream, o: FitPlan): Promise<FitResult> {
  const { arena, batch } = r;
  if (r.target.world > 1 || r.target.arenas.length > 1 || r.models !== 1) {
    throw new ArenaError('NOT_SUPPORTED', `fit() from a stream takes one arena of one model${r.models !== 1 ? `; this one holds models: ${r.models}` : ', not a data-parallel group'}`);
  }
  if (arena.deviceBudget !== undefined) throw new ArenaError('NOT_SUPPORTED', 'fit() from a stream needs an arena without a device budget (it refills the data regions between runs)');
  const window = Math.floor(r.samples / batch) * batch;
  if (window === 0) throw new DataError('DATA_TOO_LARGE', 'data', 'a stream', `is streamed through the data regions a window of whole batches at a time: plan with samples >= the batch of ${batch} (this plan has ${r.samples})`);
  const L = r.last;
  const make = (n: number) => (r.dtype === 'float64' ? new Float64Array(n) : new Float32Array(n));
  const target: StreamTarget = { x: make(window * r.inputs), y: make(window * r.outputs), inputs: r.inputs, outputs: r.outputs, dtype: r.dtype };
  const xr = arena.plan.region(0, 'xdata')!, yr = arena.plan.region(L, 'ydata')!;
  const source = await stream.open(target);
  const rng = new Rng(o.seed);
  const t0 = performance.now();
  let last: Metrics = { loss: NaN, accuracy: NaN };
  let path: RunPath = 'cpu', steps = 0, samples = 0;
  try {
    for (let epoch = 1; epoch <= o.epochs; epoch++) {
      const fill = source.epoch(o.shuffle ? rng : undefined, window);
      const epochStart = performance.now();
      const batches = stream.rows === undefined ? undefined : Math.ceil(stream.rows / batch);
      let rows = await fill(window), done = 0, seen = 0;
      while (rows > 0) {
        if (o.signal?.aborted) throw abortError('fit', o.signal);  // between windows: the weights are those of the last whole window
        r.syncDevice();
        // The window's rows go into the data regions and up (the regions then hold no resident
        // data set of fit / evaluate: dropped first, so a failed upload leaves no stale claim).
        r.state.resident = undefined;
        const xs = target.x.subarray(0, rows * r.inputs), ys = target.y.subarray(0, rows * r.outputs);
        arena.view(0, 'xdata').set(xs);
        arena.view(L, 'ydata').set(ys);
        transferRanges(arena, 'toDevice', { kinds: ['xdata', 'ydata'] }, [xr.offset, xs.byteLength, yr.offset, ys.byteLength]);
        const n = Math.ceil(rows / batch);
        const perm = o.shuffle ? affinePermutation(rng, rows) : { a: 1, c: 0 };
        const stepBase = r.state.steps;
        r.checkSteps(stepBase, n);
        const running = r.run({ op: OPS.train, resident: true, samples: rows, firstBatch: 0, numBatches: n, permA: perm.a, permC: perm.c, stepBase, resetStats: done === 0 });
        // The next window is read while this one trains, into the stream's own buffers.
        const [ran, next] = await Promise.allSettled([running, fill(window)]);
        if (ran.status === 'rejected') throw ran.reason;
        path = ran.value;
        r.addSteps(n);
        steps += n;
        done += n;
        seen += rows;
        const stats = r.stats();
        if (stats[0]![STATS.badStep]! >= 0) throw new ArenaError('DIVERGED', `training diverged: the loss became non-finite at step ${stepBase + stats[0]![STATS.badStep]!} (epoch ${epoch}); lower the learning rate`);
        last = combine(stats.map(metricsOf), [false]);
        o.onProgress?.({ ...last, epoch, epochs: o.epochs, batch: done, batches: batches ?? done, step: r.state.steps, samplesPerSecond: seen / ((performance.now() - epochStart) / 1000), lr: r.learningRate(r.state.steps - 1), ...(r.settings.opt.clipGradNorm > 0 ? { gradNorms: r.gradNorms() } : {}) });
        if (next.status === 'rejected') throw next.reason;
        rows = next.value;
      }
      samples += seen;
    }
  } finally {
    await source.close();
  }
  arena.toHost({ kinds: PARAM_KINDS });
  const seconds = (performance.now() - t0) / 1000;
  return { ...last, path, epochs: o.epochs, steps, seconds, samplesPerSecond: samples / seconds };
}
