// spec.ts: the network description a user writes, and its validation. Every refusal is a
// LayoutError naming the field and the value; nothing is clamped or rounded silently.
import { LayoutError, type LayoutCode } from '../core/errors.js';
import { checkKnownKeys, keysOf } from '../core/known-keys.js';
import { namesOf, optimizerNamed, optimizers } from './optimizers.js';
import {
  ACTIVATIONS,
  activationInfo,
  DTYPES,
  OP_CODES,
  EXTRA_LIKE,
  EXTRA_NAME_BYTES,
  KINDS,
  MAX_EXTRAS,
  MAX_LAYERS,
  MAX_MODELS,
  ORDERS,
  type Activation,
  type Dtype,
  type ExtraLike,
  type OpName,
  type Optimizer,
  type Order,
} from './header.js';
import { FORMAT } from '../native/tables.generated.js';
import { DENSE_KEYS, readOp, type LayerOp, type OpLayerSpec } from './ops/index.js';

export type { EmbeddingOp, LayerOp, OpLayerSpec } from './ops/index.js';

/** A user region: per layer, shaped like a built-in kind (`like`, or its alias `per`), in every
 *  layer that has that kind or in `layers`; or one global region of `bytes` raw bytes. */
export interface ExtraSpec {
  /** [A-Za-z_][A-Za-z0-9_]*, at most 31 characters, not a built-in kind nor 'header' / 'padding'. */
  name: string;
  like?: ExtraLike;
  /** The same as `like` (give one of them). */
  per?: ExtraLike;
  /** With like / per: the layers that get one (default: every layer that has that kind). */
  layers?: readonly number[];
  /** A global region of this many bytes (instead of like / per). */
  bytes?: number;
}

/** An ExtraSpec as planned: per-layer (like, sorted layers) or global raw bytes. */
export type NormalizedExtra =
  | { readonly name: string; readonly like: ExtraLike; readonly layers: readonly number[]; readonly bytes?: undefined }
  | { readonly name: string; readonly like?: undefined; readonly layers?: undefined; readonly bytes: number };

/** A layer of `layers` beyond a unit count (which is a dense layer with the default
 *  activation): a dense layer with its activation (none: identity), or an op that keeps the
 *  width (docs/ops.md): nn.LayerNorm, nn.RMSNorm, inverted dropout, or the sum of the layer
 *  before and an earlier layer `from` of the same width. The input and output layers are dense. */
export type LayerSpec = number | { readonly op?: 'dense'; readonly units: number; readonly activation?: Activation } | OpLayerSpec;

/** L: what `layers` holds; LayoutSpec<LayerSpec> for a spec with layer objects (planLayout
 *  takes either). */
export interface LayoutSpec<L extends LayerSpec = number> {
  /** Units per layer, input layer first (at least 2 layers); a non-input entry may be a layer
   *  object instead (LayerSpec: a dense layer with its activation, or an op). */
  layers: readonly L[];
  /** Rows per batch (z, d and y regions are batch x units). */
  batch: number;
  dtype?: Dtype;
  /** One per non-input layer. Default: relu for hidden layers, softmax for the output. The
   *  table: README, "Activations and losses". */
  activations?: readonly Activation[];
  /** The negative slope of every leaky-relu layer (finite, >= 0; default 0.01, PyTorch's). */
  leakyReluSlope?: number;
  optimizer?: Optimizer;
  order?: Order;
  /** Alignment of every region start in bytes: a power of two >= 8 (default 256). */
  align?: number;
  /** Rows of a resident data set (xdata / ydata regions); default 0 = none. */
  samples?: number;
  /** User regions (at most 64): planned, viewed, transferred and saved like built-in kinds,
   *  never touched by nn-arena's training (docs/embedding.md). */
  extra?: readonly ExtraSpec[];
  /** Regions never live at the same time share bytes, and an SGD plan has no dw (default false).
   *  Shared regions hold scratch between runs; gradients cannot be read (trainer.gradients()). */
  compact?: boolean;
  /** Independent networks of this shape in the arena (default 1, at most 65535): every
   *  per-model region holds K copies; the batch, targets and data set are shared. */
  models?: number;
  /** One op per non-input layer, with numeric `layers` and `activations` (identity on every op
   *  but dense): the form a normalized spec keeps; layer objects say the same thing. */
  ops?: readonly LayerOp[];
}

/** The dtype a spec plans: its `dtype`, 'float32' where it has none (Dtype where unknown). */
export type DtypeOf<S> = 'dtype' extends keyof S ? (S extends { dtype?: infer D } ? (D extends Dtype ? D : 'float32') : Dtype) : 'float32';

export interface NormalizedSpec<D extends Dtype = Dtype> {
  readonly layers: readonly number[];
  readonly batch: number;
  readonly dtype: D;
  readonly activations: readonly Activation[];
  /** The slope of the leaky-relu layers (the header's act_param); only where a layer is
   *  leaky-relu, so that a normalized spec is a valid spec again. */
  readonly leakyReluSlope?: number;
  readonly optimizer: Optimizer;
  readonly order: Order;
  readonly align: number;
  readonly samples: number;
  readonly extra: readonly NormalizedExtra[];
  readonly compact: boolean;
  readonly models: number;
  /** One per non-input layer, where some layer is not dense (else absent). */
  readonly ops?: readonly LayerOp[];
}

const SPEC_KEYS = keysOf<LayoutSpec<LayerSpec>>()([
  'layers',
  'batch',
  'dtype',
  'activations',
  'leakyReluSlope',
  'optimizer',
  'order',
  'align',
  'samples',
  'extra',
  'compact',
  'models',
  'ops',
]);
const EXTRA_KEYS = keysOf<ExtraSpec>()(['name', 'like', 'per', 'layers', 'bytes']);

export const DEFAULT_ALIGN = 256;

function positiveInt(field: string, v: unknown, allowZero = false): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < (allowZero ? 0 : 1)) {
    throw new LayoutError(
      `BAD_${field.replace(/\[.*$/, '').toUpperCase()}` as LayoutCode,
      field,
      v,
      `must be a ${allowZero ? 'non-negative' : 'positive'} safe integer`,
    );
  }
  return v;
}

function oneOf<T extends string>(field: string, v: unknown, table: Record<T, number>, fallback: T): T {
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !Object.prototype.hasOwnProperty.call(table, v)) {
    throw new LayoutError(
      `BAD_${field.toUpperCase()}` as LayoutCode,
      field,
      v,
      `must be one of ${Object.keys(table)
        .map((k) => `'${k}'`)
        .join(', ')}`,
    );
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
export function normalizeSpec(spec: LayoutSpec<LayerSpec>): NormalizedSpec {
  if (spec === null || typeof spec !== 'object') throw new LayoutError('BAD_SPEC', 'spec', spec, 'must be an object');
  checkKnownKeys(spec, SPEC_KEYS, 'planLayout');
  const {
    layers: rawLayers,
    batch: rawBatch,
    dtype: rawDtype,
    activations: rawActivations,
    leakyReluSlope: rawSlope,
    optimizer: rawOptimizer,
    order: rawOrder,
    align: rawAlign,
    samples: rawSamples,
    compact: rawCompact,
    models: rawModels,
    extra: rawExtra,
    ops: rawOps,
  } = spec;
  const layers = readArray('layers', 'BAD_LAYERS', rawLayers, MAX_LAYERS, 'unit counts or layer objects');
  if (layers.length < 2) throw new LayoutError('BAD_LAYERS', 'layers', layers, 'needs at least 2 layers (input and output)');
  const dtypeEarly = oneOf<Dtype>('dtype', rawDtype, DTYPES, 'float32');
  const read = readLayers(layers, rawOps, rawActivations, dtypeEarly);
  const units = read.units;
  const batch = positiveInt('batch', rawBatch);
  const samples = rawSamples === undefined ? 0 : positiveInt('samples', rawSamples, true);
  // A resident epoch's shuffle indexes samples in 32 bits (csrc/train/math.h permIndex).
  if (samples > FORMAT.maxSamples)
    throw new LayoutError('BAD_SAMPLES', 'samples', samples, `must be below 2^${Math.log2(FORMAT.maxSamples + 1)} (rows of a resident data set)`);
  const models = rawModels === undefined ? 1 : positiveInt('models', rawModels);
  if (models > MAX_MODELS) throw new LayoutError('BAD_MODELS', 'models', models, `must be at most ${MAX_MODELS}`);
  const dtype = dtypeEarly;
  const optimizer = rawOptimizer === undefined ? 'sgd' : rawOptimizer;
  if (!optimizerNamed(optimizer)) throw new LayoutError('BAD_OPTIMIZER', 'optimizer', rawOptimizer, `must be one of ${namesOf(optimizers())}`);
  const order = oneOf<Order>('order', rawOrder, ORDERS, 'layer-major');

  const align = rawAlign === undefined ? DEFAULT_ALIGN : rawAlign;
  if (typeof align !== 'number' || !Number.isInteger(align) || align < FORMAT.minAlign || align > FORMAT.maxAlign || (align & (align - 1)) !== 0) {
    throw new LayoutError('BAD_ALIGN', 'align', align, `must be a power of two in [${FORMAT.minAlign}, 2^${Math.log2(FORMAT.maxAlign)}]`);
  }

  if (rawCompact !== undefined && typeof rawCompact !== 'boolean') throw new LayoutError('BAD_SPEC', 'compact', rawCompact, 'must be true or false');
  const compact = rawCompact === true;
  // compact or user regions with models > 1: refused by the native rule (planLayout, regionRules).

  const n = units.length - 1;
  const activations =
    rawActivations === undefined
      ? read.activations.map((a, i) => a ?? (i === n - 1 ? 'softmax' : 'relu'))
      : readArray('activations', 'BAD_ACTIVATIONS', rawActivations, MAX_LAYERS, 'activation names');
  if (activations.length !== n) {
    throw new LayoutError('BAD_ACTIVATIONS', 'activations', activations, `must list one activation per non-input layer (${n})`);
  }
  const names = Object.keys(ACTIVATIONS).filter((a) => a !== 'input');
  activations.forEach((a, i) => {
    if (typeof a !== 'string' || a === 'input' || !Object.prototype.hasOwnProperty.call(ACTIVATIONS, a)) {
      throw new LayoutError('BAD_ACTIVATIONS', `activations[${i}]`, a, `must be one of ${names.map((x) => `'${x}'`).join(', ')}`);
    }
    const info = activationInfo(a as Activation);
    if (!(i === n - 1 ? info.output : info.hidden)) {
      throw new LayoutError(
        'BAD_ACTIVATIONS',
        `activations[${i}]`,
        a,
        `is allowed on ${info.hidden ? 'hidden layers' : 'the output layer'} only (${i === n - 1 ? 'this is the output layer' : 'this is a hidden layer'})`,
      );
    }
  });
  // The one activation parameter (the header's act_param): leaky-relu's slope, >= 0 so that its
  // f' can come from the output (z > 0 exactly where x > 0).
  const param = (activations as Activation[]).map(activationInfo).find((x) => x.param !== 0);
  if (rawSlope !== undefined && !param)
    throw new LayoutError('BAD_ACTIVATIONS', 'leakyReluSlope', rawSlope, 'applies to leaky-relu layers; no layer is leaky-relu');
  if (rawSlope !== undefined && (typeof rawSlope !== 'number' || !Number.isFinite(rawSlope) || rawSlope < 0)) {
    throw new LayoutError('BAD_ACTIVATIONS', 'leakyReluSlope', rawSlope, 'must be a finite number >= 0');
  }
  const slope = param ? { leakyReluSlope: rawSlope ?? param.param } : {};
  const ops = read.ops;
  ops?.forEach((o, i) => {
    if (o.op !== 'dense' && activations[i] !== 'identity')
      throw new LayoutError('BAD_ACTIVATIONS', `activations[${i}]`, activations[i], `layer ${i + 1} is a ${o.op} layer: its activation is 'identity'`);
  });
  const extra = normalizeExtras(rawExtra, units.length);
  return Object.freeze({
    layers: Object.freeze(units),
    batch,
    dtype,
    activations: Object.freeze(activations as Activation[]),
    ...slope,
    optimizer,
    order,
    align,
    samples,
    compact,
    models,
    extra,
    ...(ops ? { ops } : {}),
  });
}

/** The units, the activations layer objects give (undefined: the default; per non-input layer)
 *  and the ops (undefined where every layer is dense) of `layers` (each entry read once) or of
 *  numeric layers with `ops`. */
function readLayers(layers: unknown[], rawOps: unknown, rawActivations: unknown, dtype: Dtype) {
  const units: number[] = [];
  const activations: Array<Activation | undefined> = [];
  const ops: LayerOp[] = [];
  const objects = layers.some((x) => typeof x === 'object' && x !== null);
  if (objects && rawOps !== undefined)
    throw new LayoutError('BAD_LAYERS', 'ops', rawOps, 'give the ops as layer objects in layers, or as ops with numeric layers, not both');
  if (objects && rawActivations !== undefined)
    throw new LayoutError('BAD_ACTIVATIONS', 'activations', rawActivations, 'layers holds layer objects: give each dense layer its activation there');
  const given = rawOps === undefined ? undefined : readArray('ops', 'BAD_LAYERS', rawOps, MAX_LAYERS, 'layer ops');
  if (given && given.length !== layers.length - 1)
    throw new LayoutError('BAD_LAYERS', 'ops', given, `must list one op per non-input layer (${layers.length - 1})`);
  layers.forEach((raw, l) => {
    const at = `layers[${l}]`;
    const entry = given && l > 0 ? given[l - 1] : raw;
    if (given && l > 0 && (entry === null || typeof entry !== 'object'))
      throw new LayoutError('BAD_LAYERS', `ops[${l - 1}]`, entry, "must be an object { op: 'dense' | ... }");
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      units.push(positiveInt(at, raw));
      if (l > 0) {
        activations.push(undefined);
        ops.push({ op: 'dense' });
      }
      return;
    }
    if (l === 0)
      throw new LayoutError(
        'BAD_LAYERS',
        at,
        raw,
        'categorical' in entry
          ? "the input layer is a unit count (x's columns); categorical columns go in layer 1: { op: 'embedding', numeric, categorical }"
          : 'the input layer is a unit count',
      );
    const field = given ? `ops[${l - 1}]` : at;
    const o = entry as Record<string, unknown>;
    const op: unknown = o.op ?? 'dense';
    if (typeof op !== 'string' || !Object.prototype.hasOwnProperty.call(OP_CODES, op))
      throw new LayoutError(
        'BAD_LAYERS',
        `${field}.op`,
        op,
        `must be one of ${Object.keys(OP_CODES)
          .map((k) => `'${k}'`)
          .join(', ')}`,
      );
    if (op === 'dense') {
      checkKnownKeys(o, given ? ['op'] : DENSE_KEYS, 'a dense layer', field);
      units.push(given ? positiveInt(at, raw) : positiveInt(`${at}.units`, o.units));
      activations.push(given ? undefined : ((o.activation ?? 'identity') as Activation));
      ops.push({ op: 'dense' });
      return;
    }
    if (l === layers.length - 1) throw new LayoutError('BAD_LAYERS', `${field}.op`, op, 'the output layer is dense (give it units and an activation)');
    const read = readOp(op as Exclude<OpName, 'dense'>, o, { field, l, units, dtype });
    if (given && raw !== read.width)
      throw new LayoutError(
        'BAD_LAYERS',
        at,
        raw,
        `layer ${l} is a ${op} layer of ${read.width} units (${op === 'embedding' ? 'numeric + the dims' : 'the width of the layer before'})`,
      );
    units.push(read.width);
    activations.push('identity');
    ops.push(read.op);
  });
  return { units, activations, ops: ops.some((o) => o.op !== 'dense') ? Object.freeze(ops.map((o) => Object.freeze(o))) : undefined };
}

const RESERVED_NAMES: readonly string[] = [...KINDS, 'header', 'padding', 'shared'];
const NAME = new RegExp(`^[A-Za-z_][A-Za-z0-9_]{0,${EXTRA_NAME_BYTES - 2}}$`);

/** Which layers have a region of kind `like` (z: every layer; b, w: every layer but the input). */
const layersWith = (like: ExtraLike, L: number): number[] => Array.from({ length: L }, (_, l) => l).filter((l) => like === 'z' || l > 0);

function normalizeExtras(raw: unknown, L: number): readonly NormalizedExtra[] {
  if (raw === undefined) return Object.freeze([]);
  const list = readArray('extra', 'BAD_EXTRA', raw, MAX_EXTRAS, 'user regions ({ name, like | per, layers? } or { name, bytes })');
  const seen = new Set<string>();
  return Object.freeze(
    list.map((e, i): NormalizedExtra => {
      const at = `extra[${i}]`;
      if (e === null || typeof e !== 'object' || Array.isArray(e))
        throw new LayoutError('BAD_EXTRA', at, e, 'must be an object { name, like | per, layers? } or { name, bytes }');
      checkKnownKeys(e, EXTRA_KEYS, 'a user region', at);
      const { name, like: rawLike, per, layers: rawLayers, bytes } = e as ExtraSpec;
      if (typeof name !== 'string' || !NAME.test(name)) {
        throw new LayoutError('BAD_EXTRA', `${at}.name`, name, `must match [A-Za-z_][A-Za-z0-9_]* and be at most ${EXTRA_NAME_BYTES - 1} characters`);
      }
      if (RESERVED_NAMES.includes(name)) throw new LayoutError('BAD_EXTRA', `${at}.name`, name, `is reserved (${RESERVED_NAMES.join(', ')})`);
      if (seen.has(name)) throw new LayoutError('BAD_EXTRA', `${at}.name`, name, 'repeats the name of an earlier user region');
      seen.add(name);
      if (rawLike !== undefined && per !== undefined) throw new LayoutError('BAD_EXTRA', `${at}.per`, per, "give 'like' or 'per' (the same thing), not both");
      const like: unknown = rawLike ?? per;
      const likeField = rawLike !== undefined ? 'like' : 'per';
      if (bytes !== undefined) {
        if (like !== undefined || rawLayers !== undefined)
          throw new LayoutError('BAD_EXTRA', `${at}.bytes`, bytes, "a region of raw bytes is global: no 'like', 'per' or 'layers'");
        if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 1)
          throw new LayoutError('BAD_EXTRA', `${at}.bytes`, bytes, 'must be a positive safe integer');
        return Object.freeze({ name, bytes });
      }
      if (like === undefined) throw new LayoutError('BAD_EXTRA', at, e, "needs 'like' (or 'per': z, b or w) or 'bytes'");
      if (typeof like !== 'string' || !(EXTRA_LIKE as readonly string[]).includes(like)) {
        throw new LayoutError('BAD_EXTRA', `${at}.${likeField}`, like, `must be one of ${EXTRA_LIKE.map((k) => `'${k}'`).join(', ')}`);
      }
      const has = layersWith(like as ExtraLike, L);
      if (rawLayers === undefined) return Object.freeze({ name, like: like as ExtraLike, layers: Object.freeze(has) });
      const layers = readArray(`${at}.layers`, 'BAD_EXTRA', rawLayers, L, 'layer indices');
      if (layers.length === 0) throw new LayoutError('BAD_EXTRA', `${at}.layers`, layers, 'must name at least one layer');
      layers.forEach((l, j) => {
        if (typeof l !== 'number' || !Number.isInteger(l) || l < 0 || l >= L)
          throw new LayoutError('BAD_EXTRA', `${at}.layers[${j}]`, l, `must be a layer index in [0, ${L - 1}]`);
        if (!has.includes(l)) throw new LayoutError('BAD_EXTRA', `${at}.layers[${j}]`, l, `layer ${l} has no '${like}' to shape the region like`);
        if (layers.indexOf(l) !== j) throw new LayoutError('BAD_EXTRA', `${at}.layers[${j}]`, l, 'repeats a layer');
      });
      return Object.freeze({ name, like: like as ExtraLike, layers: Object.freeze((layers as number[]).sort((a, b) => a - b)) });
    }),
  );
}
