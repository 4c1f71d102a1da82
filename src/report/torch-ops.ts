// torch-ops.ts: the PyTorch estimate's layers other than dense (pytorch.ts runs them): the NnArena
// module of docs/ops.md (bench/export_check.py with_ops), one entry per op kind: its module's
// parameters, what its forward allocates and what autograd saves for backward, and what its
// backward node allocates and frees. A node runs as autograd's engine runs it: its gradients are
// allocated, then its incoming gradient is let go, then its saved variables, then each gradient
// goes to the buffer of the layer output it is for (Grads). The CUDA kernels named are PyTorch's.
// Under autocast (bf16 / fp16) an op works in its input's dtype or casts it (torch-ops-amp.ts).
import { LayoutError } from '../core/errors.js';
import type { LayerOp, NormalizedSpec } from '../layout/spec.js';
import { deliverInput, readAs, rmsComposite, rmsCompositeBackward, rmsCompositeForward, toInputDtype } from './torch-ops-amp.js';
import type { Live, Net } from './torch-sim.js';

type Op<N extends LayerOp['op']> = Extract<LayerOp, { op: N }>;

interface TorchOp<O extends LayerOp> {
  /** The module's parameters in registration order: name and elements. */
  params(o: O, l: number, n: readonly number[]): Array<[string, number]>;
  /** The module run on x_{l-1}: x_l, held by 'seq' (the expression NnArena.forward appends). */
  forward(net: Net, l: number, o: O): Live;
  /** The op's backward node(s), given x_l's gradient held by 'in'. */
  backward(net: Net, l: number, o: O, g: Live): void;
}

/** nn.Dropout(p = 0) returns its input (at::dropout's shortcut): no tensor, no node. */
export const returnsInput = (o: LayerOp | undefined): boolean => o?.op === 'dropout' && o.p === 0;

/** Why the estimate does not model an op, where it does not. */
function unmodelled(o: LayerOp, batch: number): string | undefined {
  if (o.op === 'dense') return undefined;
  if (o.op === 'alpha-dropout') return 'the PyTorch estimate does not model nn.AlphaDropout (no measurement of it)';
  // embedding_dense_backward_cuda: above 3072 indices it sorts them (cub) and sizes its
  // partial sums by the number of distinct indices, which only the data knows.
  if (o.op === 'embedding' && batch > 3072)
    return `above 3072 indices a column (batch ${batch}), PyTorch's embedding backward sorts them with temporaries that depend on the indices' values: not modelled`;
  // The norms' CUDA backward: above 65536 rows, and few units for the SM count, it sums the gain
  // (and bias) gradients in partial blocks, then .sum(0).
  if ((o.op === 'layernorm' || o.op === 'rmsnorm') && batch > 65536)
    return `above 65536 rows (batch ${batch}), PyTorch's ${o.op} backward sums its gain gradient in partial blocks whose count depends on the GPU's SM count: not modelled`;
  return undefined;
}

/** Where the estimate does not model a layer: a LayoutError naming it (BAD_LAYERS). */
export function refuseUnmodelled(s: NormalizedSpec): void {
  s.ops?.forEach((o, i) => {
    const why = unmodelled(o, s.batch);
    if (why) throw new LayoutError('BAD_LAYERS', `layers[${i + 1}]`, o, why);
  });
}

/** Runs layer l's node: its gradients allocated first (by `make`), then the incoming gradient and
 *  the saved variables let go, then the input's gradient, where it has one, handed on. */
function node(net: Net, l: number, who: string, g: Live, make: () => Live | undefined): void {
  const gIn = make();
  net.sim.drop(g, 'in');
  for (const t of net.saved[l] ?? []) net.sim.drop(t, who);
  if (gIn) deliverInput(net, l, gIn);
}

/** The gradient of x_{l-1} (in `el`-byte elements, the dtype the op read it in) where it
 *  requires one, then each parameter's gradient (taken as its .grad by AccumulateGrad, no copy). */
function inputThenParamGrads(net: Net, l: number, el: number): Live | undefined {
  const { sim, s } = net;
  const gIn = net.needsGrad[l - 1] ? sim.make(`grad of layer ${l - 1} output`, s.batch * s.layers[l - 1]! * el, 'out') : undefined;
  for (const p of net.params[l]!) sim.make(`${p.name}.grad`, p.bytes, 'grad');
  return gIn;
}

/** nn.LayerNorm / nn.RMSNorm on CUDA: native_layer_norm makes the output, then each row's mean and
 *  rstd in the accumulate type (float32 for float32, float64 for float64); _fused_rms_norm the
 *  output and rstd. The node saves the input and the statistics; its backward makes the input's
 *  gradient, then gain (and bias) gradients in one kernel (up to 65536 rows: no partial blocks).
 *  Under autocast layer_norm reads a float32 cast of a bf16 / fp16 input (the node saves the
 *  cast); rms_norm on such an input takes its composite path (torch-ops-amp.ts). */
function norm(stats: readonly string[], bias: boolean): TorchOp<Op<'layernorm' | 'rmsnorm'>> {
  return {
    params: (o, l, n) => [[`${o.op}${l}.weight`, n[l]!], ...(bias ? [[`${o.op}${l}.bias`, n[l]!] as [string, number]] : [])],
    forward(net, l, o) {
      const { sim, s, e } = net;
      if (o.op === 'rmsnorm' && rmsComposite(net.el, net.e, l)) return rmsCompositeForward(net, l);
      const who = `${o.op}${l}`;
      const input = readAs(net, l, e, who);
      const y = sim.make(`${who} output`, s.batch * s.layers[l]! * e, 'seq');
      net.saved[l] = [input, ...stats.map((st) => sim.make(`${who} ${st}`, s.batch * e, who))];
      return y;
    },
    backward(net, l, o, g) {
      if (o.op === 'rmsnorm' && rmsComposite(net.el, net.e, l)) rmsCompositeBackward(net, l, g);
      else node(net, l, `${o.op}${l}`, g, () => inputThenParamGrads(net, l, net.e));
    },
  };
}

/** nn.Dropout (training) on CUDA: native_dropout makes the bool mask, then the output (in the
 *  input's dtype); the node saves the mask (without a node, where the input needs no gradient,
 *  the mask goes at once). Its backward (mask x gradient x scale) makes the input's gradient.
 *  p = 0: the input itself. */
const dropout: TorchOp<Op<'dropout'>> = {
  params: () => [],
  forward(net, l, o) {
    const { sim, s } = net;
    const el = net.el[l]!;
    const x = net.out[l - 1]!;
    if (returnsInput(o)) {
      sim.hold(x, 'seq');
      return x;
    }
    const who = `dropout${l}`;
    const mask = sim.make(`${who} mask (bool)`, s.batch * s.layers[l]!, who);
    const y = sim.make(`${who} output`, s.batch * s.layers[l]! * el, 'seq');
    if (net.needsGrad[l - 1]) net.saved[l] = [mask];
    else sim.drop(mask, who);
    return y;
  },
  backward: (net, l, o, g) => node(net, l, `dropout${l}`, g, () => inputThenParamGrads(net, l, net.el[l]!)),
};

/** Residual: `x + outs[from]` makes the sum; AddBackward saves nothing and hands its incoming
 *  gradient itself to both operands (alpha 1: no copy), x_{l-1}'s first, so the earlier layer's
 *  buffer keeps it until the later gradient of that layer is added in. Under autocast an operand
 *  narrower than the sum gets a cast of it (toInputDtype), all casts made before any is handed on. */
const residual: TorchOp<Op<'residual'>> = {
  params: () => [],
  forward: (net, l) => net.sim.make(`residual${l} output`, net.s.batch * net.s.layers[l]! * net.el[l]!, 'seq'),
  backward(net, l, o, g) {
    const to = [l - 1, o.from].filter((j) => net.needsGrad[j]);
    to.forEach((_, i) => net.sim.hold(g, `out${i}`));
    net.sim.drop(g, 'in');
    const grads = to.map((j, i) => toInputDtype(net, l, j, g, `out${i}`));
    to.forEach((j, i) => net.grads.deliver(j, grads[i]!, `out${i}`));
  },
};

/** Embeddings (layer 1): idx = x[:, numeric:].long() (an int64 copy), a table's rows per column
 *  (index_select; the node saves its index column, a view that keeps idx), torch.cat of x's numeric
 *  columns and the rows, then the rows' list is let go (last first) and, on return, idx's name. */
const embedding: TorchOp<Op<'embedding'>> = {
  params: (o, l) => o.categorical.map((c, j): [string, number] => [`embedding${l}.tables.${j}.weight`, c.cardinality * c.dim]),
  forward(net, l, o) {
    const { sim, s, e } = net;
    const B = s.batch;
    const idx = sim.make('idx = x[:, numeric:].long()', B * o.categorical.length * 8, 'idx');
    const rows = o.categorical.map((c, j) => {
      sim.hold(idx, `embedding${l}.${j}`);
      return sim.make(`tables.${j}(idx[:, ${j}])`, B * c.dim * e, 'list');
    });
    const y = sim.make(`embedding${l} output (cat)`, B * s.layers[l]! * e, 'seq');
    for (const r of rows.reverse()) sim.drop(r, 'list');
    sim.drop(idx, 'idx');
    net.saved[l] = [idx];
    return y;
  },
  // CatBackward hands each table a narrow view of the gradient (the gradient lives while one
  // does); the tables' EmbeddingBackward nodes run last column first. embedding_dense_backward
  // (up to 3072 indices) copies a strided index column and gradient slice to contiguous ones,
  // makes the table's gradient (zeros), then frees the copies (the gradient's first).
  backward(net, l, o, g) {
    const { sim, s, e } = net;
    const B = s.batch;
    const C = o.categorical.length;
    o.categorical.forEach((_, j) => sim.hold(g, `view${j}`));
    sim.drop(g, 'in');
    for (let j = C - 1; j >= 0; j--) {
      const c = o.categorical[j]!;
      const idx = B > 1 && C > 1 ? sim.make(`idx[:, ${j}].contiguous()`, B * 8, 'tmp') : undefined;
      const rows = B > 1 && s.layers[l] !== c.dim ? sim.make(`grad of tables.${j} rows .contiguous()`, B * c.dim * e, 'tmp') : undefined;
      const p = net.params[l]![j]!;
      sim.make(`${p.name}.grad`, p.bytes, 'grad');
      if (rows) sim.drop(rows, 'tmp');
      if (idx) sim.drop(idx, 'tmp');
      sim.drop(g, `view${j}`);
      sim.drop(net.saved[l]![0]!, `embedding${l}.${j}`);
    }
  },
};

const TORCH_OPS: { readonly [N in Exclude<LayerOp['op'], 'dense' | 'alpha-dropout'>]: TorchOp<Op<N>> } = {
  layernorm: norm(['mean', 'rstd'], true),
  rmsnorm: norm(['rstd'], false),
  dropout,
  residual,
  embedding,
};

/** Layer l's op (not dense; refuseUnmodelled has let it through). */
export function torchOp(o: LayerOp): TorchOp<LayerOp> {
  return TORCH_OPS[o.op as keyof typeof TORCH_OPS] as TorchOp<LayerOp>;
}
