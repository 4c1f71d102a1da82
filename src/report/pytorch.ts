// pytorch.ts: what PyTorch would hold on the GPU, stage by stage, for the first training step of
// the same network: nn.Sequential(Linear, act, ..., Linear), or with ops docs/ops.md's NnArena
// module (the ops' side: torch-ops.ts), moved with .to('cuda'), a float batch and int64 labels
// moved to the device, CrossEntropyLoss, loss.backward(), and an optimizer step (SGD / SGD with
// momentum / Adam, foreach implementations, zero_grad(set_to_none=True)). Each tensor is one block
// of the caching allocator model; tensors are freed when their last holder (a Python variable, a
// module's local, a node's saved variable, a gradient buffer) lets go, in autograd's order. With a
// precision of bf16 / fp16 it is PyTorch's AMP recipe on the float32 model (autocast, GradScaler
// for fp16). bench/torch_memory.py runs exactly this step on a GPU and measures the same stages.
import { LayoutError, OptionError } from '../core/errors.js';
import { checkKnownKeys, didYouMean, keysOf } from '../core/known-keys.js';
import { namesOf, optimizerNamed, optimizers } from '../layout/optimizers.js';
import { DTYPE_BYTES, type Kind, type Optimizer } from '../layout/header.js';
import { planLayout, requirePlan, type Plan } from '../layout/plan.js';
import { normalizeSpec, type LayerSpec, type LayoutSpec, type NormalizedSpec } from '../layout/spec.js';
import { roundSize } from './caching-allocator.js';
import { activationBackward, activationForward } from './torch-activations.js';
import { refuseUnmodelled, returnsInput, torchOp } from './torch-ops.js';
import { deliverInput, outputBytes, readAs, refuseUnmodelledAmp } from './torch-ops-amp.js';
import { Grads, Sim, TORCH_STAGES, type Live, type Net, type TorchStage, type TorchStageEstimate } from './torch-sim.js';

export { TORCH_STAGES, type TorchStage, type TorchStageEstimate, type TorchTensor } from './torch-sim.js';

/** How PyTorch runs the step: plain fp32 (the spec's dtype), or PyTorch's AMP recipe on a float32
 *  model: the forward and the loss under torch.autocast('cuda', dtype), backward and step outside
 *  it; fp16 adds GradScaler (scaler.scale(loss).backward(), scaler.step(opt), scaler.update()). */
export const PYTORCH_PRECISIONS = ['fp32', 'bf16', 'fp16'] as const;
export type PytorchPrecision = (typeof PYTORCH_PRECISIONS)[number];

export interface PytorchEstimate {
  spec: NormalizedSpec;
  optimizer: Optimizer;
  precision: PytorchPrecision;
  stages: TorchStageEstimate[];
  /** max_memory_allocated() over the whole step, and the stage it falls in. */
  peakBytes: number;
  peakStage: TorchStage;
  /** Sum of the element bytes of the tensors alive at the end (no rounding). */
  tensorBytes: number;
}

export interface PytorchOptions {
  /** Default: the spec's optimizer. */
  optimizer?: Optimizer;
  /** Default 'fp32'. bf16 / fp16 need dtype float32 (autocast leaves float64 alone). */
  precision?: PytorchPrecision;
}
const OPTION_KEYS = keysOf<PytorchOptions>()(['optimizer', 'precision']);

function checkPrecision(precision: unknown, dtype: string): PytorchPrecision {
  if (!PYTORCH_PRECISIONS.includes(precision as PytorchPrecision)) {
    throw new OptionError('BAD_OPTION', 'precision', precision, `must be one of ${PYTORCH_PRECISIONS.join(', ')}${didYouMean(precision, PYTORCH_PRECISIONS)}`);
  }
  if (precision !== 'fp32' && dtype !== 'float32') {
    throw new OptionError('BAD_OPTION', 'precision', precision, `autocast casts float32 tensors only: ${precision} needs dtype float32, not ${dtype}`);
  }
  return precision as PytorchPrecision;
}

export function estimatePytorchMemory(spec: LayoutSpec<LayerSpec> | NormalizedSpec, options: PytorchOptions = {}): PytorchEstimate {
  const s = normalizeSpec(spec);
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { optimizer?, precision? }');
  checkKnownKeys(options, OPTION_KEYS, 'estimatePytorchMemory');
  const optimizer = options.optimizer ?? s.optimizer;
  const info = optimizerNamed(optimizer);
  if (!info) throw new LayoutError('BAD_OPTIMIZER', 'optimizer', optimizer, `must be one of ${namesOf(optimizers())}`);
  const precision = checkPrecision(options.precision ?? 'fp32', s.dtype);
  // PyTorch's state tensors per parameter: one per state kind of the weights (mw: the momentum
  // buffer or Adam's exp_avg; vw: exp_avg_sq).
  const buffers = info.state.filter((k) => k === 'mw' || k === 'vw').length;
  const L = s.layers.length - 1;
  refuseUnmodelled(s);
  if (s.activations[L - 1] !== 'softmax') {
    throw new LayoutError(
      'BAD_ACTIVATIONS',
      `activations[${L - 1}]`,
      s.activations[L - 1],
      'the PyTorch estimate models CrossEntropyLoss, so the output layer must be softmax',
    );
  }
  const amp = precision !== 'fp32';
  const e = DTYPE_BYTES[s.dtype]; // parameters, their gradients and state, x
  const a = amp ? 2 : e; // what autocast's products make: Linear outputs (most activations too), their gradients
  const f = amp ? 4 : e; // the loss side: nll_loss autocasts to float32
  const el = outputBytes(s, e, a);
  if (amp) refuseUnmodelledAmp(s, el, e, precision);
  const n = s.layers;
  const B = s.batch;
  const sim = new Sim();
  const stages: TorchStageEstimate[] = [];
  const ops = s.ops;
  const keepOuts = ops !== undefined;
  const net: Net = {
    sim,
    s,
    precision,
    e,
    el,
    out: [],
    readCast: [],
    needsGrad: [false],
    params: [[]],
    saved: [],
    grads: new Grads(sim, (j) => {
      while (j > 0 && returnsInput(ops?.[j - 1])) j--;
      return j;
    }),
  };
  const dense: Dense = { net, amp, precision, a, keepOuts, inputs: [], casts: [], weightCasts: [] };

  // model = <the module>.to('cuda'): parameters in registration order (a Linear's weight, then bias).
  sim.begin('model', stages);
  for (let l = 1; l <= L; l++) {
    const o = ops?.[l - 1];
    const list: Array<[string, number]> =
      o && o.op !== 'dense'
        ? torchOp(o).params(o, l, n)
        : [
            [`linear${l}.weight`, n[l]! * n[l - 1]!],
            [`linear${l}.bias`, n[l]!],
          ];
    net.params.push(list.map(([name, count]) => sim.make(name, count * e, 'model')));
  }
  const params = net.params.flat();
  sim.end();

  sim.begin('inputs', stages);
  const x = sim.make('x', B * n[0]! * e, 'python');
  const labels = sim.make('labels (int64)', B * 8, 'python');
  sim.end();

  // output = model(x). nn.Sequential (dense layers only) rebinds its local `input` after each
  // module, so a layer's output is freed once the next module has run, unless a backward node
  // saved it. NnArena (with ops) appends every layer's output to its list `outs`, which holds them
  // all until forward returns (then the list goes, last first). A layer's output requires grad
  // where any of its inputs or parameters does.
  sim.begin('forward', stages);
  const keep = (t: Live, j: number) => sim.hold(t, keepOuts ? `outs${j}` : 'seq');
  keep(x, 0);
  net.out.push(x);
  for (let l = 1; l <= L; l++) {
    const o = ops?.[l - 1];
    const residualFrom = o?.op === 'residual' ? net.needsGrad[o.from]! : false;
    net.needsGrad.push(net.params[l]!.length > 0 || net.needsGrad[l - 1]! || residualFrom);
    const y = o && o.op !== 'dense' ? torchOp(o).forward(net, l, o) : denseForward(dense, l);
    if (keepOuts) {
      keep(y, l);
      sim.drop(y, 'seq');
    }
    net.out.push(y);
  }
  const output = net.out[L]!;
  sim.hold(output, 'python');
  if (keepOuts) for (let j = L; j >= 0; j--) sim.drop(net.out[j]!, `outs${j}`);
  else sim.drop(output, 'seq');
  sim.end();

  // loss = CrossEntropyLoss()(output, labels) = nll_loss(log_softmax(output)): the log-probabilities
  // (saved by both nodes), the scalar loss and nll_loss's total_weight (saved). Under autocast
  // log_softmax keeps the logits' dtype (cross_entropy passes it explicitly) and nll_loss, an fp32
  // op, works on (and saves) a float32 cast of it; then the context exits and its cache is cleared.
  sim.begin('loss', stages);
  const logp = sim.make('log_softmax output', B * n[L]! * a, 'logsoftmax', ...(amp ? [] : ['nll']));
  const nllInput = amp ? sim.make('log_softmax output float32', B * n[L]! * f, 'nll') : logp;
  sim.make('loss', f, 'python');
  const totalWeight = sim.make('nll_loss total_weight', f, 'nll');
  for (const c of dense.casts) sim.drop(c, 'cache');
  sim.end();

  // loss.backward(): autograd's engine runs the nodes last layer first. Each node allocates its
  // gradients, then its incoming gradient is freed, then its saved variables are released, then
  // each gradient goes to the buffer of the output it is for. AccumulateGrad takes each parameter's
  // gradient as .grad without a copy.
  // fp16: scaler.scale(loss) first makes the scaler's scale and growth tracker (lazily, on the
  // first call) and the scaled loss; MulBackward then makes the loss's gradient (ones x scale).
  sim.begin('backward', stages);
  const scaled = precision === 'fp16' ? scaleLoss(sim) : undefined;
  const root = sim.make('grad of loss (ones)', f, 'python');
  const gMul = scaled ? sim.make('grad of loss (ones x scale)', 4, 'in') : undefined;
  const gNll = sim.make(amp ? 'grad of log_softmax output float32' : 'grad of log_softmax output', B * n[L]! * f, 'in');
  if (gMul) sim.drop(gMul, 'in');
  sim.drop(totalWeight, 'nll');
  sim.drop(nllInput, 'nll');
  let gLogp = gNll;
  if (amp) {
    // the float32 cast's backward: the gradient back in the logits' dtype
    gLogp = sim.make('grad of log_softmax output', B * n[L]! * a, 'in');
    sim.drop(gNll, 'in');
  }
  const g = sim.make(`grad of linear${L} output`, B * n[L]! * a, 'out');
  sim.drop(gLogp, 'in');
  sim.drop(logp, 'logsoftmax');
  net.grads.deliver(L, g, 'out');
  for (let l = L; l >= 1; l--) {
    const gl = net.grads.take(l);
    const o = ops?.[l - 1];
    if (!gl) continue;
    if (o && o.op !== 'dense') torchOp(o).backward(net, l, o, gl);
    else denseBackward(dense, l, gl);
  }
  sim.drop(root, 'python');
  if (scaled) sim.drop(scaled, 'python');
  sim.end();

  // optimizer.step() (foreach): momentum clones each gradient into its buffer on the first step;
  // Adam creates exp_avg and exp_avg_sq per parameter (its step counters stay on the CPU), then
  // sqrt(exp_avg_sq) per parameter as temporaries. fp16: scaler.step(opt) unscales the gradients
  // in place first, and scaler.update() then drops the found_inf it kept.
  sim.begin('step', stages);
  const foundInf = precision === 'fp16' ? unscale(sim) : undefined;
  if (buffers === 1) params.forEach((p) => sim.make(`${p.name} momentum_buffer`, p.bytes, 'state'));
  if (buffers === 2) {
    for (const p of params) {
      sim.make(`${p.name} exp_avg`, p.bytes, 'state');
      sim.make(`${p.name} exp_avg_sq`, p.bytes, 'state');
    }
    const tmp = params.map((p) => sim.make(`sqrt(${p.name} exp_avg_sq)`, p.bytes, 'tmp'));
    for (const t of tmp.reverse()) sim.drop(t, 'tmp');
  }
  if (foundInf) sim.drop(foundInf, 'scaler');
  sim.end();
  void labels;

  const peak = stages.reduce((p, st) => (st.peakBytes > p.peakBytes ? st : p));
  return {
    spec: s,
    optimizer,
    precision,
    stages,
    peakBytes: peak.peakBytes,
    peakStage: peak.stage,
    tensorBytes: [...sim.live].reduce((sum, t) => sum + t.bytes, 0),
  };
}

/** The dense layers' side of the step: the input each AddmmBackward saved, autocast's casts. */
interface Dense {
  readonly net: Net;
  readonly amp: boolean;
  readonly precision: PytorchPrecision;
  /** Element bytes of what autocast's products make: Linear outputs and their gradients. */
  readonly a: number;
  /** NnArena's `outs` holds every layer's output (a network with ops), not nn.Sequential's local. */
  readonly keepOuts: boolean;
  /** inputs[l]: the input of Linear l as its AddmmBackward saved it. */
  readonly inputs: Live[];
  /** [bias, weight] casts per layer, in layer order. */
  readonly casts: Live[];
  /** weightCasts[l]: Linear l's weight cast. */
  readonly weightCasts: Live[];
}

/** Linear l (and its activation: torch-activations.ts) on x_{l-1}: AddmmBackward saves its input
 *  (mat1) for the weight's gradient, and its weight (mat2) where the input needs a gradient; the
 *  activation's node saves its result or its input (TORCH_ACTIVATIONS). Under autocast each
 *  Linear casts its arguments to `precision` first, last argument first (the order GCC evaluates
 *  the wrapper's casts in): the bias and weight casts go to autocast's cache (float32 leaves that
 *  require grad) until the context exits; a float32 input's cast (x's, an op's output's, a
 *  softplus's) is not cached (readAs). Returns x_l, held by 'seq'. */
function denseForward(d: Dense, l: number): Live {
  const { net, precision, a } = d;
  const { sim, s } = net;
  const n = s.layers;
  const B = s.batch;
  const cur = net.out[l - 1]!;
  if (d.amp) {
    d.casts.push(sim.make(`linear${l}.bias ${precision}`, n[l]! * a, 'cache'));
    d.weightCasts[l] = sim.make(`linear${l}.weight ${precision}`, n[l]! * n[l - 1]! * a, 'cache', ...(net.needsGrad[l - 1] ? [`addmm${l}`] : []));
    d.casts.push(d.weightCasts[l]);
  }
  const input = readAs(net, l, a, `addmm${l}`);
  const h = sim.make(`linear${l} output`, B * n[l]! * a, 'seq');
  if (!d.keepOuts) sim.drop(cur, 'seq');
  d.inputs[l] = input;
  return activationForward(net, l, h, a);
}

/** Linear l's nodes in backward, given x_l's gradient `g` (held by 'in'): the activation's (its
 *  input's gradient, then what it saved released: activationBackward), then AddmmBackward's: the
 *  input's gradient (where it needs one), the weight's and the bias's (a new sum over the batch).
 *  Under autocast the casts' nodes follow, latest made first: the input's (where the Linear read a
 *  cast of a float32 output), then the weight's, then the bias's: each gradient back in its
 *  tensor's dtype, a parameter's taken as .grad. */
function denseBackward(d: Dense, l: number, g: Live): void {
  const { net, amp, precision, a } = d;
  const { sim, s } = net;
  const n = s.layers;
  const B = s.batch;
  g = activationBackward(net, l, g, a);
  const gIn = net.needsGrad[l - 1] ? sim.make(`grad of layer ${l - 1} output`, B * n[l - 1]! * a, 'out') : undefined;
  const gW = sim.make(amp ? `grad of linear${l}.weight ${precision}` : `linear${l}.weight.grad`, n[l]! * n[l - 1]! * a, 'grad');
  const gB = sim.make(amp ? `grad of linear${l}.bias ${precision}` : `linear${l}.bias.grad`, n[l]! * a, 'grad');
  sim.drop(g, 'in');
  sim.drop(d.inputs[l]!, `addmm${l}`);
  if (amp && net.needsGrad[l - 1]) sim.drop(d.weightCasts[l]!, `addmm${l}`);
  if (gIn) deliverInput(net, l, gIn);
  if (amp) {
    const [weight, bias] = net.params[l]!;
    for (const [low, p] of [
      [gW, weight!],
      [gB, bias!],
    ] as const) {
      sim.make(`${p.name}.grad`, p.bytes, 'grad');
      sim.drop(low, 'grad');
    }
  }
}

/** scaler.scale(loss): GradScaler's scale (float32) and growth tracker (int32), made on its first
 *  call and kept, then loss * scale, a temporary of the statement. Returns the scaled loss. */
function scaleLoss(sim: Sim): Live {
  sim.make('GradScaler scale', 4, 'scaler');
  sim.make('GradScaler growth_tracker (int32)', 4, 'scaler');
  return sim.make('scaled loss', 4, 'python');
}

/** scaler.unscale_(opt), inside scaler.step: inv_scale = scale.double().reciprocal().float() and
 *  found_inf, then per-device copies of both for the in-place check-and-unscale of the gradients;
 *  the found_inf copy is kept in the optimizer's state until update(). Returns that copy. */
function unscale(sim: Sim): Live {
  const d = sim.make('scale.double()', 8, 'tmp');
  const r = sim.make('scale.double().reciprocal()', 8, 'tmp');
  sim.drop(d, 'tmp');
  const inv = sim.make('inv_scale', 4, 'unscale_');
  sim.drop(r, 'tmp');
  const found = sim.make('found_inf', 4, 'unscale_');
  const kept = sim.make('found_inf (per-device copy)', 4, 'scaler');
  sim.temp('inv_scale (per-device copy)', 4);
  sim.drop(inv, 'unscale_');
  sim.drop(found, 'unscale_');
  return kept;
}

/** nn-arena's regions that do the work of each PyTorch stage's tensors. */
export const STAGE_KINDS: Readonly<Record<TorchStage, readonly Kind[]>> = {
  model: ['w', 'b'],
  inputs: ['z', 'y', 'xdata', 'ydata'], // z of layer 0 only: the batch's inputs
  forward: ['z'], // z of layers 1..L, activations applied in place
  loss: ['stats'],
  backward: ['d', 'db', 'dw'],
  step: ['mw', 'mb', 'vw', 'vb'],
};

export interface ArenaStageBytes {
  stage: TorchStage;
  regions: number;
  bytes: number;
}

/** Exact bytes of the plan's regions per stage; with the user regions (no PyTorch stage: they are
 *  the user's), the header and padding, less the bytes that regions of a compact plan share
 *  (counted under each of them), they sum to totalBytes. */
export function arenaBytesByStage(plan: Plan): { stages: ArenaStageBytes[]; extras: number; headerAndPadding: number; shared: number } {
  requirePlan(plan);
  const stageOf = (layer: number, kind: Kind): TorchStage => {
    if (kind === 'z') return layer === 0 ? 'inputs' : 'forward';
    return TORCH_STAGES.find((st) => st !== 'forward' && STAGE_KINDS[st].includes(kind))!;
  };
  const stages = TORCH_STAGES.map((stage): ArenaStageBytes => ({ stage, regions: 0, bytes: 0 }));
  let extras = 0;
  for (const r of plan.regions) {
    if (r.extra !== undefined) {
      extras += r.bytes;
      continue;
    }
    const row = stages[TORCH_STAGES.indexOf(stageOf(r.layer, r.kind))]!;
    row.regions++;
    row.bytes += r.bytes;
  }
  const shared = plan.bytesByKind().shared;
  return { stages, extras, headerAndPadding: plan.totalBytes - extras - stages.reduce((a, st) => a + st.bytes, 0) + shared, shared };
}

/** The plan and its other variant (compact if it is full, full if compact), for reports that
 *  show both beside PyTorch's peak. */
export function fullAndCompact(plan: Plan): { full: Plan; compact: Plan } {
  const other = planLayout({ ...plan.spec, compact: !plan.spec.compact });
  return plan.spec.compact ? { full: other, compact: plan } : { full: plan, compact: other };
}

export { roundSize };
