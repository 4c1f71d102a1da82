// bf16-copies.ts: the device bytes a CUDA run with precision 'bf16' or 'fp16' holds beside the
// arena (the products' 16-bit operands; the arena's plan stays fp32), for reports that set them
// beside PyTorch. The two precisions' copies have the same layout and size.
import { requirePlan, type Plan } from '../layout/plan.js';

/** Mirrors HalfCopies::allocate (csrc/cuda/run_buffers.cuh): z[0..L-1] and every weight matrix at
 *  the batch, then two buffers of the largest d, each rounded up to 64 elements, 2 bytes each
 *  (bf16 or fp16: the same bytes). One model only: bf16 and fp16 runs refuse K models. */
export function bf16CopyBytes(plan: Plan): number {
  requirePlan(plan);
  const { layers: n, batch: B } = plan.spec;
  const up = (elements: number) => Math.ceil(elements / 64) * 64;
  let elements = 0;
  let dMax = 0;
  for (let l = 0; l < n.length - 1; l++) elements += up(B * n[l]!);
  for (let l = 1; l < n.length; l++) {
    elements += up(n[l]! * n[l - 1]!);
    dMax = Math.max(dMax, B * n[l]!);
  }
  return 2 * (elements + 2 * up(dMax));
}
