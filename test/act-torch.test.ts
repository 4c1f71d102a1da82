// act-torch.test.ts: every activation and loss against PyTorch's own results
// (test/fixtures/gen_act.py: forward outputs, mean loss, autograd gradients, weights after 3
// SGD steps of small MLPs with fixed weights), on the CPU backend; float64 to 1e-12 relative,
// float32 to float32 rounding. The CUDA paths: test/gpu/act.gpu.test.ts.
import { describe, expect, it } from 'vitest';
import { F32_TOLERANCE, replay, TORCH } from './support/act-torch.js';

describe(`activations and losses match PyTorch (fixtures from torch ${TORCH.torch})`, () => {
  for (const c of TORCH.cases) {
    it(`${c.name}: float64 to 1e-12`, async () => {
      const r = await replay(c, 'float64', { backend: 'cpu' });
      expect(r.worst, r.what).toBeLessThan(1e-12);
    });
    it(`${c.name}: float32 to float32 rounding`, async () => {
      const r = await replay(c, 'float32', { backend: 'cpu' });
      expect(r.worst, r.what).toBeLessThan(F32_TOLERANCE);
    });
  }
});
