// data.ts: checks and converts user data (inputs plus integer labels or target rows) before
// any of it reaches the arena. Each refusal is a DataError naming the field and the value.
import { DataError } from '../errors.js';

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

export interface CheckedData {
  readonly count: number;
  readonly x: ArrayLike<number>;
  /** Writes the target row of sample i into dst (outputs values). */
  target(i: number, dst: Float32Array | Float64Array, at: number): void;
}

export function checkData(data: Data, inputs: number, outputs: number, field = 'data'): CheckedData {
  if (data === null || typeof data !== 'object') throw new DataError('BAD_DATA', field, data, 'must be an object { x, labels } or { x, y }');
  const { x, labels, y } = data;
  if (data.inputs !== undefined && data.inputs !== inputs) {
    throw new DataError('BAD_DATA_WIDTH', `${field}.inputs`, data.inputs, `does not match the input layer's ${inputs} units`);
  }
  if (!x || typeof x.length !== 'number') throw new DataError('BAD_DATA', `${field}.x`, x, 'must be an array of numbers');
  if (x.length === 0 || x.length % inputs !== 0) {
    throw new DataError('BAD_DATA_WIDTH', `${field}.x.length`, x.length, `is not a positive multiple of the input layer's ${inputs} units`);
  }
  const count = x.length / inputs;
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new DataError('BAD_DATA', `${field}.x[${i}]`, v, `is not a finite number (sample ${Math.floor(i / inputs)})`);
  }
  if ((labels === undefined) === (y === undefined)) throw new DataError('BAD_DATA', field, Object.keys(data), 'needs exactly one of labels or y');
  if (labels !== undefined) {
    if (labels.length !== count) throw new DataError('BAD_DATA', `${field}.labels.length`, labels.length, `must equal the ${count} samples in x`);
    for (let i = 0; i < count; i++) {
      const v = labels[i]!;
      if (!Number.isInteger(v) || v < 0 || v >= outputs) throw new DataError('BAD_LABEL', `${field}.labels[${i}]`, v, `is not a class in [0, ${outputs - 1}]`);
    }
    return {
      count, x,
      target: (i, dst, at) => { dst.fill(0, at, at + outputs); dst[at + labels[i]!] = 1; },
    };
  }
  if (y!.length !== count * outputs) throw new DataError('BAD_DATA_WIDTH', `${field}.y.length`, y!.length, `must be ${count} samples x ${outputs} outputs = ${count * outputs}`);
  for (let i = 0; i < y!.length; i++) {
    const v = y![i]!;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new DataError('BAD_DATA', `${field}.y[${i}]`, v, 'is not a finite number');
  }
  return {
    count, x,
    target: (i, dst, at) => { for (let j = 0; j < outputs; j++) dst[at + j] = y![i * outputs + j]!; },
  };
}
