// precision 'fp16' on the GPU: the products read fp16 copies of fp32 operands (cuBLAS, FP16
// inputs, fp32 accumulation), with dynamic loss scaling on the device (csrc/train/loss_scale.h,
// moved by each step's lossScaleKernel so that graphed steps replay it). Checked as the CPU's
// emulation is (test/fp16-cpu.test.ts): the roundings the products read, each product against
// the float64 sum of the rounded operands, the scale's moves step by step, an injected overflow,
// exact resume; and against the CPU backend running the same training.
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, minDeviceBudget, planLayout, Trainer } from '../../src/index.js';
import { checkHalfProducts, fp16, passThrough, withArena } from '../support/half-checks.js';
import { toyData } from '../support/train-checks.js';

const info = cudaInfo();
const gpu = info.built && info.devices > 0 && Number(info.computeCapability.split('.')[0]) >= 7;
const viaBlas = process.env.NN_ARENA_GEMM !== 'tiled' && info.gemm === 'cublas';

/** A learnable 20-input, 4-class set: the class is the largest of the first 4 inputs. */
function classes(n: number, seed: number) {
  const d = toyData(20, 4, n, seed, false) as { x: Float64Array; labels: Uint8Array };
  d.labels = Uint8Array.from({ length: n }, (_, i) => [0, 1, 2, 3].reduce((m, j) => (d.x[i * 20 + j]! > d.x[i * 20 + m]! ? j : m), 0));
  return { x: Float32Array.from(d.x), labels: d.labels };
}

const weights = (a: Arena) => [1, 2].flatMap((l) => [Float32Array.from(a.view(l, 'w')), Float32Array.from(a.view(l, 'b'))]);
const same = (a: Float32Array[], b: Float32Array[]) => a.every((v, i) => Buffer.compare(Buffer.from(v.buffer), Buffer.from(b[i]!.buffer)) === 0);

describe.skipIf(!gpu || !viaBlas)("precision 'fp16' through cuBLAS", () => {
  it('the copies the products read: ties to even, 65504 the largest, infinite from 65520, subnormals from 2^-24', () =>
    withArena([1, 1], 12, ['identity'], async (arena) => {
      const t = passThrough(arena, 'fp16');
      const x = [1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11), 65504, 65519.99, 65520, -70000, 2 ** -25, 3 * 2 ** -25, 2 ** -24, 0.1, -3.3];
      const got = Array.from(await t.forward(Float32Array.from(x)));
      expect(got).toEqual(x.map((v) => Math.fround(fp16(v)) + 0));
    }, undefined, 'cuda'));

  it('forward, error and weight-gradient products read fp16 roundings (the scaled errors) and sum in fp32', () => checkHalfProducts('cuda', 'fp16'));

  it('the scale on the device: halved with each step whose scaled gradients overflow (skipped: the weights stay), doubled after growthInterval good steps', () =>
    withArena([20, 16, 4], 20, ['tanh', 'softmax'], async (arena) => {
      const { x, labels } = classes(20, 3);
      const t = new Trainer(arena, { lr: 0.1, precision: 'fp16', lossScale: { init: 2 ** 36, growthInterval: 3 } });
      t.init(2);
      let good = 0, grew = 0, skipped = 0;
      for (let s = 0; s < 40; s++) {
        const before = weights(arena), scale = t.lossScale!;
        await t.step(x, { labels });
        t.syncToHost();
        if (t.skippedSteps > skipped) {
          expect(same(weights(arena), before)).toBe(true);
          expect(t.lossScale).toBe(scale / 2);
          expect(good).toBe(0);
          skipped = t.skippedSteps;
        } else {
          expect(same(weights(arena), before)).toBe(false);
          good++;
          if (good === 3) { expect(t.lossScale).toBe(scale * 2); good = 0; grew++; } else expect(t.lossScale).toBe(scale);
        }
      }
      expect(skipped).toBeGreaterThan(5);
      expect(grew).toBeGreaterThan(1);
    }, undefined, 'cuda'));

  it('graphed runs move the scale step by step: a 60-step fit skips and grows as 60 single steps do', async () => {
    const data = classes(20 * 60, 4);
    const run = (single: boolean) =>
      withArena([20, 16, 4], 20, ['tanh', 'softmax'], async (arena) => {
        const t = new Trainer(arena, { lr: 0.05, precision: 'fp16', lossScale: { init: 2 ** 30, growthInterval: 4 } });
        t.init(6);
        if (single) for (let s = 0; s < 60; s++) await t.step(data.x.subarray(s * 400, (s + 1) * 400), { labels: data.labels.subarray(s * 20, (s + 1) * 20) });
        else await t.fit(data, { epochs: 1, shuffle: false });
        t.syncToHost();
        return { w: weights(arena), scale: t.lossScale, skipped: t.skippedSteps, steps: t.steps };
      }, 20 * 60, 'cuda');
    const [a, b] = [await run(true), await run(false)];
    expect(a.skipped).toBeGreaterThan(3);
    expect({ scale: b.scale, skipped: b.skipped, steps: b.steps }).toEqual({ scale: a.scale, skipped: a.skipped, steps: a.steps });
    expect(same(b.w, a.w)).toBe(true);
  });

  it('recovers from an injected overflow: the step is skipped, then training goes on near fp32 and near the CPU emulation', async () => {
    const data = classes(200, 5);
    const run = (precision: 'fp32' | 'fp16', backend: 'cpu' | 'cuda') =>
      withArena([20, 16, 4], 20, ['tanh', 'softmax'], async (arena) => {
        const t = new Trainer(arena, { lr: 0.1, precision, ...(precision === 'fp16' ? { lossScale: { init: 2 ** 20 } } : {}) });
        t.init(3);
        await t.fit(data, { epochs: 5, seed: 2 });
        expect(t.skippedSteps).toBe(0);
        const p = Array.from(await t.predict(data.x.subarray(0, 20)));
        const wrong = p.indexOf(Math.min(...p));
        const before = weights(arena), scale = t.lossScale;
        await t.step(data.x.subarray(0, 20), { labels: [wrong] });
        t.syncToHost();
        if (precision === 'fp16') {
          expect(t.skippedSteps).toBe(1);
          expect(same(weights(arena), before)).toBe(true);
          expect(t.lossScale).toBe(scale! / 2);
        }
        const r = await t.fit(data, { epochs: 10, seed: 3 });
        return { loss: r.loss, accuracy: r.accuracy, path: r.path };
      }, 200, backend);
    const [f32, gpu16, cpu16] = [await run('fp32', 'cuda'), await run('fp16', 'cuda'), await run('fp16', 'cpu')];
    console.log(`fp16 injected overflow: loss fp32 ${f32.loss} fp16 cuda ${gpu16.loss} fp16 cpu ${cpu16.loss}; accuracy ${gpu16.accuracy}`);
    expect(gpu16.path).toBe('layers (cublas)');
    expect(gpu16.accuracy).toBeGreaterThan(0.85);
    expect(Math.abs(gpu16.loss - f32.loss)).toBeLessThan(0.1 * f32.loss + 0.01);
    expect(Math.abs(gpu16.loss - cpu16.loss)).toBeLessThan(0.05 * cpu16.loss + 0.005);
  });

  it('clipping with loss scaling: the recorded norms are the true (unscaled) ones, as fp32 records them', async () => {
    const data = classes(100, 8);
    const norms = (precision: 'fp32' | 'fp16') =>
      withArena([20, 16, 4], 20, ['tanh', 'softmax'], async (arena) => {
        const t = new Trainer(arena, { lr: 0.1, precision, clipGradNorm: 0.5, ...(precision === 'fp16' ? { lossScale: { init: 1024 } } : {}) });
        t.init(4);
        await t.fit(data, { epochs: 1, shuffle: false });
        return t.gradNorms;
      }, 100, 'cuda');
    const [a, b] = [await norms('fp32'), await norms('fp16')];
    expect(b.length).toBe(a.length);
    for (let i = 0; i < a.length; i++) expect(Math.abs(b[i]! - a[i]!)).toBeLessThan(0.02 * a[i]!);
  });

  it('exact resume on the GPU: the scale, its growth tracker and the skipped steps come back, and the runs stay bit-identical', () =>
    withArena([20, 16, 4], 20, ['tanh', 'softmax'], async (arena) => {
      const data = classes(100, 7);
      const t = new Trainer(arena, { lr: 0.1, precision: 'fp16', lossScale: { init: 2 ** 30, growthInterval: 4 } });
      t.init(5);
      await t.fit(data, { epochs: 2, seed: 1 });
      const { mkdtempSync, rmSync } = await import('node:fs');
      const { tmpdir } = await import('node:os');
      const { join } = await import('node:path');
      const dir = mkdtempSync(join(tmpdir(), 'nn-arena-fp16-gpu-'));
      try {
        const path = join(dir, 'fp16.ckpt');
        t.save(path);
        const state = { scale: t.lossScale, skipped: t.skippedSteps };
        expect(state.skipped).toBeGreaterThan(0);
        const loaded = Trainer.load(path, { backend: 'cuda' });
        try {
          expect({ scale: loaded.lossScale, skipped: loaded.skippedSteps }).toEqual(state);
          await t.fit(data, { epochs: 3, seed: 2 });
          await loaded.fit(data, { epochs: 3, seed: 2 });
          t.syncToHost();
          loaded.syncToHost();
          expect(same(weights(loaded.arena), weights(arena))).toBe(true);
          expect({ scale: loaded.lossScale, skipped: loaded.skippedSteps }).toEqual({ scale: t.lossScale, skipped: t.skippedSteps });
        } finally {
          loaded.dispose();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 100, 'cuda'));

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
