// spec.ts: the network description a user writes, and its validation. Every refusal is a
// LayoutError naming the field and the value; nothing is clamped or rounded silently.
import { LayoutError, type LayoutCode } from '../errors.js';
import { ACTIVATIONS, DTYPES, MAX_LAYERS, OPTIMIZERS, ORDERS, type Activation, type Dtype, type Optimizer, type Order } from './header.js';

export interface LayoutSpec {
  /** Units per layer, input layer first (at least 2 layers). */
  layers: readonly number[];
  /** Rows per batch (z, d and y regions are batch x units). */
  batch: number;
  dtype?: Dtype;
  /** One per non-input layer. Default: relu for hidden layers, softmax for the output. */
  activations?: readonly Activation[];
  optimizer?: Optimizer;
  order?: Order;
  /** Alignment of every region start in bytes: a power of two >= 8 (default 256). */
  align?: number;
  /** Rows of a resident data set (xdata / ydata regions); default 0 = none. */
  samples?: number;
}

export interface NormalizedSpec {
  readonly layers: readonly number[];
  readonly batch: number;
  readonly dtype: Dtype;
  readonly activations: readonly Activation[];
  readonly optimizer: Optimizer;
  readonly order: Order;
  readonly align: number;
  readonly samples: number;
}

export const DEFAULT_ALIGN = 256;
const MAX_ALIGN = 2 ** 30;

function positiveInt(field: string, v: unknown, allowZero = false): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < (allowZero ? 0 : 1)) {
    throw new LayoutError(`BAD_${field.replace(/\[.*$/, '').toUpperCase()}` as LayoutCode, field, v,
      `must be a ${allowZero ? 'non-negative' : 'positive'} safe integer`);
  }
  return v;
}

function oneOf<T extends string>(field: string, v: unknown, table: Record<T, number>, fallback: T): T {
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !Object.prototype.hasOwnProperty.call(table, v)) {
    throw new LayoutError(`BAD_${field.toUpperCase()}` as LayoutCode, field, v, `must be one of ${Object.keys(table).map((k) => `'${k}'`).join(', ')}`);
  }
  return v as T;
}

/** Reads an array field once: its length, then each element once (holes read as undefined,
 *  so a sparse array is refused like any other missing value). */
function readArray(field: string, code: LayoutCode, v: unknown, max: number, what: string): unknown[] {
  if (!Array.isArray(v)) throw new LayoutError(code, field, v, `must be an array of ${what}`);
  const n: unknown = v.length;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || n > max) {
    throw new LayoutError(code, field, n, `must have at most ${max} entries`);
  }
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) out.push(v[i]);
  return out;
}

/** Every field of the spec is read exactly once, into a plain snapshot that is validated and
 *  then used alone: a getter or Proxy that answers differently on a second read cannot make
 *  the plan differ from what was checked. */
export function normalizeSpec(spec: LayoutSpec): NormalizedSpec {
  if (spec === null || typeof spec !== 'object') throw new LayoutError('BAD_SPEC', 'spec', spec, 'must be an object');
  const { layers: rawLayers, batch: rawBatch, dtype: rawDtype, activations: rawActivations, optimizer: rawOptimizer, order: rawOrder, align: rawAlign, samples: rawSamples } = spec;
  const layers = readArray('layers', 'BAD_LAYERS', rawLayers, MAX_LAYERS, 'unit counts');
  if (layers.length < 2) throw new LayoutError('BAD_LAYERS', 'layers', layers, 'needs at least 2 layers (input and output)');
  const units = layers.map((u, i) => positiveInt(`layers[${i}]`, u));
  const batch = positiveInt('batch', rawBatch);
  const samples = rawSamples === undefined ? 0 : positiveInt('samples', rawSamples, true);
  // A resident epoch's shuffle indexes samples in 32 bits (csrc/train/math.h permIndex).
  if (samples >= 2 ** 32) throw new LayoutError('BAD_SAMPLES', 'samples', samples, 'must be below 2^32 (rows of a resident data set)');
  const dtype = oneOf<Dtype>('dtype', rawDtype, DTYPES, 'float32');
  const optimizer = oneOf<Optimizer>('optimizer', rawOptimizer, OPTIMIZERS, 'sgd');
  const order = oneOf<Order>('order', rawOrder, ORDERS, 'layer-major');

  const align = rawAlign === undefined ? DEFAULT_ALIGN : rawAlign;
  if (typeof align !== 'number' || !Number.isInteger(align) || align < 8 || align > MAX_ALIGN || (align & (align - 1)) !== 0) {
    throw new LayoutError('BAD_ALIGN', 'align', align, `must be a power of two in [8, 2^30]`);
  }

  const n = units.length - 1;
  const activations = rawActivations === undefined
    ? [...Array<Activation>(n - 1).fill('relu'), 'softmax' as Activation]
    : readArray('activations', 'BAD_ACTIVATIONS', rawActivations, MAX_LAYERS, 'activation names');
  if (activations.length !== n) {
    throw new LayoutError('BAD_ACTIVATIONS', 'activations', activations, `must list one activation per non-input layer (${n})`);
  }
  activations.forEach((a, i) => {
    if (typeof a !== 'string' || a === 'input' || !Object.prototype.hasOwnProperty.call(ACTIVATIONS, a)) {
      throw new LayoutError('BAD_ACTIVATIONS', `activations[${i}]`, a, `must be one of 'identity', 'relu', 'sigmoid', 'tanh', 'softmax'`);
    }
    if (a === 'softmax' && i !== n - 1) {
      throw new LayoutError('BAD_ACTIVATIONS', `activations[${i}]`, a, 'softmax is only allowed on the output layer');
    }
  });
  return Object.freeze({ layers: Object.freeze(units), batch, dtype, activations: Object.freeze(activations as Activation[]), optimizer, order, align, samples });
}
