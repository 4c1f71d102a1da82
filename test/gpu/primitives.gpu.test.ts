// The trainer primitives on CUDA (issue 17): forward + backward + update against step on the
// device, their transfers, CPU == CUDA for the primitives, and a budgeted arena's refusal.
// GPU machine: bash .gpu/run.sh bash scripts/gpu-session.sh primitives
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer } from '../../src/index.js';
import { firstDiff, modelTwins, twins } from '../support/primitives-checks.js';
import { relDiff, toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cuda = { backend: 'cuda' } as const;
// The step can take the fused kernel (small networks, or NN_ARENA_STEP_PATH=fused), the
// primitives never do: bit for bit only where both take the per-layer path. SGD through cuBLAS
// folds the update into the weight-gradient product in step (w += -lr z^T d), which rounds
// differently from dw then w -= lr dw.
const forcedFused = process.env.NN_ARENA_STEP_PATH === 'fused';
const blas = info.gemm.startsWith('cublas') && process.env.NN_ARENA_GEMM !== 'tiled';

const asF64 = (b: Uint8Array, dtype: 'float32' | 'float64') =>
  Float64Array.from(
    dtype === 'float32' ? new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4) : new Float64Array(b.buffer, b.byteOffset, b.byteLength / 8),
  );

describe.skipIf(!hasGpu)('CUDA: forward + backward + update is step', () => {
  // batch * units * fan-in above the fused path's limit (2^26): the step runs per layer.
  const big = { layers: [600, 640, 40], batch: 256, steps: 3 };
  for (const dtype of ['float32', 'float64'] as const) {
    for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
      const exact = !forcedFused && !(blas && optimizer === 'sgd');
      it(`${optimizer}, ${dtype}, per-layer path: ${exact ? 'bit for bit' : 'to rounding (fused step or cuBLAS SGD fold)'}`, async () => {
        const r = await twins(cuda, dtype, optimizer, big);
        const rel = relDiff(asF64(r.step, dtype), asF64(r.primitives, dtype));
        console.log(`primitives-vs-step ${optimizer} ${dtype}: first differing byte ${firstDiff(r.step, r.primitives)}, rel ${rel.toExponential(3)}`);
        if (exact) expect(firstDiff(r.step, r.primitives)).toBe(-1);
        else expect(rel).toBeLessThan(dtype === 'float32' ? 1e-4 : 1e-10);
        for (let i = 0; i < r.stepLoss.length; i++)
          expect(Math.abs(r.primitiveLoss[i]! - r.stepLoss[i]!)).toBeLessThan((dtype === 'float32' ? 1e-5 : 1e-12) * r.stepLoss[i]!);
      });
    }
  }

  // backward() computes the output layer's logits again, so its loss is step()'s also where
  // softmax's probabilities underflow (issue 51: a huge Adam step; from the probabilities it was
  // clamped near -log of the smallest float). Each precision and output path (a head launch up to
  // 32 units, the block kernel above it).
  for (const precision of ['fp32', 'tf32', 'bf16'] as const) {
    for (const outputs of [4, 40]) {
      it(`backward() reports step()'s loss where the probabilities underflow (${precision}, ${outputs} outputs)`, async () => {
        const spec = { layers: [600, 640, outputs], batch: 256, optimizer: 'adam' as const };
        const data = toyData(600, outputs, 256, 3, false);
        const losses: number[] = [];
        for (const way of ['step', 'primitives'] as const) {
          using arena = Arena.create(planLayout(spec), cuda);
          const t = new Trainer(arena, { lr: 1e10, precision });
          t.init(7);
          await t.step(data.x, { labels: data.labels! });
          if (way === 'step') losses.push((await t.step(data.x, { labels: data.labels! })).loss);
          else {
            await t.forward(data.x);
            await t.backward({ labels: data.labels! });
            losses.push((await t.metrics()).loss);
          }
        }
        console.log(`underflow ${precision} ${outputs}: step ${losses[0]}, primitives ${losses[1]}`);
        expect(losses[0]).toBeGreaterThan(1e6);
        // Each row's loss is above 2^62, beyond the exact fixed-point sum (output_row.cuh
        // addLossExact): the 256 rows add up in float32 atomics in no fixed order, each addition
        // rounding by up to 2^-24 (runs of one way differed by 2.4e-7 relative).
        expect(Math.abs(losses[1]! - losses[0]!)).toBeLessThanOrEqual(256 * 2 ** -24 * losses[0]!);
      });
    }
  }

  // The TF32 precisions: step and the primitives both take the per-layer path (the fused kernel
  // is fp32 only) with the same products (cuBLAS TF32 / 3xTF32, or the mma kernels when tiled).
  for (const precision of ['tf32', 'tf32x3'] as const) {
    for (const optimizer of ['sgd', 'adam'] as const) {
      const exact = !(blas && optimizer === 'sgd');
      it(`precision ${precision}, ${optimizer}, float32: ${exact ? 'bit for bit' : 'to rounding (cuBLAS SGD fold)'}`, async () => {
        const r = await twins(cuda, 'float32', optimizer, { ...big, precision });
        const rel = relDiff(asF64(r.step, 'float32'), asF64(r.primitives, 'float32'));
        console.log(`primitives-vs-step ${precision} ${optimizer}: first differing byte ${firstDiff(r.step, r.primitives)}, rel ${rel.toExponential(3)}`);
        if (exact) expect(firstDiff(r.step, r.primitives)).toBe(-1);
        else expect(rel).toBeLessThan(1e-3);
      });
    }
  }

  // K models: the native runs over grid z = K and batched products, per-model lrs. Momentum and
  // Adam: exact on the per-layer path. SGD through cuBLAS: the Train run folds layer 1's step into
  // its batched product (alpha -1, d[1] times each model's lr), so to rounding.
  for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
    const exact = !forcedFused && !(blas && optimizer === 'sgd');
    it(`3 models, ${optimizer}, float32, native Forward + Backward + Update runs: ${exact ? 'bit for bit' : 'to rounding (fused step or cuBLAS SGD fold)'} with Train runs`, async () => {
      const lrs = optimizer === 'adam' ? [0.01, 0.003, 0.02] : [0.1, 0.05, 0.2];
      const r = await modelTwins(cuda, 'float32', optimizer, lrs, big);
      for (let m = 0; m < 3; m++) {
        const rel = relDiff(asF64(r.step[m]!, 'float32'), asF64(r.primitives[m]!, 'float32'));
        console.log(
          `primitives-vs-step models m=${m} ${optimizer}: first differing byte ${firstDiff(r.step[m]!, r.primitives[m]!)}, rel ${rel.toExponential(3)}`,
        );
        if (!exact) expect(rel, `model ${m}`).toBeLessThan(1e-4);
        else expect(firstDiff(r.step[m]!, r.primitives[m]!), `model ${m}`).toBe(-1);
      }
    });
  }

  it('wide outputs (block and warp output kernels): sigmoid + mse and softmax + cross-entropy, adam', async () => {
    for (const [layers, output] of [
      [[64, 96, 300], 'sigmoid'],
      [[64, 96, 300], 'softmax'],
      [[32, 64, 5000], 'softmax'],
    ] as const) {
      const r = await twins(cuda, 'float64', 'adam', { layers: [...layers], batch: 32, output, steps: 3 });
      // Small networks: the step may run fused, so compare to rounding.
      expect(relDiff(asF64(r.step, 'float64'), asF64(r.primitives, 'float64')), `${layers} ${output}`).toBeLessThan(1e-10);
    }
  });

  it('CPU == CUDA for the primitives with a custom loss (dOutput, softmax output) and update()', async () => {
    const spec = {
      layers: [12, 32, 24, 5],
      batch: 16,
      dtype: 'float64' as const,
      optimizer: 'momentum' as const,
      activations: ['relu', 'tanh', 'softmax'] as const,
    };
    const data = toyData(12, 5, 16, 5, false);
    const params: Float64Array[] = [];
    for (const backend of ['cpu', 'cuda'] as const) {
      const arena = Arena.create(planLayout({ ...spec, activations: [...spec.activations] }), { backend });
      try {
        const t = new Trainer(arena, { lr: 0.1 });
        t.init(3);
        for (let s = 0; s < 5; s++) {
          const out = await t.forward(data.x);
          // -log p of the label, mean over rows: dL/dp = -1 / (rows p) at the label
          const dOutput = new Float64Array(out.length);
          data.labels!.forEach((c, r) => {
            dOutput[r * 5 + c] = -1 / (16 * out[r * 5 + c]!);
          });
          await t.backward({ dOutput });
          await t.update();
        }
        t.syncToHost();
        params.push(Float64Array.from([...arena.view(1, 'w'), ...arena.view(2, 'w'), ...arena.view(3, 'w'), ...arena.view(3, 'b')]));
      } finally {
        arena.dispose();
      }
    }
    expect(relDiff(params[0]!, params[1]!)).toBeLessThan(1e-10);
  });

  it('transfers on the device: forward x rows up and output rows down, backward its rows up, update reads the stats', async () => {
    const plan = planLayout({ layers: [8, 16, 4], batch: 10, optimizer: 'adam' });
    const arena = Arena.create(plan, cuda);
    try {
      const t = new Trainer(arena);
      t.init(1);
      const { x, labels } = toyData(8, 4, 6, 2, false);
      const s0 = arena.stats;
      await t.forward(x);
      const s1 = arena.stats;
      await t.backward({ labels: labels! });
      const s2 = arena.stats;
      await t.update();
      const s3 = arena.stats;
      expect([
        s1.toDeviceTransfers - s0.toDeviceTransfers,
        s1.toDeviceBytes - s0.toDeviceBytes,
        s1.toHostTransfers - s0.toHostTransfers,
        s1.toHostBytes - s0.toHostBytes,
      ]).toEqual([1, 6 * 8 * 4, 1, 6 * 4 * 4]);
      expect([s2.toDeviceTransfers - s1.toDeviceTransfers, s2.toDeviceBytes - s1.toDeviceBytes, s2.toHostTransfers - s1.toHostTransfers]).toEqual([
        1,
        6 * 4 * 4,
        0,
      ]);
      // update() reads the stats region back (DIVERGED when the weights went non-finite), nothing else.
      expect([s3.toDeviceTransfers - s2.toDeviceTransfers, s3.toHostTransfers - s2.toHostTransfers, s3.toHostBytes - s2.toHostBytes]).toEqual([
        0,
        1,
        plan.region(2, 'stats')!.bytes,
      ]);
    } finally {
      arena.dispose();
    }
  });

  it('a budgeted arena refuses backward and update with NOT_SUPPORTED; forward works', async () => {
    const plan = planLayout({ layers: [8, 16, 4], batch: 10 });
    const arena = Arena.create(plan, { backend: 'cuda', memory: 'staged', deviceBudget: plan.totalBytes * 2 });
    try {
      const t = new Trainer(arena);
      t.init(1);
      const { x, labels } = toyData(8, 4, 6, 2, false);
      expect((await t.forward(x)).length).toBe(24);
      await expect(t.backward({ labels: labels! })).rejects.toMatchObject({ name: 'ArenaError', code: 'NOT_SUPPORTED' });
      await t.gradients(x, { labels: labels! });
      await expect(t.update()).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    } finally {
      arena.dispose();
    }
  });
});
