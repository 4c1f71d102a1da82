// npy-rows.ts: the reads of a streamed .npy source (src/train/stream.ts streamNpy): a window's
// rows, contiguous (unshuffled) or from all over the file (the epoch's affine permutation of
// every row), gathered natively off the JS thread in parallel (csrc/addon/read_rows.cc) straight
// into the window buffer where the types match, else into a scratch buffer and converted on the
// same pool (csrc/addon/decode_values.cc).
import type { FileHandle } from 'node:fs/promises';
import { DataError, fromNative, NnArenaError, OptionError } from '../core/errors.js';
import { openRegular } from '../formats/file.js';
import { parseNpyHeader, type NpyHeader } from '../formats/npy.js';
import { call, native, type NativeRowFile } from '../native/addon.js';

export interface OpenNpy {
  fd: FileHandle;
  h: NpyHeader;
  path: string;
  rows?: NativeRowFile;
}

/** `path` opened and its header read: a regular file (a FIFO, a device or a folder is refused,
 *  OptionError BAD_PATH naming `field`, before a byte is read). */
export async function openNpy(path: string, field: string): Promise<OpenNpy> {
  const fd = await openRegular(path, field);
  try {
    const head = new Uint8Array(12);
    await fd.read(head, 0, 12, 0);
    const len = head[6] === 1 ? head[8]! | (head[9]! << 8) : new DataView(head.buffer).getUint32(8, true);
    const all = new Uint8Array(Math.min(12 + len, 2 ** 26));
    const { bytesRead } = await fd.read(all, 0, all.length, 0);
    const h = parseNpyHeader(all.subarray(0, bytesRead));
    if (h.fortranOrder && h.shape.length > 1 && h.shape[1] !== 1)
      throw new DataError('BAD_FILE', `${field} fortran_order`, true, 'is not streamed: rows must be contiguous (save it in C order)');
    const size = (await fd.stat()).size;
    if (size - h.dataOffset !== h.count * h.itemBytes)
      throw new DataError('BAD_FILE', `${field} data`, size - h.dataOffset, `must be ${h.count * h.itemBytes} bytes (shape [${h.shape.join(', ')}])`);
    return { fd, h, path };
  } catch (e) {
    await fd.close();
    throw e instanceof NnArenaError ? e : new OptionError('BAD_PATH', field, path, `cannot be read (${(e as Error).message})`);
  }
}

/** The native reader of `f`'s rows (row width `width`), opened at the first window. */
function rowFile(f: OpenNpy, width: number): NativeRowFile {
  const rows = f.h.shape[0] ?? 0;
  return (f.rows ??= call(() => new (native().RowFile)(f.fd.fd, f.h.dataOffset, width * f.h.itemBytes, rows)));
}

/** Closes `f` and its native reader (the mapping goes once a read in flight ends). */
export async function closeNpy(f: OpenNpy): Promise<void> {
  f.rows?.close();
  await f.fd.close();
}

/** Positions [start, start + n) of the order k -> (a k + c) mod N of `f`'s rows (a = 1, c = 0:
 *  the file in order; row width `width`) into `out` from row 0, as numbers. */
export async function gatherRows(
  f: OpenNpy,
  p: { a: number; c: number },
  start: number,
  n: number,
  width: number,
  out: Float32Array | Float64Array,
): Promise<void> {
  const { h } = f,
    bytes = n * width * h.itemBytes;
  const same = sameType(h, out);
  const buf = same ? new Uint8Array(out.buffer, out.byteOffset, bytes) : new Uint8Array(bytes);
  const r = rowFile(f, width);
  let got: number;
  try {
    got = await call(() => r.gather(buf, start, n, p.a, p.c));
  } catch (e) {
    throw fromNative(e);
  }
  if (got < 0) throw new DataError('BAD_FILE', f.path, got, `cannot be read (errno ${-got})`);
  if (got !== bytes) throw new DataError('BAD_FILE', f.path, got, `ended early: ${bytes} bytes of rows expected`);
  if (!same) {
    try {
      await call(() => native().decodeValues(buf, h.dtype, h.littleEndian, out, n * width));
    } catch (e) {
      throw fromNative(e);
    }
  }
}

/** The file's own element type, little-endian, is the window's: rows are read straight into it. */
const sameType = (h: NpyHeader, out: Float32Array | Float64Array) =>
  h.littleEndian && ((h.dtype === 'float32' && out instanceof Float32Array) || (h.dtype === 'float64' && out instanceof Float64Array));
