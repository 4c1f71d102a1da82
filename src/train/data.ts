// data.ts: checks and converts user data (inputs plus integer labels or target rows) on its way
// into the arena. Every field and element is read exactly once, into the arena's own host
// region where the caller can write it now (the data regions, a batch's z[0] and y), else into
// a new typed array of the arena's dtype (a snapshot); typed arrays natively, in one pass
// (csrc/core/checked_copy.h). The checks run on the values written and only those are used, so
// getters, Proxies or another thread writing a SharedArrayBuffer cannot make the data used
// differ from the data checked. Each refusal is a DataError naming the field and the value.
import { DataError } from '../core/errors.js';
import type { Dtype } from '../layout/header.js';
import { native } from '../native/addon.js';
import type { Data } from '../formats/table.js';

export type { Data };

export type Values = Float32Array | Float64Array;

/** A checked copy of a data set in the arena's dtype. */
export interface Snapshot {
  readonly count: number;
  /** count x inputs */
  readonly x: Values;
  /** count x outputs targets (one-hot rows for labels); undefined for inputs only (predict). */
  readonly y: Values | undefined;
  /** Read into an arena's regions with `compare`: whether their bytes changed. */
  readonly xChanged?: boolean;
  readonly yChanged?: boolean;
  /** x and y are already the first arena's host rows: of its data regions ('data':
   *  src/train/resident.ts) or of a batch's z[0] and y ('batch': src/train/runner.ts). */
  readonly staged?: 'data' | 'batch';
}

// The real length and element type of a typed array, from its internal slots: a subclass or
// an own property cannot fake them (and the getters throw for anything else).
const TypedArrayProto = Object.getPrototypeOf(Int8Array.prototype) as object;
const taLength = Object.getOwnPropertyDescriptor(TypedArrayProto, 'length')!.get!;
const taTag = Object.getOwnPropertyDescriptor(TypedArrayProto, Symbol.toStringTag)!.get!;

function typedLength(v: object): number | undefined {
  try {
    return taLength.call(v) as number;
  } catch {
    return undefined;
  }
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

/** Where read values go: a view of `n` values of the arena's dtype (an arena region's host
 *  side, or a new array). */
export type Dest = (n: number) => Values;

/** What a read wrote: the values, and whether any differ from what the destination held. */
export interface Read {
  values: Values;
  changed: boolean;
}

const alloc$ =
  (dtype: Dtype, field: string): Dest =>
  (n) =>
    alloc(dtype, n, field);

export function notFinite(field: string, i: number, value: number, dtype: Dtype): DataError {
  return new DataError('BAD_DATA', `${field}[${i}]`, value, `is not a finite ${dtype} number`);
}

/** Reads `v` (an array-like of numbers) once into `dest(length)`, checking that every element
 *  is a number that is finite in `dtype` (1e39 is Infinity in float32). A typed array is read
 *  natively in one pass (convert, check, compare, write: csrc/core/checked_copy.h); other
 *  array-likes element by element. `compare`: also tell whether the destination changed. On a
 *  refusal the destination may hold some of the values. */
export function readNumbers(v: unknown, field: string, dtype: Dtype, dest: Dest, expectLength?: (n: number) => void, compare = false): Read {
  if (v === null || typeof v !== 'object') throw new DataError('BAD_DATA', field, v, 'must be an array or typed array of numbers');
  const tl = typedLength(v);
  let out: Values;
  let changed = false;
  if (tl !== undefined) {
    const tag = taTag.call(v) as string;
    if (tag === 'BigInt64Array' || tag === 'BigUint64Array') throw new DataError('BAD_DATA', field, tag, 'must hold numbers, not BigInts');
    expectLength?.(tl);
    out = dest(tl);
    const r = native().checkedCopy(out, v as ArrayBufferView, compare);
    if (typeof r === 'boolean') return { values: out, changed: r };
    if (r !== null) throw notFinite(field, r[0], r[1], dtype);
    // A typed array the native copy does not read (Float16Array): one native pass over its
    // internal slots into a copy, then the same checks in JS.
    const copy = alloc(dtype, tl, field);
    copy.set(v as Values);
    for (let i = 0; i < tl; i++) {
      const e = copy[i]!;
      if (!Number.isFinite(e)) throw notFinite(field, i, e, dtype);
      if (compare && !changed && !Object.is(out[i], e)) changed = true;
    }
    out.set(copy);
    return { values: out, changed };
  }
  let n: unknown;
  try {
    n = (v as { length?: unknown }).length;
  } catch (e) {
    throw new DataError('BAD_DATA', `${field}.length`, undefined, `could not be read (${(e as Error)?.message})`);
  }
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || n > MAX_ELEMENTS) {
    throw new DataError('BAD_DATA', `${field}.length`, n, 'must be an array length');
  }
  expectLength?.(n);
  out = dest(n);
  const src = v as ArrayLike<unknown>;
  for (let i = 0; i < n; i++) {
    const e = src[i]; // read once
    if (typeof e !== 'number') throw new DataError('BAD_DATA', `${field}[${i}]`, e, 'is not a number');
    const before = out[i]!;
    out[i] = e;
    const stored = out[i]!; // the dtype's value (float32 rounds; 1e39 is Infinity)
    if (!Number.isFinite(stored)) throw notFinite(field, i, stored, dtype);
    if (compare && !changed && !Object.is(before, stored)) changed = true;
  }
  return { values: out, changed };
}

/** Reads `v` once into a new array of `dtype` (readNumbers). */
export function snapshotNumbers(v: unknown, field: string, dtype: Dtype, expectLength?: (n: number) => void): Values {
  return readNumbers(v, field, dtype, alloc$(dtype, field), expectLength).values;
}

/** Labels read once into `count` one-hot rows of `outputs` values at dest(count * outputs): a
 *  label must be finite (BAD_DATA) and a class in [0, outputs) (BAD_LABEL). */
export function readLabels(v: unknown, field: string, count: number, outputs: number, dest: Dest, compare = false): Read {
  const expect = (n: number) => {
    if (n !== count) throw new DataError('BAD_DATA', `${field}.length`, n, `must equal the ${count} samples in x`);
  };
  const badLabel = (i: number, value: number) => new DataError('BAD_LABEL', `${field}[${i}]`, value, `is not a class in [0, ${outputs - 1}]`);
  const tl = numericTypedLength(v);
  if (tl !== undefined) {
    expect(tl);
    const out = dest(count * outputs);
    const r = native().oneHot(out, v as ArrayBufferView, outputs, compare);
    if (typeof r === 'boolean') return { values: out, changed: r };
    if (r !== null) throw r[2] ? badLabel(r[0], r[1]) : notFinite(field, r[0], r[1], 'float64');
  }
  const ls = snapshotNumbers(v, field, 'float64', expect);
  const out = dest(count * outputs);
  let changed = false;
  for (let i = 0; i < count; i++) {
    const k = ls[i]!;
    if (!Number.isInteger(k) || k < 0 || k >= outputs) throw badLabel(i, k);
    for (let j = 0; j < outputs; j++) {
      const e = j === k ? 1 : 0;
      if (compare && !changed && out[i * outputs + j] !== e) changed = true;
      out[i * outputs + j] = e;
    }
  }
  return { values: out, changed };
}

/** Where snapshotData writes x and the target rows (default: new arrays), and whether to tell
 *  what changed there. */
export interface Into {
  x: Dest;
  y: Dest;
  compare: boolean;
}

/** Reads one data object: { x, labels } or { x, y }; `targets: false` reads x alone. `into`:
 *  where the values go (an arena's regions: src/train/resident.ts), else new arrays. */
export function snapshotData(data: unknown, inputs: number, outputs: number, dtype: Dtype, field = 'data', targets = true, into?: Into): Snapshot {
  if (data === null || typeof data !== 'object')
    throw new DataError('BAD_DATA', field, data, targets ? 'must be an object { x, labels } or { x, y }' : 'must be an object { x }');
  // One read of each field.
  const { x, labels, y, inputs: declared } = data as Data;
  if (declared !== undefined && declared !== inputs) {
    throw new DataError('BAD_DATA_WIDTH', `${field}.inputs`, declared, `does not match the input layer's ${inputs} units`);
  }
  const compare = into?.compare ?? false;
  // Both fields' shapes are checked before either is written: a refused call leaves the
  // destination as it was where it can.
  if (targets && (labels === undefined) === (y === undefined)) {
    throw new DataError('BAD_DATA', field, labels === undefined ? 'neither' : 'both', 'needs exactly one of labels or y');
  }
  const xr = readNumbers(
    x,
    `${field}.x`,
    dtype,
    into?.x ?? alloc$(dtype, `${field}.x`),
    (n) => {
      if (n === 0 || n % inputs !== 0)
        throw new DataError('BAD_DATA_WIDTH', `${field}.x.length`, n, `is not a positive multiple of the input layer's ${inputs} units`);
    },
    compare,
  );
  const count = xr.values.length / inputs;
  if (!targets) return { count, x: xr.values, y: undefined, xChanged: xr.changed, yChanged: false };
  const yDest = into?.y ?? alloc$(dtype, `${field}.labels`);
  const yr =
    labels !== undefined
      ? readLabels(labels, `${field}.labels`, count, outputs, yDest, compare)
      : readNumbers(
          y,
          `${field}.y`,
          dtype,
          yDest,
          (n) => {
            if (n !== count * outputs)
              throw new DataError('BAD_DATA_WIDTH', `${field}.y.length`, n, `must be ${count} samples x ${outputs} outputs = ${count * outputs}`);
          },
          compare,
        );
  return { count, x: xr.values, y: yr.values, xChanged: xr.changed, yChanged: yr.changed };
}
