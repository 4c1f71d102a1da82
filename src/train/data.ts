// data.ts: checks and converts user data (inputs plus integer labels or target rows) before
// any of it reaches the arena. Every field and element is read exactly once, into a plain
// typed array of the arena's dtype (a snapshot); the checks run on the snapshot and only the
// snapshot is used, so getters, Proxies or another thread writing a SharedArrayBuffer cannot
// make the data used differ from the data checked. Each refusal is a DataError naming the
// field and the value.
import { DataError } from '../errors.js';
import type { Dtype } from '../layout/header.js';

export interface Data {
  /** count x inputs values, row-major. */
  x: ArrayLike<number>;
  /** Integer class labels in [0, outputs): one-hot targets are made from them. */
  labels?: ArrayLike<number>;
  /** Or count x outputs target values (one-hot rows for cross-entropy, any values for mse). */
  y?: ArrayLike<number>;
  /** Optional: the width the data was made for; must equal the input layer's units. */
  inputs?: number;
}

export type Values = Float32Array | Float64Array;

/** A checked copy of a data set in the arena's dtype. */
export interface Snapshot {
  readonly count: number;
  /** count x inputs */
  readonly x: Values;
  /** count x outputs targets (one-hot rows for labels); undefined for inputs only (predict). */
  readonly y: Values | undefined;
}

// The real length and element type of a typed array, from its internal slots: a subclass or
// an own property cannot fake them (and the getters throw for anything else).
const TypedArrayProto = Object.getPrototypeOf(Int8Array.prototype) as object;
const taLength = Object.getOwnPropertyDescriptor(TypedArrayProto, 'length')!.get!;
const taTag = Object.getOwnPropertyDescriptor(TypedArrayProto, Symbol.toStringTag)!.get!;

function typedLength(v: object): number | undefined {
  try { return taLength.call(v) as number; } catch { return undefined; }
}

/** A real typed array of numbers (not BigInts; by its internal slots) and its length, or undefined. */
export function numericTypedLength(v: unknown): number | undefined {
  if (v === null || typeof v !== 'object') return undefined;
  const n = typedLength(v);
  if (n === undefined) return undefined;
  const tag = taTag.call(v) as string;
  return tag === 'BigInt64Array' || tag === 'BigUint64Array' ? undefined : n;
}

const MAX_ELEMENTS = 2 ** 32 - 1;

function alloc(dtype: Dtype, n: number, field: string): Values {
  try {
    return dtype === 'float64' ? new Float64Array(n) : new Float32Array(n);
  } catch {
    throw new DataError('DATA_TOO_LARGE', `${field}.length`, n, 'is too large to hold in memory');
  }
}

/** Reads `v` (an array-like of numbers) once into a new array of `dtype`; checks that every
 *  element is a number that is finite in that dtype (1e39 is Infinity in float32). */
export function snapshotNumbers(v: unknown, field: string, dtype: Dtype, expectLength?: (n: number) => void): Values {
  if (v === null || typeof v !== 'object') throw new DataError('BAD_DATA', field, v, 'must be an array or typed array of numbers');
  const tl = typedLength(v);
  let out: Values;
  if (tl !== undefined) {
    const tag = taTag.call(v) as string;
    if (tag === 'BigInt64Array' || tag === 'BigUint64Array') throw new DataError('BAD_DATA', field, tag, 'must hold numbers, not BigInts');
    expectLength?.(tl);
    out = alloc(dtype, tl, field);
    out.set(v as Values);  // one native pass over the internal slots
  } else {
    let n: unknown;
    try { n = (v as { length?: unknown }).length; } catch (e) { throw new DataError('BAD_DATA', `${field}.length`, undefined, `could not be read (${(e as Error)?.message})`); }
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || n > MAX_ELEMENTS) {
      throw new DataError('BAD_DATA', `${field}.length`, n, 'must be an array length');
    }
    expectLength?.(n);
    out = alloc(dtype, n, field);
    const src = v as ArrayLike<unknown>;
    for (let i = 0; i < n; i++) {
      const e = src[i];
      if (typeof e !== 'number') throw new DataError('BAD_DATA', `${field}[${i}]`, e, 'is not a number');
      out[i] = e;
    }
  }
  for (let i = 0; i < out.length; i++) {
    if (!Number.isFinite(out[i]!)) throw new DataError('BAD_DATA', `${field}[${i}]`, out[i], `is not a finite ${dtype} number`);
  }
  return out;
}

/** Reads one data object: { x, labels } or { x, y }; `targets: false` reads x alone. */
export function snapshotData(data: unknown, inputs: number, outputs: number, dtype: Dtype, field = 'data', targets = true): Snapshot {
  if (data === null || typeof data !== 'object') throw new DataError('BAD_DATA', field, data, targets ? 'must be an object { x, labels } or { x, y }' : 'must be an object { x }');
  // One read of each field.
  const { x, labels, y, inputs: declared } = data as Data;
  if (declared !== undefined && declared !== inputs) {
    throw new DataError('BAD_DATA_WIDTH', `${field}.inputs`, declared, `does not match the input layer's ${inputs} units`);
  }
  const xs = snapshotNumbers(x, `${field}.x`, dtype, (n) => {
    if (n === 0 || n % inputs !== 0) throw new DataError('BAD_DATA_WIDTH', `${field}.x.length`, n, `is not a positive multiple of the input layer's ${inputs} units`);
  });
  const count = xs.length / inputs;
  if (!targets) return { count, x: xs, y: undefined };
  if ((labels === undefined) === (y === undefined)) {
    throw new DataError('BAD_DATA', field, labels === undefined ? 'neither' : 'both', 'needs exactly one of labels or y');
  }
  if (labels !== undefined) {
    const ls = snapshotNumbers(labels, `${field}.labels`, 'float64', (n) => {
      if (n !== count) throw new DataError('BAD_DATA', `${field}.labels.length`, n, `must equal the ${count} samples in x`);
    });
    const ys = alloc(dtype, count * outputs, `${field}.labels`);
    for (let i = 0; i < count; i++) {
      const v = ls[i]!;
      if (!Number.isInteger(v) || v < 0 || v >= outputs) throw new DataError('BAD_LABEL', `${field}.labels[${i}]`, v, `is not a class in [0, ${outputs - 1}]`);
      ys[i * outputs + v] = 1;
    }
    return { count, x: xs, y: ys };
  }
  const ys = snapshotNumbers(y, `${field}.y`, dtype, (n) => {
    if (n !== count * outputs) throw new DataError('BAD_DATA_WIDTH', `${field}.y.length`, n, `must be ${count} samples x ${outputs} outputs = ${count * outputs}`);
  });
  return { count, x: xs, y: ys };
}
