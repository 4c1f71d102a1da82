// index.ts: the ops of the layer table beyond dense, one module each (types.ts says what a module
// gives). Adding an op: its row in nn_arena.h NNA_OPS (the native side: csrc/ops/), its module
// here, and its entry below (its planned and written forms in the unions).
import { checkKnownKeys } from '../../core/known-keys.js';
import type { OpName } from '../header.js';
import { alphaDropout, type AlphaDropoutOp } from './alpha-dropout.js';
import { dropout, type DropoutOp } from './dropout.js';
import { embedding, type EmbeddingOp } from './embedding.js';
import { layernorm, rmsnorm, type NormOp, type NormSpec } from './norms.js';
import { residual, type ResidualOp } from './residual.js';
import type { OnnxPort, OpContext, OpDef, OpParams } from './types.js';

export type { EmbeddingOp } from './embedding.js';
export type { OnnxAttribute, OnnxPort, OpParams } from './types.js';

/** A non-input layer's op as planned (plan.spec.ops). */
export type LayerOp = { readonly op: 'dense' } | NormOp | DropoutOp | ResidualOp | EmbeddingOp | AlphaDropoutOp;
/** An op layer as a user writes it in `layers` (LayerSpec). */
export type OpLayerSpec = NormSpec | DropoutOp | ResidualOp | EmbeddingOp | AlphaDropoutOp;

type OpLayer = Exclude<LayerOp, { readonly op: 'dense' }>;
/** Every op but dense, by name (each row of the generated table must have one): its module. */
const OPS: { readonly [N in Exclude<OpName, 'dense'>]: OpDef<OpLayer> } = {
  layernorm,
  rmsnorm,
  dropout,
  residual,
  embedding,
  'alpha-dropout': alphaDropout,
};

export const DENSE_KEYS = ['op', 'units', 'activation'] as const;

const defOf = (op: Exclude<OpName, 'dense'>): OpDef<OpLayer> => OPS[op];

/** Layer l's op `op` from its object `o` (`c.field` names it in errors): the op as planned and
 *  the layer's width. */
export function readOp(op: Exclude<OpName, 'dense'>, o: Record<string, unknown>, c: OpContext): { op: LayerOp; width: number } {
  const def = defOf(op);
  checkKnownKeys(o, def.keys, `a ${op} layer`, c.field);
  return def.read(o, c);
}

/** An op's entry of the header's op parameter table (dense: zeros). */
export function opParams(o: LayerOp): OpParams {
  return o.op === 'dense' ? { value: 0, from: 0 } : defOf(o.op).params(o);
}

/** An op back from a validated header's entry. */
export function decodeOp(op: OpName, p: OpParams): LayerOp {
  return op === 'dense' ? { op: 'dense' } : defOf(op).decode(p);
}

/** How init() fills the w region of a layer that is not dense (OpDef.weights). */
export function opWeights(op: Exclude<OpName, 'dense'>): 'ones' | 'normal' | undefined {
  return defOf(op).weights;
}

/** A layer's module as PyTorch source (docs/ops.md): Linear for dense. */
export function torchModule(o: LayerOp, units: number, fanIn: number): string {
  return o.op === 'dense' ? `Linear(${fanIn}, ${units})` : defOf(o.op).torch(o, units);
}

/** A non-dense layer's ONNX nodes through `port`; false where it is the identity at inference. */
export function onnxNodes(o: OpLayer, port: OnnxPort): boolean {
  return defOf(o.op).onnx(o, port);
}
