// Issue 17 part 3 on the GPU: the example module's CUDA kernel agrees with its CPU function.
// The GPU machine cannot build: build the example here with nvcc and carry its build folder
// (docs/embedding.md):
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/custom-kernel.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer } from '../../src/index.js';
import { builtExample } from '../support/custom-kernel.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const required = process.env.NN_ARENA_REQUIRE_GPU === '1';
const ex = builtExample();

it.runIf(required)('examples/custom-kernel is built with its CUDA kernel (NN_ARENA_REQUIRE_GPU=1)', () => {
  expect(ex?.cudaBuilt).toBe(true);
});

describe.skipIf(!hasGpu || !ex?.cudaBuilt)('examples/custom-kernel on the GPU', () => {
  for (const dtype of ['float32', 'float64'] as const) {
    it(`its CUDA kernel agrees with its CPU function, between training steps (${dtype})`, async () => {
      using a = Arena.create(planLayout({ layers: [50, 700, 10], batch: 16, dtype, optimizer: 'adam' }), { backend: 'cuda' });
      const t = new Trainer(a, { lr: 0.01 });
      t.init(7);
      const x = Array.from({ length: 16 * 50 }, (_, i) => Math.sin(i));
      const labels = Array.from({ length: 16 }, (_, i) => i % 10);
      await t.step(x, { labels });
      // The CPU function on the host copy of the weights...
      a.toHost();
      ex!.decayHostSide(a, 0.03);
      const cpu = [1, 2].map((l) => Array.from(a.view(l, 'w')));
      // ... and the CUDA kernel on the device side (after the run: decayWeights synchronizes).
      expect(await ex!.decayWeights(a, 0.03)).toBe(50 * 700 + 700 * 10);
      a.toHost();
      expect([1, 2].map((l) => Array.from(a.view(l, 'w')))).toEqual(cpu);
      await t.step(x, { labels });
    });

    it(`its CUDA EMA into the user region 'ema' (found by name) agrees bit for bit with its CPU function (${dtype})`, async () => {
      using a = Arena.create(planLayout({ layers: [50, 700, 10], batch: 16, dtype, optimizer: 'adam', extra: [{ name: 'ema', like: 'w' }] }), {
        backend: 'cuda',
      });
      const t = new Trainer(a, { lr: 0.01 });
      t.init(7);
      for (const l of [1, 2]) a.view('ema', l).set(a.view(l, 'w'));
      a.toDevice({ kinds: ['ema'] });
      const x = Array.from({ length: 16 * 50 }, (_, i) => Math.sin(i));
      const labels = Array.from({ length: 16 }, (_, i) => i % 10);
      await t.step(x, { labels });
      // The CPU function on the host copy (w after the step, the EMA as uploaded)...
      a.toHost();
      ex!.updateEmaHostSide(a, 0.95);
      const cpu = [1, 2].map((l) => Array.from(a.view('ema', l)));
      // ... and the CUDA kernel on the device side, which still holds the EMA as uploaded.
      expect(await ex!.updateEma(a, 0.95)).toBe(50 * 700 + 700 * 10);
      for (const l of [1, 2]) a.view('ema', l).fill(0);
      a.toHost({ kinds: ['ema'] });
      expect([1, 2].map((l) => Array.from(a.view('ema', l)))).toEqual(cpu);
      expect(cpu[0]).not.toEqual(Array.from(a.view(1, 'w'))); // the EMA lags the weights
    });
  }
});
