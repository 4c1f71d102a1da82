// embedding.ts: the embedding op (layer 1 only; csrc/ops/embedding.h): x's first `numeric`
// columns pass through and each further column is a category index looked up in its own table
// (nn.Embedding(cardinality, dim) per column); the layer's width is numeric + the sum of the
// dims. Its entry of the op parameter table holds numeric in `from`; its columns go in the
// header's embedding column table. PyTorch: the Embeddings module of docs/ops.md; ONNX: Slice,
// Cast, Squeeze, Gather, Concat.
import { LayoutError } from '../../core/errors.js';
import { checkKnownKeys } from '../../core/known-keys.js';
import { MAX_CARDINALITY, type EmbedColumn } from '../header.js';
import type { OpDef } from './types.js';

export interface EmbeddingOp {
  readonly op: 'embedding';
  readonly numeric: number;
  readonly categorical: readonly EmbedColumn[];
}

/** The categorical columns an embedding may have (each an entry of the header's column table). */
export const MAX_CATEGORICAL = 4096;
const COLUMN_KEYS = ['cardinality', 'dim'] as const;

const int = (v: unknown, min: number, max: number): v is number => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

export const embedding: OpDef<EmbeddingOp> = {
  keys: ['op', 'numeric', 'categorical'],
  weights: 'normal',
  read(o, { field, l, units }) {
    const input = units[l - 1]!;
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
  },
  params: (o) => ({ value: 0, from: o.numeric, columns: o.categorical }),
  decode: (p) => ({ op: 'embedding', numeric: p.from, categorical: p.columns ?? [] }),
  torch: (o) => `Embeddings(${o.numeric}, [${o.categorical.map((c) => `(${c.cardinality}, ${c.dim})`).join(', ')}])`,
  onnx(o, p) {
    const at = `embedding_${p.l}`;
    const slice = (name: string, from: number, to: number) => {
      p.intConstant(`${name}.starts`, [from]);
      p.intConstant(`${name}.ends`, [to]);
      p.intConstant(`${name}.axes`, [1]);
      p.node('Slice', [p.x, `${name}.starts`, `${name}.ends`, `${name}.axes`], name, name);
    };
    const parts: string[] = [];
    if (o.numeric > 0) {
      slice(`${at}_numeric`, 0, o.numeric);
      parts.push(`${at}_numeric`);
    }
    p.intConstant(`${at}.squeeze`, [1]);
    p.tensors.forEach((table, j) => {
      const col = `${at}_col${j}`;
      slice(col, o.numeric + j, o.numeric + j + 1);
      p.node('Cast', [col], `${col}_int`, `${col}_int`, { to: { int: p.int64 } });
      p.node('Squeeze', [`${col}_int`, `${at}.squeeze`], `${col}_index`, `${col}_index`);
      p.node('Gather', [table, `${col}_index`], `${col}_rows`, `${col}_rows`);
      parts.push(`${col}_rows`);
    });
    p.node('Concat', parts, p.out, at, { axis: { int: 1 } });
    return true;
  },
};
