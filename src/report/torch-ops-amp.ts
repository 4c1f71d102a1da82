// torch-ops-amp.ts: what autocast (precision bf16 / fp16) changes in the PyTorch estimate's
// network, dense layers and ops alike: the dtype of each layer's output, the casts a layer reads
// its input through (and their backward nodes), and RMSNorm's composite path, which PyTorch takes
// where the input's dtype is not the weight's. Without autocast every tensor has the spec's dtype
// and none of this applies (no casts).
import { LayoutError } from '../core/errors.js';
import type { NormalizedSpec } from '../layout/spec.js';
import { activationBytes } from './torch-activations.js';
import type { Live, Net } from './torch-sim.js';

/** Element bytes of each layer's output x_j (x_0: x) for a step whose products make `a`-byte
 *  elements (2 under autocast, else the spec's `e`). */
export function outputBytes(s: NormalizedSpec, e: number, a: number): number[] {
  const el = [e]; // x: the float batch
  s.layers.slice(1).forEach((_, i) => {
    const o = s.ops?.[i];
    // F.linear is on autocast's lower-precision list (an activation keeps its dtype, but softplus,
    // on the float32 list: torch-activations.ts); layer_norm on its float32 list (the input cast
    // to float32, the output float32); an embedding's float32 rows and x's float32 columns make a
    // float32 cat; add promotes to the wider operand; rms_norm and dropout are on no list: the
    // input's dtype.
    if (!o || o.op === 'dense') el.push(activationBytes(s.activations[i]!, e, a));
    else if (o.op === 'layernorm' || o.op === 'embedding') el.push(e);
    else if (o.op === 'residual') el.push(Math.max(el[i]!, el[o.from]!));
    else el.push(el[i]!);
  });
  return el;
}

/** Whether layer l's rms_norm takes its composite path: PyTorch dispatches to the fused kernel
 *  only where the input's dtype is the weight's (else it warns "Mismatch dtype between input and
 *  weight ... Cannot dispatch to fused implementation"): under autocast, a product's bf16 / fp16
 *  output meeting the float32 gain. */
export const rmsComposite = (el: readonly number[], e: number, l: number): boolean => el[l - 1] !== e;

/** Where the estimate does not model a layer under autocast: a LayoutError naming it (BAD_LAYERS). */
export function refuseUnmodelledAmp(s: NormalizedSpec, el: readonly number[], e: number, precision: string): void {
  s.ops?.forEach((o, i) => {
    const l = i + 1;
    // rms_norm_composite's sums: the gain's gradient over the rows, each row's mean and the
    // rstd's gradient over a row. From 1021 rows (a column's sum) or 130561 units (a row's),
    // PyTorch's reduction kernel may split one sum across thread blocks, with a staging buffer
    // and semaphores sized by the GPU's SM count.
    if (o.op === 'rmsnorm' && rmsComposite(el, e, l) && (s.batch > 1020 || s.layers[l]! > 130560)) {
      const why = `under autocast (${precision}) PyTorch's rmsnorm on a ${el[l - 1]}-byte input runs op by op, and above 1020 rows (batch ${s.batch}) or 130560 units (${s.layers[l]}) its sums may take scratch that depends on the GPU: not modelled`;
      throw new LayoutError('BAD_LAYERS', `layers[${l}]`, o, why);
    }
  });
}

const xName = (j: number): string => (j === 0 ? 'x' : `layer ${j} output`);
const dtypeName = (net: Net, el: number): string => (el === 4 ? 'float32' : net.precision);

/** x_{l-1} as layer l reads it in `el`-byte elements, held by `holder` (the node that saves it):
 *  itself, or autocast's cast of it, a new tensor (autocast caches casts of leaves only: the
 *  parameters). Where x_{l-1} requires grad the cast has a node (ToCopyBackward), which
 *  deliverInput runs. */
export function readAs(net: Net, l: number, el: number, holder: string): Live {
  const x = net.out[l - 1]!;
  if (net.el[l - 1] === el) {
    net.sim.hold(x, holder);
    return x;
  }
  net.readCast[l] = net.needsGrad[l - 1]!;
  return net.sim.make(`${xName(l - 1)} ${dtypeName(net, el)}`, net.s.batch * net.s.layers[l - 1]! * el, holder);
}

/** Layer l's gradient of x_{l-1} (held by 'out') to x_{l-1}'s buffer; where layer l read a cast,
 *  through the cast's node first, the next to run (the latest node made before layer l's): the
 *  gradient in x_{l-1}'s dtype (named with it), then the cast's gradient freed. */
export function deliverInput(net: Net, l: number, g: Live): void {
  const { sim, s } = net;
  if (net.readCast[l]) {
    const el = net.el[l - 1]!;
    const back = sim.make(`grad of ${xName(l - 1)} ${dtypeName(net, el)}`, s.batch * s.layers[l - 1]! * el, 'out');
    sim.drop(g, 'out');
    g = back;
  }
  net.grads.deliver(l - 1, g, 'out');
}

/** Autograd's engine after a node has run (validate_outputs): a gradient whose dtype is not its
 *  input's is cast to it, a new tensor, and the slot lets the node's gradient go. Under autocast
 *  only a residual meets this: add promotes a bf16 / fp16 operand and a float32 one to a float32
 *  sum (in its kernel, no cast tensor), and AddBackward hands that float32 gradient itself to both
 *  operands. `g` is layer l's gradient held by `holder`; returns x_j's, held by `holder`. */
export function toInputDtype(net: Net, l: number, j: number, g: Live, holder: string): Live {
  const el = net.el[j]!;
  if (el === net.el[l]) return g;
  const cast = net.sim.make(`grad of ${xName(j)} ${dtypeName(net, el)}`, net.s.batch * net.s.layers[j]! * el, holder);
  net.sim.drop(g, holder);
  return cast;
}

/** rms_norm where the weight's dtype is not the input's (float32 gain, bf16 / fp16 input under
 *  autocast): not the fused kernel but rms_norm_composite, op by op with autograd's nodes: x
 *  upcast to float32 (u, saved by pow and the first mul), pow(u, 2), its mean (the eps added in
 *  place), rsqrt of that (r, saved by rsqrt and the first mul), then pow and mean freed; u * r (m,
 *  saved by the second mul), m * weight, and that cast back to x's dtype (type_as), the output. */
export function rmsCompositeForward(net: Net, l: number): Live {
  const { sim, s, e } = net;
  const who = `rmsnorm${l}`;
  const [B, n] = [s.batch, s.layers[l]!];
  const u = readAs(net, l, e, `${who} pow`);
  sim.hold(u, `${who} mul1`);
  const p = sim.make(`${who} pow(u, 2)`, B * n * e, 'tmp');
  const mean = sim.make(`${who} mean`, B * e, 'tmp');
  const r = sim.make(`${who} rsqrt`, B * e, `${who} rsqrt`, `${who} mul1`);
  sim.drop(mean, 'tmp');
  sim.drop(p, 'tmp');
  const m = sim.make(`${who} u * rsqrt`, B * n * e, `${who} mul2`);
  const w = sim.make(`${who} (u * rsqrt) * weight`, B * n * e, 'tmp');
  const y = sim.make(`${who} output`, B * n * net.el[l]!, 'seq');
  sim.drop(w, 'tmp');
  net.saved[l] = [u, r, m];
  return y;
}

/** The composite's nodes, last made first, given x_l's gradient held by 'in'. Each makes its
 *  gradients (where an operand was broadcast, the gradient summed to its shape after, by the
 *  engine), then its temporaries, its incoming gradient and its saved variables go. type_as: the
 *  gradient in float32. mul2: m's gradient (g * weight), then the weight's (g * m summed over the
 *  rows: the .grad). mul1: u's (g * r: it waits in the upcast node's buffer) and r's (g * u summed
 *  over the row). rsqrt: -0.5 * g * r^3. The in-place add hands its gradient on; mean: g expanded,
 *  / n. pow: g * (2 * u.pow(1)) (pow by 1 copies), added in place into u's buffer (the buffer holds
 *  the only reference), then freed. Last the upcast's node: x_{l-1} is a product's output (the only
 *  bf16 / fp16 tensors), so it requires grad. */
export function rmsCompositeBackward(net: Net, l: number, g: Live): void {
  const { sim, s, e } = net;
  const who = `rmsnorm${l}`;
  const [B, n] = [s.batch, s.layers[l]!];
  const [u, r, m] = net.saved[l]!;
  const big = (name: string, holder = 'tmp') => sim.make(name, B * n * e, holder);
  const row = (name: string, holder = 'tmp') => sim.make(name, B * e, holder);
  const done = (incoming: Live, temps: Live[], saved: Array<[Live, string]> = []) => {
    for (const t of temps) sim.drop(t, 'tmp');
    sim.drop(incoming, 'in');
    for (const [t, holder] of saved) sim.drop(t, holder);
  };
  const g32 = big(`grad of ${who} output float32`, 'in');
  done(g, []);
  const gm = big(`grad of ${who} u * rsqrt`, 'in');
  const gw = big(`grad of ${who}.weight (rows)`);
  sim.make(`${net.params[l]![0]!.name}.grad`, n * e, 'grad');
  done(g32, [gw], [[m!, `${who} mul2`]]);
  const gu = big(`grad of ${who} u`, 'out');
  const grRows = big(`grad of ${who} rsqrt (rows)`);
  const gr = row(`grad of ${who} rsqrt`, 'in');
  const mul1: Array<[Live, string]> = [
    [u!, `${who} mul1`],
    [r!, `${who} mul1`],
  ];
  done(gm, [grRows], mul1);
  const neg = [row(`${who} -0.5 * grad`), row(`${who} rsqrt^3`)];
  const gMean = row(`grad of ${who} mean`, 'in');
  done(gr, neg, [[r!, `${who} rsqrt`]]);
  const gPow = big(`grad of ${who} pow`, 'in');
  done(gMean, []);
  const two = [big(`${who} u.pow(1)`), big(`${who} 2 * u.pow(1)`)];
  const gu2 = big(`grad of ${who} u (pow)`);
  done(gPow, two, [[u!, `${who} pow`]]);
  sim.drop(gu2, 'tmp');
  deliverInput(net, l, gu);
}
