// npy.ts: NumPy .npy files (format versions 1.0, 2.0 and 3.0): the header is parsed strictly
// (a Python dict literal with 'descr', 'fortran_order' and 'shape', nothing else) and the data
// becomes a typed array. Little-endian (or single-byte) data at an offset aligned to its element
// is a view over the file's bytes, no copy; big-endian data is byte-swapped and Fortran-order
// data transposed to row-major (C) order, each into one new array. Every refusal is a DataError
// BAD_FILE naming the part of the file.
import { DataError } from '../core/errors.js';
import { bytesOf } from './file.js';

export type NpyDtype = 'float32' | 'float64' | 'int8' | 'uint8' | 'int16' | 'uint16' | 'int32' | 'uint32' | 'int64' | 'uint64' | 'bool';
export type NpyData =
  Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array;

export interface NpyArray {
  dtype: NpyDtype;
  /** Dimensions, outermost first (row-major: the last varies fastest). */
  shape: number[];
  /** shape's product of elements, row-major; bool as 0/1 bytes. */
  data: NpyData;
}

/** A parsed header: where the data starts and how to read it. */
export interface NpyHeader {
  dtype: NpyDtype;
  shape: number[];
  fortranOrder: boolean;
  littleEndian: boolean;
  dataOffset: number;
  count: number;
  itemBytes: number;
}

type Ctor = { new (buffer: ArrayBuffer, offset: number, length: number): NpyData; new (length: number): NpyData; BYTES_PER_ELEMENT: number };
const TYPES: Record<string, [NpyDtype, Ctor]> = {
  f4: ['float32', Float32Array],
  f8: ['float64', Float64Array],
  i1: ['int8', Int8Array],
  u1: ['uint8', Uint8Array],
  i2: ['int16', Int16Array],
  u2: ['uint16', Uint16Array],
  i4: ['int32', Int32Array],
  u4: ['uint32', Uint32Array],
  i8: ['int64', BigInt64Array as unknown as Ctor],
  u8: ['uint64', BigUint64Array as unknown as Ctor],
  b1: ['bool', Uint8Array],
};
const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
const MAX_ELEMENTS = 2 ** 32 - 1;

const bad = (field: string, value: unknown, why: string) => new DataError('BAD_FILE', field, value, why);

/** A small strict parser of the header's Python literal: a dict of str keys to str, bool or a
 *  tuple of ints. */
function parseLiteral(text: string): Record<string, unknown> {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const fail = (why: string): never => {
    throw bad('npy header', text.length > 120 ? `${text.slice(0, 120)}…` : text, `${why} at character ${i}`);
  };
  const expect = (c: string) => {
    ws();
    if (text[i] !== c) fail(`expected '${c}'`);
    i++;
  };
  const str = (): string => {
    ws();
    const q = text[i];
    if (q !== "'" && q !== '"') fail('expected a string');
    const end = text.indexOf(q!, i + 1);
    if (end < 0) fail('unterminated string');
    const s = text.slice(i + 1, end);
    if (s.includes('\\')) fail('escapes are not expected');
    i = end + 1;
    return s;
  };
  const value = (): unknown => {
    ws();
    if (text[i] === "'" || text[i] === '"') return str();
    if (text.startsWith('True', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('False', i)) {
      i += 5;
      return false;
    }
    if (text[i] === '(') {
      i++;
      const dims: number[] = [];
      for (;;) {
        ws();
        if (text[i] === ')') {
          i++;
          return dims;
        }
        const m = /^\d+L?/.exec(text.slice(i, i + 24));
        if (!m) fail('expected a dimension');
        dims.push(Number(m![0].replace('L', '')));
        i += m![0].length;
        ws();
        if (text[i] === ',') i++;
        else if (text[i] !== ')') fail("expected ',' or ')'");
      }
    }
    return fail('expected a string, True, False or a tuple');
  };
  const out: Record<string, unknown> = Object.create(null);
  expect('{');
  for (;;) {
    ws();
    if (text[i] === '}') {
      i++;
      break;
    }
    const k = str();
    expect(':');
    if (k in out) fail(`key '${k}' repeated`);
    out[k] = value();
    ws();
    if (text[i] === ',') i++;
    else if (text[i] !== '}') fail("expected ',' or '}'");
  }
  ws();
  if (i !== text.length) fail('unexpected text after the dict');
  return out;
}

/** Parses the header of a .npy file's first bytes (at least the whole header). */
export function parseNpyHeader(bytes: Uint8Array): NpyHeader {
  if (bytes.length < 10 || MAGIC.some((b, i) => bytes[i] !== b))
    throw bad('npy magic', Buffer.from(bytes.subarray(0, 6)).toString('latin1'), 'is not \\x93NUMPY: not a .npy file');
  const major = bytes[6]!,
    minor = bytes[7]!;
  if (major < 1 || major > 3 || minor !== 0) throw bad('npy version', `${major}.${minor}`, 'is not 1.0, 2.0 or 3.0');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const lenBytes = major === 1 ? 2 : 4;
  if (bytes.length < 8 + lenBytes) throw bad('npy header length', bytes.length, 'the file ends inside the header');
  const headerLen = major === 1 ? dv.getUint16(8, true) : dv.getUint32(8, true);
  const dataOffset = 8 + lenBytes + headerLen;
  if (dataOffset > bytes.length) throw bad('npy header length', headerLen, `runs past the end of the ${bytes.length} bytes read`);
  const raw = bytes.subarray(8 + lenBytes, dataOffset);
  let text: string;
  try {
    text = new TextDecoder(major === 3 ? 'utf-8' : 'latin1', { fatal: true }).decode(raw);
  } catch {
    throw bad('npy header', `${headerLen} bytes`, 'is not text');
  }
  const dict = parseLiteral(text);
  const keys = Object.keys(dict).sort().join(',');
  if (keys !== 'descr,fortran_order,shape') throw bad('npy header', keys, "must have exactly the keys 'descr', 'fortran_order' and 'shape'");
  const { descr, fortran_order: fortranOrder, shape } = dict as { descr: unknown; fortran_order: unknown; shape: unknown };
  if (typeof descr !== 'string') throw bad('npy descr', descr, "must be a string such as '<f4' (structured dtypes are not read)");
  const m = /^([<>|=])([a-z]\d+)$/.exec(descr);
  const type = m ? TYPES[m[2]!] : undefined;
  if (!m || !type) throw bad('npy descr', descr, `is not a type nn-arena reads (${Object.keys(TYPES).join(', ')}, little- or big-endian)`);
  if (typeof fortranOrder !== 'boolean') throw bad('npy fortran_order', fortranOrder, 'must be True or False');
  if (!Array.isArray(shape)) throw bad('npy shape', shape, 'must be a tuple of integers');
  let count = 1;
  for (const d of shape as number[]) {
    count *= d;
    if (!Number.isSafeInteger(d) || count > MAX_ELEMENTS) throw bad('npy shape', shape, `holds more than ${MAX_ELEMENTS} elements`);
  }
  const itemBytes = type[1].BYTES_PER_ELEMENT;
  // '|' is for single bytes only; '=' is the writer's native order, little-endian in practice.
  if (m[1] === '|' && itemBytes !== 1) throw bad('npy descr', descr, "'|' (no byte order) is for one-byte types");
  return { dtype: type[0], shape: shape as number[], fortranOrder, littleEndian: m[1] !== '>', dataOffset, count, itemBytes };
}

/** Row-major index order of a Fortran-order array (whose first dimension varies fastest). */
function transposeFortran<T extends NpyData>(src: T, shape: number[], make: (n: number) => T): T {
  const out = make(src.length);
  const n = shape.length;
  const strides = new Array<number>(n); // Fortran strides, in elements
  for (let k = 0, s = 1; k < n; k++) {
    strides[k] = s;
    s *= shape[k]!;
  }
  const idx = new Array<number>(n).fill(0);
  for (let i = 0; i < out.length; i++) {
    let f = 0;
    for (let k = 0; k < n; k++) f += idx[k]! * strides[k]!;
    (out as { [i: number]: unknown })[i] = (src as { [i: number]: unknown })[f];
    for (let k = n - 1; k >= 0; k--) {
      if (++idx[k]! < shape[k]!) break;
      idx[k] = 0;
    }
  }
  return out;
}

/** The data of a .npy file whose header is `h`, from `bytes` (the whole file). */
export function npyData(bytes: Uint8Array, h: NpyHeader, field = 'npy data'): NpyData {
  const need = h.count * h.itemBytes;
  if (bytes.length - h.dataOffset !== need)
    throw bad(field, bytes.length - h.dataOffset, `must be ${need} bytes (shape [${h.shape.join(', ')}] of ${h.dtype})`);
  const Type = TYPES[Object.keys(TYPES).find((k) => TYPES[k]![0] === h.dtype)!]![1];
  const at = bytes.byteOffset + h.dataOffset;
  let data: NpyData;
  if (h.littleEndian && at % h.itemBytes === 0) {
    data = new Type(bytes.buffer as ArrayBuffer, at, h.count); // a view: no copy
  } else {
    const copy = new Uint8Array(bytes.subarray(h.dataOffset, h.dataOffset + need)); // a copy (Buffer's slice would not be)
    if (!h.littleEndian) for (let i = 0; i < need; i += h.itemBytes) copy.subarray(i, i + h.itemBytes).reverse();
    data = new Type(copy.buffer, 0, h.count);
  }
  return h.fortranOrder && h.shape.length > 1 ? transposeFortran(data, h.shape, (n) => new Type(n)) : data;
}

/** Reads a .npy file (a path or its bytes). */
export function loadNpy(source: string | Uint8Array): NpyArray {
  const bytes = bytesOf(source);
  const h = parseNpyHeader(bytes);
  return { dtype: h.dtype, shape: h.shape, data: npyData(bytes, h) };
}

const DESCR: Record<string, string> = {
  Float32Array: '<f4',
  Float64Array: '<f8',
  Int8Array: '|i1',
  Uint8Array: '|u1',
  Int16Array: '<i2',
  Uint16Array: '<u2',
  Int32Array: '<i4',
  Uint32Array: '<u4',
  BigInt64Array: '<i8',
  BigUint64Array: '<u8',
};

/** The .npy type of a typed array (DataError BAD_DATA naming `data` for anything else). */
function descrOf(data: unknown): string {
  const descr = ArrayBuffer.isView(data) ? DESCR[Object.prototype.toString.call(data).slice(8, -1)] : undefined;
  if (!descr) throw new DataError('BAD_DATA', 'data', Object.prototype.toString.call(data), 'must be a typed array of numbers');
  return descr;
}

/** The header bytes of a version 1.0 .npy file of `data`'s type and `shape` (padded to 64 bytes,
 *  as NumPy writes it: the data after it starts aligned). */
export function npyHeader(data: NpyData, shape: readonly number[]): Uint8Array {
  const descr = descrOf(data);
  if (!Array.isArray(shape)) throw new DataError('BAD_DATA', 'shape', shape, `must be an array of whole numbers whose product is the ${data.length} elements`);
  const count = shape.reduce((a, d) => a * d, 1);
  if (shape.some((d) => !Number.isSafeInteger(d) || d < 0) || count !== data.length)
    throw new DataError('BAD_DATA', 'shape', shape, `must be whole numbers whose product is the ${data.length} elements`);
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  dict += ' '.repeat(63 - ((10 + dict.length) % 64)) + '\n';
  const out = new Uint8Array(10 + dict.length);
  out.set(MAGIC);
  out[6] = 1;
  new DataView(out.buffer).setUint16(8, dict.length, true);
  out.set(Buffer.from(dict, 'latin1'), 10);
  return out;
}

/** A whole .npy file of `data` (row-major) with `shape` (default: one dimension). */
export function toNpy(data: NpyData, shape?: readonly number[]): Uint8Array {
  descrOf(data); // before its length is read for the default shape
  const head = npyHeader(data, shape === undefined ? [data.length] : shape);
  const out = new Uint8Array(head.length + data.byteLength);
  out.set(head);
  out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), head.length);
  return out;
}
