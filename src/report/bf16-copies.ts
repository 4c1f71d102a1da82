// bf16-copies.ts: the device bytes a CUDA run with precision 'bf16' or 'fp16' holds beside the
// arena (the products' 16-bit operands; the arena's plan stays fp32), for reports that set them
// beside PyTorch. The two precisions' copies have the same layout and size.
import { plannerShape, requirePlan, type Plan } from '../layout/plan.js';
import { call, native } from '../native/addon.js';

/** The bytes of the 16-bit copies a bf16 / fp16 run of `plan` allocates, by the native rule the
 *  run allocates them by (halfCopiesLayout, csrc/train/half_copies.h): z[0..L-1], each layer's
 *  w and d at the batch, 64-element aligned, a copy per model where the models each keep the
 *  region (bf16; fp16 runs one model). */
export function bf16CopyBytes(plan: Plan): number {
  requirePlan(plan);
  return call(() => native().halfCopyBytes(plannerShape(plan.spec)));
}
