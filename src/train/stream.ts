// stream.ts: the data sources fit() streams from (src/train/stream-fit.ts trains them): an
// (async) iterable of batches, or .npy files read in windows of rows (streamNpy). A source
// writes a window of rows at a time into buffers fit() gives it (pinned host memory on CUDA);
// the non-finite check of those rows is native and off the JS thread (the window's upload), and
// the source names the element it found (`where`).
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
import type { View } from '../arena.js';
import { DataError, OptionError } from '../errors.js';
import type { Dtype } from '../layout/header.js';
import { parseNpyHeader, type NpyHeader } from '../formats/npy.js';
import { checkPath } from '../formats/file.js';
import { numericTypedLength, snapshotData, snapshotNumbers, type Data } from './data.js';
import type { Rng } from './rng.js';

/** A window's buffers: rows from 0, x and y (targets, one-hot rows for labels). */
export interface WindowBuffers { x: View; y: View }

/** What a fill wrote: its rows (0: the epoch's source is exhausted), and the name of element i
 *  of the window's x or y as the user knows it (e.g. 'batch 3.x[17]', 'x[6017]'). */
export interface Filled { rows: number; where(kind: 'x' | 'y', i: number): string }

/** Writes up to `max` rows into `into` from row 0. */
export type Fill = (max: number, into: WindowBuffers) => Promise<Filled>;

/** A data source fit() streams: opened once per fit, one reader per epoch. */
export interface DataStream {
  /** Rows in all, when known before reading (a .npy source); undefined for an iterable. */
  readonly rows: number | undefined;
  /** @internal */
  open(target: StreamTarget): Promise<{ epoch(rng: Rng | undefined, window: number): Fill; close(): Promise<void> }>;
}

/** The network's widths and dtype, which a source's rows must fit. */
export interface StreamTarget { inputs: number; outputs: number; dtype: Dtype }

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

// A batch being copied into windows: x (any numeric typed array, read in place) and its target
// rows; `base` rows of the batch went into earlier windows before `x` was cut to the rest.
interface Batch { x: ArrayLike<number>; y: ArrayLike<number>; count: number; at: number; base: number; index: number }

// The typed array methods themselves: a subclass or own property cannot stand in for them.
type Cut = (this: ArrayLike<number>, a: number, b: number) => ArrayLike<number>;
const { subarray, slice } = Object.getPrototypeOf(Int8Array.prototype) as { subarray: Cut; slice: Cut };

/** One yielded batch, each field read once. A typed array x (or y) is copied straight into the
 *  window (its non-finite values are found on upload); anything else goes through the
 *  resident checks (snapshotData). Labels become one-hot rows here. */
function takeBatch(v: unknown, t: StreamTarget, index: number): Batch {
  const field = `batch ${index}`;
  if (v === null || typeof v !== 'object') return snapshotted(v, t, index);
  const { x, labels, y, inputs: declared } = v as Data;
  const nx = numericTypedLength(x);
  if (nx === undefined || (y !== undefined && numericTypedLength(y) === undefined)) return snapshotted({ x, labels, y, inputs: declared }, t, index);
  if (declared !== undefined && declared !== t.inputs) throw new DataError('BAD_DATA_WIDTH', `${field}.inputs`, declared, `does not match the input layer's ${t.inputs} units`);
  if (nx === 0 || nx % t.inputs !== 0) throw new DataError('BAD_DATA_WIDTH', `${field}.x.length`, nx, `is not a positive multiple of the input layer's ${t.inputs} units`);
  const count = nx / t.inputs;
  if ((labels === undefined) === (y === undefined)) throw new DataError('BAD_DATA', field, labels === undefined ? 'neither' : 'both', 'needs exactly one of labels or y');
  if (y !== undefined) {
    const ny = numericTypedLength(y)!;
    if (ny !== count * t.outputs) throw new DataError('BAD_DATA_WIDTH', `${field}.y.length`, ny, `must be ${count} samples x ${t.outputs} outputs = ${count * t.outputs}`);
    return { x, y, count, at: 0, base: 0, index };
  }
  const ls = snapshotNumbers(labels, `${field}.labels`, 'float64', (n) => {
    if (n !== count) throw new DataError('BAD_DATA', `${field}.labels.length`, n, `must equal the ${count} samples in x`);
  });
  const ys = t.dtype === 'float64' ? new Float64Array(count * t.outputs) : new Float32Array(count * t.outputs);
  for (let i = 0; i < count; i++) {
    const c = ls[i]!;
    if (!Number.isInteger(c) || c < 0 || c >= t.outputs) throw new DataError('BAD_LABEL', `${field}.labels[${i}]`, c, `is not a class in [0, ${t.outputs - 1}]`);
    ys[i * t.outputs + c] = 1;
  }
  return { x, y: ys, count, at: 0, base: 0, index };
}

function snapshotted(v: unknown, t: StreamTarget, index: number): Batch {
  const d = snapshotData(v, t.inputs, t.outputs, t.dtype, `batch ${index}`);
  return { x: d.x, y: d.y!, count: d.count, at: 0, base: 0, index };
}

/** The rows of `b` not yet copied, as a copy of their own (same element type: exact). */
function ownRest(b: Batch, t: StreamTarget): Batch {
  const rest = (v: ArrayLike<number>, w: number) => slice.call(v, b.at * w, b.count * w);
  return { x: rest(b.x, t.inputs), y: rest(b.y, t.outputs), count: b.count - b.at, at: 0, base: b.base + b.at, index: b.index };
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
          let rest: Batch | undefined;
          let index = 0, total = 0, done = false;
          return async (max: number, into: WindowBuffers) => {
            let rows = 0;
            const segments: Array<{ row: number; batch: number; at: number }> = [];
            while (rows < max) {
              if (!rest) {
                if (done) break;
                const r = await iter.next();
                if (r.done) { done = true; break; }
                rest = takeBatch(r.value, t, index++);
              }
              const n = Math.min(max - rows, rest.count - rest.at);
              into.x.set(subarray.call(rest.x, rest.at * t.inputs, (rest.at + n) * t.inputs), rows * t.inputs);
              into.y.set(subarray.call(rest.y, rest.at * t.outputs, (rest.at + n) * t.outputs), rows * t.outputs);
              segments.push({ row: rows, batch: rest.index, at: rest.base + rest.at });
              rows += n;
              rest.at += n;
              if (rest.at === rest.count) rest = undefined;
              else rest = ownRest(rest, t);  // the user may reuse its buffers once the next is asked for
            }
            total += rows;
            if (rows === 0 && total === 0) throw new DataError('BAD_DATA', 'data', `epoch ${epochs}`, 'yielded no batches (an iterable that cannot restart trains one epoch: pass a function that returns a new one)');
            return {
              rows,
              where(kind: 'x' | 'y', i: number) {
                const width = kind === 'x' ? t.inputs : t.outputs, row = Math.floor(i / width);
                const s = segments.findLast((g) => g.row <= row)!;
                return `batch ${s.batch}.${kind}[${(s.at + row - s.row) * width + (i % width)}]`;
              },
            };
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

const READ_PARTS = 4, READ_PART_BYTES = 2 ** 21;

/** Reads rows [first, first + n) of `f` (row width `width`) as numbers into `out` from 0. */
async function readRows(f: OpenNpy, first: number, n: number, width: number, out: Float32Array | Float64Array): Promise<void> {
  const { h } = f;
  const bytes = n * width * h.itemBytes;
  const position = h.dataOffset + first * width * h.itemBytes;
  const sameType = h.littleEndian && ((h.dtype === 'float32' && out instanceof Float32Array) || (h.dtype === 'float64' && out instanceof Float64Array));
  // The staging buffer's own dtype, little-endian: read straight into it.
  const buf = sameType ? new Uint8Array(out.buffer, out.byteOffset, bytes) : new Uint8Array(bytes);
  // Large reads in a few parts at once (libuv's threads): one pread of a window from the page
  // cache is a single memcpy on one core.
  const parts = Math.max(1, Math.min(READ_PARTS, Math.floor(bytes / READ_PART_BYTES)));
  const per = Math.ceil(bytes / parts / 4096) * 4096;
  const got = await Promise.all(Array.from({ length: parts }, (_, i) => {
    const at = Math.min(bytes, i * per), len = Math.min(bytes, (i + 1) * per) - at;
    return len > 0 ? f.fd.read(buf, at, len, position + at).then((r) => r.bytesRead) : 0;
  }));
  const bytesRead = got.reduce((a, b) => a + b, 0);
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
          return async (max: number, into: WindowBuffers) => {
            if (k === windows) return { rows: 0, where: () => '' };
            const first = order[k++]! * window;
            const n = Math.min(window, max, rows - first);
            const xs = into.x.subarray(0, n * t.inputs);
            if (labels !== undefined) {
              if (labelBuf!.length < n) labelBuf = new Float64Array(window);
              await Promise.all([readRows(fx, first, n, t.inputs, xs), readRows(fyy, first, n, 1, labelBuf!)]);
              into.y.fill(0, 0, n * t.outputs);
              for (let i = 0; i < n; i++) {
                const v = labelBuf![i]!;
                if (!Number.isInteger(v) || v < 0 || v >= t.outputs) throw new DataError('BAD_LABEL', `labels[${first + i}]`, v, `is not a class in [0, ${t.outputs - 1}]`);
                into.y[i * t.outputs + v] = 1;
              }
            } else {
              await Promise.all([readRows(fx, first, n, t.inputs, xs), readRows(fyy, first, n, t.outputs, into.y.subarray(0, n * t.outputs))]);
            }
            // Non-finite values are found as the window goes up (natively): named here.
            return { rows: n, where: (kind: 'x' | 'y', i: number) => `${kind}[${first * (kind === 'x' ? t.inputs : t.outputs) + i}]` };
          };
        },
        async close() { await fx.fd.close(); await fyy.fd.close(); },
      };
    },
  };
  return stream as DataStream;
}
