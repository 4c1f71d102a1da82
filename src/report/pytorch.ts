// pytorch.ts: what PyTorch would hold on the GPU, stage by stage, for the first training step of
// the same network: nn.Sequential(Linear, act, ..., Linear) moved with .to('cuda'), a float batch
// and int64 labels moved to the device, CrossEntropyLoss, loss.backward(), and an optimizer step
// (SGD / SGD with momentum / Adam, foreach implementations, zero_grad(set_to_none=True)). Each
// tensor is one block of the caching allocator model; tensors are freed when their last holder
// (a Python variable, a module's local, a node's saved variable) lets go, in autograd's order.
// bench/torch_memory.py runs exactly this step on a GPU and measures the same stages.
import { LayoutError, OptionError } from '../errors.js';
import { namesOf, optimizerNamed, optimizers } from '../layout/optimizers.js';
import { DTYPE_BYTES, type Kind, type Optimizer } from '../layout/header.js';
import { planLayout, requirePlan, type Plan } from '../layout/plan.js';
import { normalizeSpec, type LayoutSpec, type NormalizedSpec } from '../layout/spec.js';
import { CachingAllocatorModel, roundSize } from './caching-allocator.js';

export const TORCH_STAGES = ['model', 'inputs', 'forward', 'loss', 'backward', 'step'] as const;
export type TorchStage = (typeof TORCH_STAGES)[number];

export interface TorchTensor {
  name: string;
  /** Elements x element size. */
  bytes: number;
  /** What the allocator counts for it (512-byte rounding, unsplit cached blocks). */
  blockBytes: number;
}

export interface TorchStageEstimate {
  stage: TorchStage;
  /** torch.cuda.memory_allocated() after the stage. */
  allocatedBytes: number;
  /** torch.cuda.max_memory_allocated() within the stage (temporaries included). */
  peakBytes: number;
  /** torch.cuda.memory_reserved() after the stage: the cached segments. */
  reservedBytes: number;
  allocated: TorchTensor[];
  freed: TorchTensor[];
}

export interface PytorchEstimate {
  spec: NormalizedSpec;
  optimizer: Optimizer;
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
}

interface Live extends TorchTensor { handle: object; holders: Set<string> }

/** Tensors with holders: a tensor's block is freed when its last holder drops it. */
class Sim {
  readonly alloc = new CachingAllocatorModel();
  stage: TorchStageEstimate | undefined;
  readonly live = new Set<Live>();

  make(name: string, bytes: number, ...holders: string[]): Live {
    const handle = this.alloc.malloc(bytes);
    const t: Live = { name, bytes, blockBytes: (handle as { size: number }).size, handle, holders: new Set(holders) };
    this.live.add(t);
    this.stage!.allocated.push({ name, bytes, blockBytes: t.blockBytes });
    return t;
  }

  hold(t: Live, who: string): void { t.holders.add(who); }

  drop(t: Live, who: string): void {
    if (!t.holders.delete(who)) throw new Error(`${t.name} is not held by ${who}`);
    if (t.holders.size > 0) return;
    this.alloc.free(t.handle);
    this.live.delete(t);
    this.stage!.freed.push({ name: t.name, bytes: t.bytes, blockBytes: t.blockBytes });
  }

  begin(stage: TorchStage, out: TorchStageEstimate[]): void {
    this.alloc.resetPeak();
    this.stage = { stage, allocatedBytes: 0, peakBytes: 0, reservedBytes: 0, allocated: [], freed: [] };
    out.push(this.stage);
  }

  end(): void {
    const s = this.stage!;
    s.allocatedBytes = this.alloc.allocated;
    s.peakBytes = this.alloc.peak;
    s.reservedBytes = this.alloc.reserved;
  }
}

export function estimatePytorchMemory(spec: LayoutSpec | NormalizedSpec, options: PytorchOptions = {}): PytorchEstimate {
  const s = normalizeSpec(spec);
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { optimizer? }');
  const optimizer = options.optimizer ?? s.optimizer;
  const info = optimizerNamed(optimizer);
  if (!info) throw new LayoutError('BAD_OPTIMIZER', 'optimizer', optimizer, `must be one of ${namesOf(optimizers())}`);
  // PyTorch's state tensors per parameter: one per state kind of the weights (mw: the momentum
  // buffer or Adam's exp_avg; vw: exp_avg_sq).
  const buffers = info.state.filter((k) => k === 'mw' || k === 'vw').length;
  const L = s.layers.length - 1;
  if (s.activations[L - 1] !== 'softmax') {
    throw new LayoutError('BAD_ACTIVATIONS', `activations[${L - 1}]`, s.activations[L - 1], 'the PyTorch estimate models CrossEntropyLoss, so the output layer must be softmax');
  }
  const e = DTYPE_BYTES[s.dtype];
  const n = s.layers;
  const B = s.batch;
  const sim = new Sim();
  const stages: TorchStageEstimate[] = [];

  // model = nn.Sequential(...).to('cuda'): parameters in registration order, weight then bias.
  sim.begin('model', stages);
  const params: Live[] = [];
  for (let l = 1; l <= L; l++) {
    params.push(sim.make(`linear${l}.weight`, n[l]! * n[l - 1]! * e, 'model'));
    params.push(sim.make(`linear${l}.bias`, n[l]! * e, 'model'));
  }
  sim.end();

  sim.begin('inputs', stages);
  const x = sim.make('x', B * n[0]! * e, 'python');
  const labels = sim.make('labels (int64)', B * 8, 'python');
  sim.end();

  // output = model(x): Sequential rebinds its local `input` after each module, so a Linear's output
  // is freed once the activation after it has run, unless a backward node saved it. AddmmBackward
  // saves its input (mat1); relu / sigmoid / tanh save their result.
  sim.begin('forward', stages);
  const acts: Live[] = [x];  // acts[l]: the input of Linear l+1
  sim.hold(x, 'seq');
  let cur = x;
  for (let l = 1; l <= L; l++) {
    const h = sim.make(`linear${l} output`, B * n[l]! * e, 'seq');
    sim.hold(cur, `addmm${l}`);
    sim.drop(cur, 'seq');
    cur = h;
    const act = s.activations[l - 1]!;
    if (l < L && act !== 'identity') {
      const r = sim.make(`${act}${l} output`, B * n[l]! * e, 'seq', `act${l}`);
      sim.drop(cur, 'seq');
      cur = r;
    }
    acts.push(cur);
  }
  const output = cur;
  sim.hold(output, 'python');
  sim.drop(output, 'seq');
  sim.end();

  // loss = CrossEntropyLoss()(output, labels) = nll_loss(log_softmax(output)): the log-probabilities
  // (saved by both nodes), the scalar loss and nll_loss's total_weight (saved).
  sim.begin('loss', stages);
  const logp = sim.make('log_softmax output', B * n[L]! * e, 'logsoftmax', 'nll');
  sim.make('loss', e, 'python');
  const totalWeight = sim.make('nll_loss total_weight', e, 'nll');
  sim.end();

  // loss.backward(): each node allocates its gradients, then its incoming gradient is freed, then
  // its saved variables are released. AccumulateGrad takes each weight / bias gradient as .grad
  // without a copy. The bias gradient is a new sum over the batch.
  sim.begin('backward', stages);
  const root = sim.make('grad of loss (ones)', e, 'python');
  const gNll = sim.make('grad of log_softmax output', B * n[L]! * e, 'in');
  sim.drop(totalWeight, 'nll');
  sim.drop(logp, 'nll');
  let g = sim.make(`grad of linear${L} output`, B * n[L]! * e, 'in');
  sim.drop(gNll, 'in');
  sim.drop(logp, 'logsoftmax');
  const grads: Live[] = [];
  for (let l = L; l >= 1; l--) {
    const gIn = l > 1 ? sim.make(`grad of layer ${l - 1} output`, B * n[l - 1]! * e, 'next') : undefined;
    grads.push(sim.make(`linear${l}.weight.grad`, n[l]! * n[l - 1]! * e, 'grad'));
    grads.push(sim.make(`linear${l}.bias.grad`, n[l]! * e, 'grad'));
    sim.drop(g, 'in');
    sim.drop(acts[l - 1]!, `addmm${l}`);
    if (!gIn) break;
    sim.hold(gIn, 'in');
    sim.drop(gIn, 'next');
    g = gIn;
    const act = s.activations[l - 2]!;
    if (act !== 'identity') {
      g = sim.make(`grad of linear${l - 1} output`, B * n[l - 1]! * e, 'in');
      sim.drop(gIn, 'in');
      sim.drop(acts[l - 1]!, `act${l - 1}`);
    }
  }
  sim.drop(root, 'python');
  sim.end();

  // optimizer.step() (foreach): momentum clones each gradient into its buffer on the first step;
  // Adam creates exp_avg and exp_avg_sq per parameter (its step counters stay on the CPU), then
  // sqrt(exp_avg_sq) per parameter as temporaries.
  sim.begin('step', stages);
  if (buffers === 1) params.forEach((p) => sim.make(`${p.name} momentum_buffer`, p.bytes, 'state'));
  if (buffers === 2) {
    for (const p of params) {
      sim.make(`${p.name} exp_avg`, p.bytes, 'state');
      sim.make(`${p.name} exp_avg_sq`, p.bytes, 'state');
    }
    const tmp = params.map((p) => sim.make(`sqrt(${p.name} exp_avg_sq)`, p.bytes, 'tmp'));
    for (const t of tmp.reverse()) sim.drop(t, 'tmp');
  }
  sim.end();
  void labels; void grads;

  const peak = stages.reduce((a, st) => (st.peakBytes > a.peakBytes ? st : a));
  return {
    spec: s, optimizer, stages, peakBytes: peak.peakBytes, peakStage: peak.stage,
    tensorBytes: [...sim.live].reduce((a, t) => a + t.bytes, 0),
  };
}

/** nn-arena's regions that do the work of each PyTorch stage's tensors. */
export const STAGE_KINDS: Readonly<Record<TorchStage, readonly Kind[]>> = {
  model: ['w', 'b'],
  inputs: ['z', 'y', 'xdata', 'ydata'],  // z of layer 0 only: the batch's inputs
  forward: ['z'],  // z of layers 1..L, activations applied in place
  loss: ['stats'],
  backward: ['d', 'db', 'dw'],
  step: ['mw', 'mb', 'vw', 'vb'],
};

export interface ArenaStageBytes { stage: TorchStage; regions: number; bytes: number }

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
    if (r.extra !== undefined) { extras += r.bytes; continue; }
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
