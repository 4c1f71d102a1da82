// torch-sim.ts: tensors with holders over the caching allocator model, stage by stage, for the
// PyTorch estimate (pytorch.ts). A tensor's block is freed when its last holder (a Python
// variable, a module's local, a node's saved variable, autocast's cache) lets it go.
import type { NormalizedSpec } from '../layout/spec.js';
import { CachingAllocatorModel } from './caching-allocator.js';

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

export interface Live extends TorchTensor {
  handle: object;
  holders: Set<string>;
}

export class Sim {
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

  hold(t: Live, who: string): void {
    t.holders.add(who);
  }

  drop(t: Live, who: string): void {
    if (!t.holders.delete(who)) throw new Error(`${t.name} is not held by ${who}`);
    if (t.holders.size > 0) return;
    this.alloc.free(t.handle);
    this.live.delete(t);
    this.stage!.freed.push({ name: t.name, bytes: t.bytes, blockBytes: t.blockBytes });
  }

  /** A temporary: made and freed at once (it still counts in the stage's peak). */
  temp(name: string, bytes: number): void {
    this.drop(this.make(name, bytes, 'tmp'), 'tmp');
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

/** Autograd's input buffers (torch/csrc/autograd/input_buffer.cpp): the gradient of each layer's
 *  output x_j waits here until the node that made x_j runs. A second gradient for the same x_j (a
 *  residual adds x_j to a later layer) is added in place when the buffer holds the only reference
 *  to the first, else into a new tensor (InputBuffer's accumulate). `alias(j)` is the layer whose
 *  output x_j is (an op that returns its input: dropout with p = 0). */
export class Grads {
  readonly #buf = new Map<number, Live>();

  constructor(
    readonly sim: Sim,
    readonly alias: (j: number) => number,
  ) {}

  /** The engine hands a node's output `t` (held by `holder`) to x_j's buffer. */
  deliver(j: number, t: Live, holder: string): void {
    const k = this.alias(j);
    const who = `buffer${k}`;
    const old = this.#buf.get(k);
    if (!old) {
      this.sim.hold(t, who);
      this.#buf.set(k, t);
    } else if (old.holders.size > 1) {
      const sum = this.sim.make(`grad of layer ${k} output (sum)`, old.bytes, who);
      this.sim.drop(old, who);
      this.#buf.set(k, sum);
    }
    this.sim.drop(t, holder);
  }

  /** x_l's gradient as the node that made x_l takes it (held by 'in'), or undefined where no
   *  node of layer l runs (x_l is an earlier layer's output, or needs no gradient). */
  take(l: number): Live | undefined {
    const t = this.alias(l) === l ? this.#buf.get(l) : undefined;
    if (!t) return undefined;
    this.#buf.delete(l);
    this.sim.hold(t, 'in');
    this.sim.drop(t, `buffer${l}`);
    return t;
  }
}

/** The network as the estimate runs it (pytorch.ts fills it in layer order). */
export interface Net {
  readonly sim: Sim;
  readonly s: NormalizedSpec;
  /** 'fp32' (no autocast), 'bf16' or 'fp16'. */
  readonly precision: string;
  /** Element bytes of the parameters and of what the norms compute in. */
  readonly e: number;
  /** el[j]: element bytes of x_j (outputBytes: under autocast, a product's are 2). */
  readonly el: readonly number[];
  /** out[j]: x_j, layer j's output (out[0]: x); an op that returns its input gives that tensor. */
  readonly out: Live[];
  /** readCast[l]: layer l read autocast's cast of x_{l-1}, whose node makes x_{l-1}'s gradient. */
  readonly readCast: boolean[];
  /** needsGrad[j]: whether x_j requires grad. */
  readonly needsGrad: boolean[];
  /** params[l]: layer l's parameters in registration order. */
  readonly params: Live[][];
  /** saved[l]: what layer l's op node(s) saved (held by the node's name), released in order. */
  readonly saved: Live[][];
  readonly grads: Grads;
}
