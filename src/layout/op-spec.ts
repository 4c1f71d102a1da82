// op-spec.ts: one op layer of `layers` as a user writes it (docs/ops.md), read and checked: its
// parameters and the width it gives. The rules the header keeps are the validator's
// (csrc/core/validate.cc checkOp); this file names the spec's field and value when one is broken.
import { LayoutError } from '../core/errors.js';
import { checkKnownKeys } from '../core/known-keys.js';
import { MAX_CARDINALITY, type Dtype, type EmbedColumn, type OpName } from './header.js';

/** Layer 1 of a network on tabular rows: x's first `numeric` columns pass through, each further
 *  column is a category index looked up in its own table (nn.Embedding(cardinality, dim)); the
 *  layer's width is numeric + the sum of the dims. */
export interface EmbeddingOp {
  readonly op: 'embedding';
  readonly numeric: number;
  readonly categorical: readonly EmbedColumn[];
}

/** A non-input layer's op as planned. eps of rmsnorm defaults to the dtype's machine epsilon
 *  (torch.finfo(dtype).eps, as nn.RMSNorm), of layernorm to 1e-5 (nn.LayerNorm). */
export type LayerOp =
  | { readonly op: 'dense' }
  | { readonly op: 'layernorm' | 'rmsnorm'; readonly eps: number }
  | { readonly op: 'dropout'; readonly p: number }
  | { readonly op: 'residual'; readonly from: number }
  | EmbeddingOp;

export const DENSE_KEYS = ['op', 'units', 'activation'] as const;
const OP_KEYS: Readonly<Record<Exclude<OpName, 'dense'>, readonly string[]>> = {
  layernorm: ['op', 'eps'],
  rmsnorm: ['op', 'eps'],
  dropout: ['op', 'p'],
  residual: ['op', 'from'],
  embedding: ['op', 'numeric', 'categorical'],
};
const COLUMN_KEYS = ['cardinality', 'dim'] as const;
/** torch.finfo(dtype).eps: nn.RMSNorm's eps when none is given. */
const MACHINE_EPS: Readonly<Record<Dtype, number>> = { float32: 2 ** -23, float64: 2 ** -52 };
/** The categorical columns an embedding may have (each an entry of the header's column table). */
export const MAX_CATEGORICAL = 4096;

const int = (v: unknown, min: number, max: number): v is number => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

/** Layer l's op `op` from its object `o` (`field` names it in errors), with the units of the
 *  layers before it: the op as planned and the layer's width. */
export function readOp(
  op: Exclude<OpName, 'dense'>,
  o: Record<string, unknown>,
  field: string,
  l: number,
  units: readonly number[],
  dtype: Dtype,
): { op: LayerOp; width: number } {
  checkKnownKeys(o, OP_KEYS[op], `a ${op} layer`, field);
  const width = units[l - 1]!;
  if (op === 'embedding') return readEmbedding(o, field, l, width);
  if (op === 'layernorm' || op === 'rmsnorm') {
    const eps = o.eps ?? (op === 'layernorm' ? 1e-5 : MACHINE_EPS[dtype]);
    if (typeof eps !== 'number' || !Number.isFinite(eps) || eps <= 0) throw new LayoutError('BAD_LAYERS', `${field}.eps`, eps, 'must be a finite number > 0');
    return { op: { op, eps }, width };
  }
  if (op === 'dropout') {
    const p = o.p;
    if (typeof p !== 'number' || !(p >= 0 && p < 1)) throw new LayoutError('BAD_LAYERS', `${field}.p`, p, 'must be a number in [0, 1)');
    return { op: { op, p }, width };
  }
  const from = o.from;
  if (!int(from, 0, l - 2))
    throw new LayoutError('BAD_LAYERS', `${field}.from`, from, `must be a layer index in [0, ${l - 2}] (an earlier layer than the one before)`);
  if (units[from] !== width)
    throw new LayoutError('BAD_LAYERS', `${field}.from`, from, `layer ${from} has ${units[from]} units; a residual adds layers of one width (${width})`);
  return { op: { op: 'residual', from }, width };
}

/** An embedding (layer 1 only): `numeric` + one index column per categorical entry make up the
 *  input layer's `input` units. */
function readEmbedding(o: Record<string, unknown>, field: string, l: number, input: number): { op: LayerOp; width: number } {
  if (l !== 1) throw new LayoutError('BAD_LAYERS', `${field}.op`, 'embedding', 'an embedding is layer 1, right after the input layer');
  const numeric = o.numeric;
  if (!int(numeric, 0, 2 ** 32 - 1)) throw new LayoutError('BAD_LAYERS', `${field}.numeric`, numeric, 'must be an integer >= 0 (the numeric columns of x)');
  const raw = o.categorical;
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_CATEGORICAL)
    throw new LayoutError('BAD_LAYERS', `${field}.categorical`, raw, `must be an array of 1 to ${MAX_CATEGORICAL} { cardinality, dim } columns`);
  const categorical: EmbedColumn[] = [];
  let width = numeric;
  for (let j = 0; j < raw.length; j++) {
    const c: unknown = raw[j];
    const at = `${field}.categorical[${j}]`;
    if (c === null || typeof c !== 'object' || Array.isArray(c)) throw new LayoutError('BAD_LAYERS', at, c, 'must be an object { cardinality, dim }');
    const col = c as Record<string, unknown>;
    checkKnownKeys(col, COLUMN_KEYS, 'a categorical column', at);
    const { cardinality, dim } = col;
    if (!int(cardinality, 1, MAX_CARDINALITY))
      throw new LayoutError('BAD_LAYERS', `${at}.cardinality`, cardinality, `must be an integer in [1, ${MAX_CARDINALITY}] (indices are exact in float32)`);
    if (!int(dim, 1, 2 ** 32 - 1)) throw new LayoutError('BAD_LAYERS', `${at}.dim`, dim, 'must be an integer >= 1');
    categorical.push(Object.freeze({ cardinality, dim }));
    width += dim;
  }
  if (input !== numeric + raw.length)
    throw new LayoutError(
      'BAD_LAYERS',
      `${field}.numeric`,
      numeric,
      `the input layer has ${input} units: numeric (${numeric}) + one index column per categorical entry (${raw.length}) must make them`,
    );
  return { op: { op: 'embedding', numeric, categorical: Object.freeze(categorical) }, width };
}
