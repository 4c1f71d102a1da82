// torch-activations.ts: the PyTorch estimate's activation after each Linear (pytorch.ts runs it):
// one table of what each activation's autograd node saves for backward and which dtype autocast
// runs it in, and the tensors its forward and its node make and free by that table.
import type { Activation } from '../layout/header.js';
import type { Live, Net } from './torch-sim.js';

interface TorchActivation {
  /** What its node saves for backward: its result (the activation's output), its input (the
   *  Linear's output, which then lives until the node has run), or nothing (no module). */
  readonly saves: 'result' | 'input' | 'nothing';
  /** On autocast's float32 list: under bf16 / fp16 it runs on a float32 cast of the Linear's
   *  16-bit output (the cast is the input its node saves) and makes a float32 output. */
  readonly float32: boolean;
}

/** Each activation as PyTorch's module runs it (the backward formulas of derivatives.yaml: the
 *  tensor each one reads; autocast_mode.cpp's lists). The one source of truth for both. */
export const TORCH_ACTIVATIONS: { readonly [A in Activation]: TorchActivation } = {
  identity: { saves: 'nothing', float32: false },
  relu: { saves: 'result', float32: false }, // threshold_backward(grad, result, 0)
  sigmoid: { saves: 'result', float32: false }, // sigmoid_backward(grad, result)
  tanh: { saves: 'result', float32: false }, // tanh_backward(grad, result)
  gelu: { saves: 'input', float32: false }, // gelu_backward(grad, self, 'none')
  'gelu-tanh': { saves: 'input', float32: false }, // gelu_backward(grad, self, 'tanh')
  silu: { saves: 'input', float32: false }, // silu_backward(grad, self)
  'leaky-relu': { saves: 'input', float32: false }, // leaky_relu_backward(grad, self, slope, false)
  softplus: { saves: 'input', float32: true }, // softplus_backward(grad, self, beta, threshold)
  // The output layer's: CrossEntropyLoss takes the logits, no module runs (pytorch.ts).
  softmax: { saves: 'nothing', float32: false },
};

/** Element bytes of a dense layer's output x_l with activation `act`, where its Linear makes
 *  `a`-byte elements: float32 (`e`) for one autocast runs in float32, else `a`. */
export const activationBytes = (act: Activation, e: number, a: number): number => (TORCH_ACTIVATIONS[act].float32 ? e : a);

/** Linear l's activation on its output `h` (`a`-byte elements, held by 'seq'). Returns x_l, held by
 *  'seq' (or `h` itself where no module runs). The node (`act${l}`) saves its result, or its
 *  input: `h` itself, or, for one on autocast's float32 list under bf16 / fp16, a float32 cast of
 *  `h` made first (the cast's node saves nothing: `h` goes once the activation has run). */
export function activationForward(net: Net, l: number, h: Live, a: number): Live {
  const { sim, s } = net;
  const act = s.activations[l - 1]!;
  const { saves } = TORCH_ACTIVATIONS[act];
  if (saves === 'nothing') return h;
  const who = `act${l}`;
  const size = s.batch * s.layers[l]!;
  const el = net.el[l]!;
  let input: Live | undefined;
  if (saves === 'input') {
    if (el === a) sim.hold(h, who);
    input = el === a ? h : sim.make(`linear${l} output float32`, size * el, who);
  }
  const r = sim.make(`${act}${l} output`, size * el, 'seq', ...(input ? [] : [who]));
  sim.drop(h, 'seq');
  net.saved[l] = [input ?? r];
  return r;
}

/** The activation's node in backward, given x_l's gradient `g` (held by 'in'): its input's
 *  gradient (x_l's dtype), then `g` and what it saved let go; after a float32 cast, the cast's
 *  node: the gradient in the Linear's `a`-byte elements, the float32 one freed. Returns the
 *  gradient of the Linear's output, held by 'in' (`g` itself where no module ran). */
export function activationBackward(net: Net, l: number, g: Live, a: number): Live {
  const { sim, s } = net;
  if (TORCH_ACTIVATIONS[s.activations[l - 1]!].saves === 'nothing') return g;
  const size = s.batch * s.layers[l]!;
  const el = net.el[l]!;
  const name = `grad of linear${l} output`;
  const gh = sim.make(el === a ? name : `${name} float32`, size * el, 'in');
  sim.drop(g, 'in');
  for (const t of net.saved[l]!) sim.drop(t, `act${l}`);
  if (el === a) return gh;
  const back = sim.make(name, size * a, 'in');
  sim.drop(gh, 'in');
  return back;
}
