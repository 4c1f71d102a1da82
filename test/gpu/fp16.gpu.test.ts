// precision 'fp16' on the GPU: the products read fp16 copies of fp32 operands (cuBLAS, FP16
// inputs, fp32 accumulation), with dynamic loss scaling on the device (csrc/train/loss_scale.h,
// moved by each step's lossScaleKernel so that graphed steps replay it). Checked as the CPU's
// emulation is (test/fp16-cpu.test.ts): the roundings the products read, each product against
// the float64 sum of the rounded operands, the scale's moves step by step, an injected overflow,
// exact resume; and against the CPU backend running the same training.
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, minDeviceBudget, planLayout, Trainer } from '../../src/index.js';
import { checkResumeWithScaler, checkScaleMoves, classes, injectedOverflow, same, weights } from '../support/fp16-checks.js';
import { checkHalfProducts, fp16, passThrough, withArena } from '../support/half-checks.js';

const info = cudaInfo();
const gpu = info.built && info.devices > 0 && Number(info.computeCapability.split('.')[0]) >= 7;
const viaBlas = process.env.NN_ARENA_GEMM !== 'tiled' && info.gemm.startsWith('cublas');

describe.skipIf(!gpu || !viaBlas)("precision 'fp16' through cuBLAS", () => {
  it('the copies the products read: ties to even, 65504 the largest, infinite from 65520, subnormals from 2^-24', () =>
    withArena(
      [1, 1],
      12,
      ['identity'],
      async (arena) => {
        const t = passThrough(arena, 'fp16');
        const x = [1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11), 65504, 65519.99, 65520, -70000, 2 ** -25, 3 * 2 ** -25, 2 ** -24, 0.1, -3.3];
        const got = Array.from(await t.forward(Float32Array.from(x)));
        expect(got).toEqual(x.map((v) => Math.fround(fp16(v)) + 0));
      },
      undefined,
      'cuda',
    ));

  it('forward, error and weight-gradient products read fp16 roundings (the scaled errors) and sum in fp32', () => checkHalfProducts('cuda', 'fp16'));

  it('the scale on the device: halved with each step whose scaled gradients overflow (skipped: the weights stay), doubled after growthInterval good steps', () =>
    checkScaleMoves('cuda'));

  it('graphed runs move the scale step by step: a 60-step fit skips and grows as 60 single steps do', async () => {
    const data = classes(20 * 60, 4);
    const run = (single: boolean) =>
      withArena(
        [20, 16, 4],
        20,
        ['tanh', 'softmax'],
        async (arena) => {
          const t = new Trainer(arena, { lr: 0.05, precision: 'fp16', lossScale: { init: 2 ** 30, growthInterval: 4 } });
          t.init(6);
          if (single)
            for (let s = 0; s < 60; s++) await t.step(data.x.subarray(s * 400, (s + 1) * 400), { labels: data.labels.subarray(s * 20, (s + 1) * 20) });
          else await t.fit(data, { epochs: 1, shuffle: false });
          t.syncToHost();
          return { w: weights(arena), scale: t.lossScale, skipped: t.skippedSteps, steps: t.steps };
        },
        20 * 60,
        'cuda',
      );
    const [a, b] = [await run(true), await run(false)];
    expect(a.skipped).toBeGreaterThan(3);
    expect({ scale: b.scale, skipped: b.skipped, steps: b.steps }).toEqual({ scale: a.scale, skipped: a.skipped, steps: a.steps });
    expect(same(b.w, a.w)).toBe(true);
  });

  it('recovers from an injected overflow: the step is skipped, then training goes on near fp32 and near the CPU emulation', async () => {
    const [f32, gpu16, cpu16] = [await injectedOverflow('fp32', 'cuda'), await injectedOverflow('fp16', 'cuda'), await injectedOverflow('fp16', 'cpu')];
    console.log(`fp16 injected overflow: loss fp32 ${f32.loss} fp16 cuda ${gpu16.loss} fp16 cpu ${cpu16.loss}; accuracy ${gpu16.accuracy}`);
    expect(gpu16.path).toBe('layers (cublas)');
    expect(gpu16.accuracy).toBeGreaterThan(0.85);
    expect(Math.abs(gpu16.loss - f32.loss)).toBeLessThan(0.1 * f32.loss + 0.01);
    expect(Math.abs(gpu16.loss - cpu16.loss)).toBeLessThan(0.05 * cpu16.loss + 0.005);
  });

  it('clipping with loss scaling: the recorded norms are the true (unscaled) ones, as fp32 records them', async () => {
    const data = classes(100, 8);
    const norms = (precision: 'fp32' | 'fp16') =>
      withArena(
        [20, 16, 4],
        20,
        ['tanh', 'softmax'],
        async (arena) => {
          const t = new Trainer(arena, { lr: 0.1, precision, clipGradNorm: 0.5, ...(precision === 'fp16' ? { lossScale: { init: 1024 } } : {}) });
          t.init(4);
          await t.fit(data, { epochs: 1, shuffle: false });
          return t.gradNorms;
        },
        100,
        'cuda',
      );
    const [a, b] = [await norms('fp32'), await norms('fp16')];
    expect(b.length).toBe(a.length);
    for (let i = 0; i < a.length; i++) expect(Math.abs(b[i]! - a[i]!)).toBeLessThan(0.02 * a[i]!);
  });

  it('exact resume on the GPU: the scale, its growth tracker and the skipped steps come back, and the runs stay bit-identical', () =>
    checkResumeWithScaler('cuda'));

  it('refused with a deviceBudget (BAD_OPTION naming precision: the fp16 copies are a workspace beside the arena)', () => {
    const plan = planLayout({ layers: [64, 128, 10], batch: 32, activations: ['relu', 'softmax'] });
    const b = Arena.create(plan, { backend: 'cuda', memory: 'managed', deviceBudget: minDeviceBudget(plan, 'managed').bytes });
    try {
      expect(() => new Trainer(b, { precision: 'fp16' })).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'precision' }));
    } finally {
      b.dispose();
    }
  });
});
