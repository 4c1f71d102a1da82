// sequential.ts: the one mapping between an nn-arena network and PyTorch's nn.Sequential (and
// the ONNX graph that mirrors it). Layer l (1-based; layer 0 is the input) is the Linear at
// Sequential index 2 * (l - 1), followed by its activation module at 2 * (l - 1) + 1, for every
// layer, the output layer included and identity included (as nn.Identity): so the Linear
// indices never depend on the activations. Linear l's weight is the arena's w region of layer l,
// [units[l], units[l - 1]] row-major, exactly PyTorch's [out_features, in_features]; its bias is
// b. nn.Sequential(Linear(4, 8), ReLU(), Linear(8, 3), Softmax(dim=1)) has the state_dict
// names 0.weight, 0.bias, 2.weight, 2.bias.
import { ArenaError } from '../core/errors.js';
import { torchModule, type OnnxAttribute } from '../layout/ops/index.js';
import type { NormalizedSpec } from '../layout/spec.js';

export type { OnnxAttribute } from '../layout/ops/index.js';

/** One ONNX node of an activation: `op` reads the previous node's output (the activation's input
 *  for the first), and the activation's input too where `alsoInput` (silu: x * sigmoid(x)). */
export interface OnnxStep {
  op: string;
  attributes?: Record<string, OnnxAttribute>;
  alsoInput?: boolean;
}

/** How an activation is written: its PyTorch module and its ONNX nodes (none: identity). */
interface ActivationExport {
  torch: string;
  onnx: OnnxStep[];
}

/** Activations with an export. One that is missing here (a newer activation) is refused by
 *  exportActivation rather than written wrongly. `slope`: the spec's leakyReluSlope. */
const ACTIVATION_EXPORT: Readonly<Record<string, (slope: number) => ActivationExport>> = {
  identity: () => ({ torch: 'Identity()', onnx: [] }),
  relu: () => ({ torch: 'ReLU()', onnx: [{ op: 'Relu' }] }),
  sigmoid: () => ({ torch: 'Sigmoid()', onnx: [{ op: 'Sigmoid' }] }),
  tanh: () => ({ torch: 'Tanh()', onnx: [{ op: 'Tanh' }] }),
  // Rows of a batch are dim 0: the softmax runs over each row's outputs.
  softmax: () => ({ torch: 'Softmax(dim=1)', onnx: [{ op: 'Softmax', attributes: { axis: { int: 1 } } }] }),
  // Gelu is an operator from opset 20 on (erf form, or approximate 'tanh').
  gelu: () => ({ torch: 'GELU()', onnx: [{ op: 'Gelu' }] }),
  'gelu-tanh': () => ({ torch: "GELU(approximate='tanh')", onnx: [{ op: 'Gelu', attributes: { approximate: { string: 'tanh' } } }] }),
  silu: () => ({ torch: 'SiLU()', onnx: [{ op: 'Sigmoid' }, { op: 'Mul', alsoInput: true }] }),
  'leaky-relu': (slope) => ({ torch: `LeakyReLU(negative_slope=${slope})`, onnx: [{ op: 'LeakyRelu', attributes: { alpha: { float: slope } } }] }),
  softplus: () => ({ torch: 'Softplus()', onnx: [{ op: 'Softplus' }] }),
};

export function exportActivation(activation: string, layer: number, slope = 0): ActivationExport {
  const e = Object.hasOwn(ACTIVATION_EXPORT, activation) ? ACTIVATION_EXPORT[activation] : undefined;
  if (!e) throw new ArenaError('NOT_SUPPORTED', `layer ${layer}'s activation '${activation}' has no PyTorch / ONNX export yet`);
  return e(slope);
}

/** The state_dict names of layer l's weight and bias. */
export function tensorNames(layer: number): { weight: string; bias: string } {
  const i = 2 * (layer - 1);
  return { weight: `${i}.weight`, bias: `${i}.bias` };
}

/** The state_dict name of an embedding layer's table of categorical column j (docs/ops.md's
 *  Embeddings module: one nn.Embedding per column in `tables`). */
export function embeddingTableName(layer: number, column: number): string {
  return `${2 * (layer - 1)}.tables.${column}.weight`;
}

/** Layer l's module (the one at index 2 * (l - 1)) as PyTorch source (an op's: its module in
 *  src/layout/ops/). */
function layerModule(spec: Pick<NormalizedSpec, 'layers' | 'ops'>, l: number): string {
  return torchModule(spec.ops?.[l - 1] ?? { op: 'dense' }, spec.layers[l]!, spec.layers[l - 1]!);
}

/** The PyTorch module of a spec, as Python source (for the metadata and the docs): an
 *  nn.Sequential of dense layers, or, where a layer is an op, the NnArena module of docs/ops.md
 *  (an nn.Sequential whose forward adds a Residual's earlier output), with the same indices. */
export function sequentialSource(spec: Pick<NormalizedSpec, 'layers' | 'activations' | 'leakyReluSlope' | 'ops'>): string {
  const parts: string[] = [];
  for (let l = 1; l < spec.layers.length; l++) parts.push(layerModule(spec, l), exportActivation(spec.activations[l - 1]!, l, spec.leakyReluSlope).torch);
  return `${spec.ops ? 'NnArena' : 'Sequential'}(${parts.join(', ')})`;
}
