// torch-sim.ts: tensors with holders over the caching allocator model, stage by stage, for the
// PyTorch estimate (pytorch.ts). A tensor's block is freed when its last holder (a Python
// variable, a module's local, a node's saved variable, autocast's cache) lets it go.
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
