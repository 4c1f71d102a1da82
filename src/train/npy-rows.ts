// npy-rows.ts: the reads of a streamed .npy source (src/train/stream.ts streamNpy): an
// unshuffled window's contiguous rows, or a shuffled window's rows gathered from all over the
// file (the epoch's affine permutation of every row) straight into the window buffer.
import { open, type FileHandle } from 'node:fs/promises';
import { DataError, OptionError } from '../errors.js';
import { parseNpyHeader, type NpyHeader } from '../formats/npy.js';
import { call, native } from '../native.js';
import { modInverse, mulmod } from './rng.js';

export interface OpenNpy { fd: FileHandle; h: NpyHeader; path: string }

export async function openNpy(path: string, field: string): Promise<OpenNpy> {
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
export async function readRows(f: OpenNpy, first: number, n: number, width: number, out: Float32Array | Float64Array): Promise<void> {
  const { h } = f;
  const bytes = n * width * h.itemBytes;
  const position = h.dataOffset + first * width * h.itemBytes;
  const same = sameType(h, out);
  const buf = same ? new Uint8Array(out.buffer, out.byteOffset, bytes) : new Uint8Array(bytes);
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
  if (!same) decode(h, buf, n * width, out);
}

/** The file's own element type, little-endian, is the window's: rows are read straight into it. */
const sameType = (h: NpyHeader, out: Float32Array | Float64Array) => h.littleEndian && ((h.dtype === 'float32' && out instanceof Float32Array) || (h.dtype === 'float64' && out instanceof Float64Array));

/** `count` values of the file's type in `buf` as numbers into `out` from 0. */
function decode(h: NpyHeader, buf: Uint8Array, count: number, out: Float32Array | Float64Array): void {
  const bytes = count * h.itemBytes;
  if (!h.littleEndian) for (let i = 0; i < bytes; i += h.itemBytes) buf.subarray(i, i + h.itemBytes).reverse();
  const dv = new DataView(buf.buffer, buf.byteOffset);
  const read: (at: number) => number = {
    float32: (at: number) => dv.getFloat32(at, true), float64: (at: number) => dv.getFloat64(at, true),
    int8: (at: number) => dv.getInt8(at), uint8: (at: number) => dv.getUint8(at), bool: (at: number) => dv.getUint8(at),
    int16: (at: number) => dv.getInt16(at, true), uint16: (at: number) => dv.getUint16(at, true),
    int32: (at: number) => dv.getInt32(at, true), uint32: (at: number) => dv.getUint32(at, true),
    int64: (at: number) => Number(dv.getBigInt64(at, true)), uint64: (at: number) => Number(dv.getBigUint64(at, true)),
  }[h.dtype];
  for (let i = 0; i < count; i++) out[i] = read(i * h.itemBytes);
}

/** The file rows of an epoch's positions [start, start + n) under k -> (a k + c) mod N,
 *  ascending (the order the file is read in), and the position from `start` of each. */
export function windowRows(p: { a: number; c: number }, start: number, n: number, N: number): { rows: Float64Array; at: Uint32Array } {
  const rows = new Float64Array(n);
  for (let i = 0, r = (mulmod(p.a, start, N) + p.c) % N; i < n; i++, r = r + p.a >= N ? r + p.a - N : r + p.a) rows[i] = r;
  rows.sort();
  const inv = modInverse(p.a, N), at = new Uint32Array(n);
  for (let i = 0; i < n; i++) at[i] = mulmod(inv, (rows[i]! - p.c + N) % N, N) - start;
  return { rows, at };
}

/** File rows `rows` (ascending) of `f` (row width `width`) into `out` at rows `at`, as numbers:
 *  read natively in parallel parts, straight into `out` where the types match. */
export async function gatherRows(f: OpenNpy, rows: Float64Array, at: Uint32Array, width: number, out: Float32Array | Float64Array): Promise<void> {
  const { h } = f, rowBytes = width * h.itemBytes, bytes = rows.length * rowBytes;
  const same = sameType(h, out);
  const buf = same ? new Uint8Array(out.buffer, out.byteOffset, bytes) : new Uint8Array(bytes);
  const got = await call(() => native().readRows(f.fd.fd, h.dataOffset, rowBytes, rows, at, buf));
  if (got < 0) throw new DataError('BAD_FILE', f.path, got, `cannot be read (errno ${-got})`);
  if (got !== bytes) throw new DataError('BAD_FILE', f.path, got, `ended early: ${bytes} bytes of rows expected`);
  if (!same) decode(h, buf, rows.length * width, out);
}
