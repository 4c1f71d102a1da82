// params.ts: the weights and biases an export reads, and where an import writes them, shared by
// the safetensors and ONNX writers. The host side is read: it is brought up to date from the
// device first, unless no Trainer has run on the arena yet (then the host side is the current
// one and the device holds nothing newer).
import { Arena, queueOf, type View } from '../arena/arena.js';
import { OptionError } from '../core/errors.js';
import { stateOf } from '../train/state.js';
import { embeddingTableName, tensorNames } from './sequential.js';

export interface ModelOptions {
  /** Arenas of K models (planLayout `models`): which model (default 0). */
  model?: number;
}

/** One tensor of a layer: its state_dict name, the arena's view of it, its PyTorch shape. */
export interface ParamTensor {
  name: string;
  view: View;
  shape: number[];
}
export interface LayerParams {
  layer: number;
  /** A dense layer's weight [out, in] and bias [out]; a layernorm's weight and bias [units]; an
   *  rmsnorm's weight; an embedding's tables [cardinality, dim]; nothing for dropout and residual. */
  tensors: ParamTensor[];
}

/** The arena argument of an export or import: an Arena (OptionError BAD_OPTION naming it, before
 *  anything of it is read; an object is named by its kind, not spelled out). */
export function checkArena(value: unknown): void {
  if (!(value instanceof Arena))
    throw new OptionError(
      'BAD_OPTION',
      'arena',
      typeof value === 'object' && value !== null ? Object.prototype.toString.call(value) : value,
      'must be an Arena',
    );
}

/** The model option, read once: an integer in [0, models). */
export function modelOf(arena: Arena, options: unknown): number {
  if (options === undefined) return 0;
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { model? }');
  const m = (options as ModelOptions).model;
  const models = arena.plan.spec.models;
  if (m === undefined) return 0;
  if (typeof m !== 'number' || !Number.isSafeInteger(m) || m < 0 || m >= models)
    throw new OptionError('BAD_OPTION', 'model', m, `must be an integer in [0, ${models - 1}]`);
  return m;
}

/** Layer by layer, views of model `model`'s parameters on the host side, with their names and
 *  shapes (the regions a layer has: a dense layer's w and b, a norm's gain and bias). */
export function layerParams(arena: Arena, model: number): LayerParams[] {
  const spec = arena.plan.spec;
  return Array.from({ length: spec.layers.length - 1 }, (_, i) => {
    const l = i + 1;
    const names = tensorNames(l);
    const tensors: ParamTensor[] = [];
    const w = arena.plan.region(l, 'w'),
      b = arena.plan.region(l, 'b');
    const op = spec.ops?.[i] ?? { op: 'dense' as const };
    if (op.op === 'embedding') {
      // One nn.Embedding per categorical column: its table [cardinality, dim], back to back in w.
      const view = arena.view(l, 'w', model);
      let at = 0;
      op.categorical.forEach((c, j) => {
        tensors.push({ name: embeddingTableName(l, j), view: view.subarray(at, at + c.cardinality * c.dim), shape: [c.cardinality, c.dim] });
        at += c.cardinality * c.dim;
      });
      return { layer: l, tensors };
    }
    const dense = op.op === 'dense';
    if (w) tensors.push({ name: names.weight, view: arena.view(l, 'w', model), shape: dense ? [spec.layers[l]!, spec.layers[l - 1]!] : [spec.layers[l]!] });
    if (b) tensors.push({ name: names.bias, view: arena.view(l, 'b', model), shape: [spec.layers[l]!] });
    return { layer: l, tensors };
  });
}

/** Makes the host's w and b current for reading (BUSY while a run is queued or in flight). */
export function syncParamsToHost(arena: Arena, what: string): void {
  queueOf(arena).assertIdle(what);
  if (!stateOf(arena).deviceStale) arena.toHost({ kinds: ['w', 'b'] });
}

/** After the host's w and b were written: the device gets them (unless the whole host side goes
 *  up before the next run anyway), and activations or gradients of the old weights are void. */
export function paramsWritten(arena: Arena): void {
  const st = stateOf(arena);
  if (!st.deviceStale) arena.toDevice({ kinds: ['w', 'b'] });
  st.forwardRows = undefined;
  st.gradients = false;
}
