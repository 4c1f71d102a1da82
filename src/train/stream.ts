// stream.ts: the data sources fit() streams from (src/train/stream-fit.ts trains them): an
// (async) iterable of batches, or .npy files read in windows of rows (streamNpy). A source
// writes a window of rows at a time into buffers fit() gives it (pinned host memory on CUDA);
// the non-finite check of those rows is native, on the device (the window's copy into the data
// regions), and the source names the element it found (`where`).
//
// Order: a window holds W = floor(samples / batch) * batch rows, so every batch but the
// source's last is full, as in resident training. With shuffle, a .npy source (random access)
// is shuffled over all its rows: each epoch draws the resident epoch's affine permutation of
// all N rows, and window k holds positions [kW, (k + 1)W) of it, in that order, gathered from
// the file natively and in parallel (csrc/addon/read_rows.cc): every row once per epoch, any two may share a batch, and
// the batches, steps and weights are those of resident training on the whole source with the
// same seed. An iterable (no random access) goes through a shuffle buffer (shuffle-buffer.ts):
// not uniform over the source. Without shuffle, rows go in source order: the same batches,
// steps and weights as unshuffled resident training (test/stream.test.ts).
import { DataError, fromNative } from '../core/errors.js';
import { call, native } from '../native/addon.js';
import { checkPath } from '../formats/file.js';
import { numericTypedLength, snapshotData, snapshotNumbers, type Data } from './data.js';
import { closeNpy, gatherRows, openNpy, type OpenNpy } from './npy-rows.js';
import { affinePermutation, mulmod, type Rng } from './rng.js';
import { ShuffleBuffer, type Head } from './shuffle-buffer.js';
import { StreamStop } from './stream-stop.js';
import { subarray, viewBytes, type Batch, type Fill, type Filled, type StreamTarget, type WindowBuffers } from './window.js';

/** A data source fit() streams: opened once per fit, one reader per epoch. */
export interface DataStream {
  /** Rows in all, when known before reading (a .npy source); undefined for an iterable. */
  readonly rows: number | undefined;
  /** @internal An epoch's reader: shuffled with `rng`; `buffer`: an iterable's shuffle buffer rows.
   *  Waits on the user's source go through `stop` (fit()'s; none: never cut short); close() ends
   *  a source stopped early. */
  open(target: StreamTarget, stop?: StreamStop): Promise<{ epoch(rng: Rng | undefined, window: number, buffer: number): Fill; close(): Promise<void> }>;
}

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

/** One yielded batch, each field read once. A typed array x (or y) is copied straight into the
 *  window (its non-finite values are found on upload); anything else goes through the
 *  resident checks (snapshotData). Labels become one-hot rows here. */
function takeBatch(v: unknown, t: StreamTarget, index: number): Batch {
  const field = `batch ${index}`;
  if (v === null || typeof v !== 'object') return snapshotted(v, t, index);
  const { x, labels, y, inputs: declared } = v as Data;
  const nx = numericTypedLength(x);
  if (nx === undefined || (y !== undefined && numericTypedLength(y) === undefined)) return snapshotted({ x, labels, y, inputs: declared }, t, index);
  if (declared !== undefined && declared !== t.inputs)
    throw new DataError('BAD_DATA_WIDTH', `${field}.inputs`, declared, `does not match the input layer's ${t.inputs} units`);
  if (nx === 0 || nx % t.inputs !== 0)
    throw new DataError('BAD_DATA_WIDTH', `${field}.x.length`, nx, `is not a positive multiple of the input layer's ${t.inputs} units`);
  const count = nx / t.inputs;
  if ((labels === undefined) === (y === undefined))
    throw new DataError('BAD_DATA', field, labels === undefined ? 'neither' : 'both', 'needs exactly one of labels or y');
  if (y !== undefined) {
    const ny = numericTypedLength(y)!;
    if (ny !== count * t.outputs)
      throw new DataError('BAD_DATA_WIDTH', `${field}.y.length`, ny, `must be ${count} samples x ${t.outputs} outputs = ${count * t.outputs}`);
    return { x, y, count, at: 0, index };
  }
  const ls = snapshotNumbers(labels, `${field}.labels`, 'float64', (n) => {
    if (n !== count) throw new DataError('BAD_DATA', `${field}.labels.length`, n, `must equal the ${count} samples in x`);
  });
  const ys = t.dtype === 'float64' ? new Float64Array(count * t.outputs) : new Float32Array(count * t.outputs);
  for (let i = 0; i < count; i++) {
    const c = ls[i]!;
    if (!Number.isInteger(c) || c < 0 || c >= t.outputs)
      throw new DataError('BAD_LABEL', `${field}.labels[${i}]`, c, `is not a class in [0, ${t.outputs - 1}]`);
    ys[i * t.outputs + c] = 1;
  }
  return { x, y: ys, count, at: 0, index };
}

/** Rows of one call a native parallel copy is worth (its promise costs a round trip). */
const PARALLEL_COPY_BYTES = 1 << 20;

/** n rows of `b` from b.at into window rows from `row`: a byte copy on the gather pool's threads
 *  where the batch's arrays have the window's element type and the rows are many (a window of S
 *  by one TypedArray.set was a single-threaded memcpy slower than its steps), else set(). */
async function copyRows(into: WindowBuffers, row: number, b: Batch, n: number, t: StreamTarget): Promise<void> {
  const xs = subarray.call(b.x, b.at * t.inputs, (b.at + n) * t.inputs) as ArrayBufferView & ArrayLike<number>;
  const ys = subarray.call(b.y, b.at * t.outputs, (b.at + n) * t.outputs) as ArrayBufferView & ArrayLike<number>;
  const dx = into.x.subarray(row * t.inputs, (row + n) * t.inputs),
    dy = into.y.subarray(row * t.outputs, (row + n) * t.outputs);
  if (xs.constructor === dx.constructor && ys.constructor === dy.constructor && xs.byteLength >= PARALLEL_COPY_BYTES) {
    try {
      await call(() => native().copyBytes(viewBytes(dx), viewBytes(xs), viewBytes(dy), viewBytes(ys)));
    } catch (e) {
      throw fromNative(e);
    }
    return;
  }
  dx.set(xs);
  dy.set(ys);
}

function snapshotted(v: unknown, t: StreamTarget, index: number): Batch {
  const d = snapshotData(v, t.inputs, t.outputs, t.dtype, `batch ${index}`);
  return { x: d.x, y: d.y!, count: d.count, at: 0, index };
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
    async open(t: StreamTarget, stop = new StreamStop(undefined)) {
      let epochs = 0;
      let shuffler: ShuffleBuffer | undefined; // kept from epoch to epoch
      // The epoch's iterator, until it is done (or failed): a fit that stops before that closes
      // it (return(), as a for-of loop left early does), so the user's finally blocks run.
      let live: Live | undefined;
      // Its next batch, or the fit's reason to stop waiting for one (a source may never answer).
      const ask = (l: Live) =>
        stop.source(() => {
          let p: Promise<IteratorResult<Data>>;
          try {
            p = Promise.resolve(l.iter.next());
          } catch (e) {
            l.finished = true;
            throw e;
          }
          l.asking = true;
          p.then(
            (r) => {
              l.asking = false;
              if (r?.done) l.finished = true;
            },
            () => {
              l.asking = false;
              l.finished = true;
            },
          );
          return p;
        });
      return {
        epoch(rng: Rng | undefined, window: number, buffer: number): Fill {
          epochs++;
          const it = typeof source === 'function' ? source() : source;
          if (it === null || typeof it !== 'object' || !(Symbol.asyncIterator in it || Symbol.iterator in it))
            throw new DataError('BAD_DATA', 'data()', it, 'must return an (async) iterable of batches');
          const iter = Symbol.asyncIterator in it ? (it as AsyncIterable<Data>)[Symbol.asyncIterator]() : (it as Iterable<Data>)[Symbol.iterator]();
          const l: Live = (live = { iter, asking: false, finished: false });
          let rest: Batch | undefined;
          let index = 0,
            total = 0;
          const counted = (f: Filled): Filled => {
            total += f.rows;
            if (f.rows === 0 && total === 0)
              throw new DataError(
                'BAD_DATA',
                'data',
                `epoch ${epochs}`,
                'yielded no batches (an iterable that cannot restart trains one epoch: pass a function that returns a new one)',
              );
            return f;
          };
          if (rng) {
            if (shuffler?.size !== buffer) {
              shuffler?.dispose();
              shuffler = new ShuffleBuffer(t, buffer);
            }
            const buf = shuffler;
            buf.reset();
            const head: Head = () => (rest && rest.at < rest.count ? rest : pull());
            const pull = async () => {
              rest = undefined;
              if (l.finished) return undefined;
              const r = await ask(l);
              if (!r.done) rest = takeBatch(r.value, t, index++);
              return rest;
            };
            return async (max: number, into: WindowBuffers) => counted(await buf.fill(max, into, head, rng));
          }
          return async (max: number, into: WindowBuffers) => {
            let rows = 0;
            const segments: Array<{ row: number; batch: number; at: number }> = [];
            while (rows < max) {
              if (!rest) {
                if (l.finished) break;
                const r = await ask(l);
                if (r.done) break;
                rest = takeBatch(r.value, t, index++);
              }
              const n = Math.min(max - rows, rest.count - rest.at);
              await copyRows(into, rows, rest, n, t);
              segments.push({ row: rows, batch: rest.index, at: rest.at });
              rows += n;
              rest.at += n;
              // A batch's rest is held across fills as the user's own arrays: they may reuse them
              // once the next batch is asked for, and that happens only when this one is used up.
              if (rest.at === rest.count) rest = undefined;
            }
            return counted({
              rows,
              where(kind: 'x' | 'y', i: number) {
                const width = kind === 'x' ? t.inputs : t.outputs,
                  row = Math.floor(i / width);
                const s = segments.findLast((g) => g.row <= row)!;
                return `batch ${s.batch}.${kind}[${(s.at + row - s.row) * width + (i % width)}]`;
              },
            });
          };
        },
        async close() {
          shuffler?.dispose();
          const l = live;
          live = undefined;
          if (!l || l.finished) return;
          l.finished = true;
          // Its own failure to close is not the fit's: the fit's error (or DISPOSED) stands.
          let closing: unknown;
          try {
            closing = l.iter.return?.();
          } catch {
            return;
          }
          // A return() asked while a next() is pending runs after it, which may be never: not awaited.
          if (l.asking) {
            Promise.resolve(closing).catch(() => {});
            return;
          }
          await stop.cleanup(closing).catch(() => {});
        },
      };
    },
  };
  return stream as DataStream;
}

/** An iterable source's epoch iterator: `asking` while a next() is unsettled, `finished` once it
 *  said done or failed (nothing to close then). */
interface Live {
  iter: Iterator<Data> | AsyncIterator<Data>;
  asking: boolean;
  finished: boolean;
}

export interface NpyStreamFiles {
  /** count x inputs values (float32 or float64, any byte order). */
  x: string;
  /** count integer class labels (any integer or float type; shape [count] or [count, 1]). */
  labels?: string;
  /** Or count x outputs target values. */
  y?: string;
}

/** .npy files streamed in windows of rows (shuffled over all rows: see the top of this file). Files are opened by fit(), read as it goes, closed at its end. */
export function streamNpy(files: NpyStreamFiles): DataStream {
  if (files === null || typeof files !== 'object') throw new DataError('BAD_DATA', 'files', files, 'must be an object { x, labels } or { x, y }');
  const { x, labels, y } = files;
  checkPath(x, 'x');
  if ((labels === undefined) === (y === undefined))
    throw new DataError('BAD_DATA', 'files', labels === undefined ? 'neither' : 'both', 'needs exactly one of labels or y');
  const targetPath = checkPath(labels ?? y, labels !== undefined ? 'labels' : 'y');
  const stream = {
    [STREAM]: true,
    rows: undefined as number | undefined,
    async open(t: StreamTarget) {
      // file reads do not wait on the user: no StreamStop
      const fx = await openNpy(x, 'x');
      let fy: OpenNpy | undefined;
      try {
        fy = await openNpy(targetPath, labels !== undefined ? 'labels' : 'y');
        const rows = fx.h.shape[0] ?? 0;
        if (fx.h.shape.length !== 2 || fx.h.shape[1] !== t.inputs)
          throw new DataError('BAD_DATA_WIDTH', 'x shape', fx.h.shape, `must be [count, ${t.inputs}] (the input layer's units)`);
        if (fx.h.dtype !== 'float32' && fx.h.dtype !== 'float64') throw new DataError('BAD_FILE', 'x dtype', fx.h.dtype, 'must be float32 or float64');
        const ys = fy.h.shape;
        const want = labels !== undefined ? ys.length === 1 || (ys.length === 2 && ys[1] === 1) : ys.length === 2 && ys[1] === t.outputs;
        if (ys[0] !== rows || !want)
          throw new DataError(
            'BAD_DATA_WIDTH',
            `${labels !== undefined ? 'labels' : 'y'} shape`,
            ys,
            labels !== undefined ? `must be [${rows}] (one label per row of x)` : `must be [${rows}, ${t.outputs}]`,
          );
        if (rows === 0) throw new DataError('BAD_DATA', 'x shape', fx.h.shape, 'holds no rows');
        stream.rows = rows;
      } catch (e) {
        await closeNpy(fx);
        if (fy) await closeNpy(fy);
        throw e;
      }
      const fyy = fy;
      const rows = stream.rows!;
      const staging = labels !== undefined ? new Float64Array(0) : undefined;
      let labelBuf = staging;
      return {
        epoch(rng: Rng | undefined, window: number): Fill {
          const p = rng ? affinePermutation(rng, rows) : undefined; // a resident epoch's draw
          let next = 0; // the epoch's next position
          return async (max: number, into: WindowBuffers) => {
            if (next === rows) return { rows: 0, where: () => '' };
            const start = next,
              n = Math.min(window, max, rows - start);
            next += n;
            const fileRow = (i: number) => (p ? (mulmod(p.a, start + i, rows) + p.c) % rows : start + i);
            const read = (f: OpenNpy, width: number, out: Float32Array | Float64Array) => gatherRows(f, p ?? { a: 1, c: 0 }, start, n, width, out);
            const xs = into.x.subarray(0, n * t.inputs);
            if (labels !== undefined) {
              if (labelBuf!.length < n) labelBuf = new Float64Array(window);
              await Promise.all([read(fx, t.inputs, xs), read(fyy, 1, labelBuf!.subarray(0, n))]);
              into.y.fill(0, 0, n * t.outputs);
              for (let i = 0; i < n; i++) {
                const v = labelBuf![i]!;
                if (!Number.isInteger(v) || v < 0 || v >= t.outputs)
                  throw new DataError('BAD_LABEL', `labels[${fileRow(i)}]`, v, `is not a class in [0, ${t.outputs - 1}]`);
                into.y[i * t.outputs + v] = 1;
              }
            } else {
              await Promise.all([read(fx, t.inputs, xs), read(fyy, t.outputs, into.y.subarray(0, n * t.outputs))]);
            }
            // Non-finite values are found as the window goes up (natively): named here.
            return {
              rows: n,
              where(kind: 'x' | 'y', i: number) {
                const width = kind === 'x' ? t.inputs : t.outputs;
                return `${kind}[${fileRow(Math.floor(i / width)) * width + (i % width)}]`;
              },
            };
          };
        },
        async close() {
          await closeNpy(fx);
          await closeNpy(fyy);
        },
      };
    },
  };
  return stream as DataStream;
}
