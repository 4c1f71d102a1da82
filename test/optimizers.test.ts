// PyTorch's optimizers, schedules and clipping against nn-arena's CPU backend: the fixtures of
// test/fixtures/gen_optim.py (torch.optim SGD with weight_decay / momentum / nesterov, Adam,
// AdamW; StepLR, LinearLR + CosineAnnealingLR, OneCycleLR; clip_grad_norm_), the weights after
// every case's steps in float64 (1e-12 relative) and float32 (float32 rounding).
import { describe, expect, it } from 'vitest';
import { FIXTURES, FLOOR, maxRelError, trainCase, weightTolerance } from './support/optim-fixtures.js';

const cpu = { backend: 'cpu' } as const;

describe(`optimizers, schedules and clipping match PyTorch ${FIXTURES.torch} (CPU)`, () => {
  it.each(FIXTURES.cases.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    for (const dtype of ['float64', 'float32'] as const) {
      const want = c[dtype];
      const got = await trainCase(c, dtype, cpu);
      const tol = weightTolerance(c, dtype);
      const err = maxRelError(got, want, FLOOR);
      expect(err, `${c.name} ${dtype} weights`).toBeLessThanOrEqual(tol);
      got.lrs.forEach((lr, s) => expect(Math.abs(lr - want.lrs[s]!) / want.lrs[s]!, `${c.name} lr of step ${s}`).toBeLessThanOrEqual(1e-13));
      expect(got.gradNorms.length).toBe(want.gradNorms.length);
      got.gradNorms.forEach((n, s) =>
        expect(Math.abs(n - want.gradNorms[s]!) / want.gradNorms[s]!, `${c.name} ${dtype} norm of step ${s}`).toBeLessThanOrEqual(
          dtype === 'float64' ? 1e-12 : 1e-5,
        ),
      );
    }
  });
});
