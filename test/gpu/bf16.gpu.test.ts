// precision 'bf16' on the GPU: the products read bf16 roundings of fp32 operands (weights,
// activations, errors) and accumulate in fp32; the arena stays fp32 (the master weights). Checked
// against a float64 reference and against fp32 training: bf16's 8-bit mantissa shows (it is not
// fp32 running under another name), and training tracks fp32. Through cuBLAS only: with
// NN_ARENA_GEMM=tiled the run is refused (typed).
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, minDeviceBudget, planLayout, Trainer, type LayoutSpec } from '../../src/index.js';
import { runArena } from '../../src/arena/arena.js';
import { OPS, PRECISIONS } from '../../src/native/addon.js';
import { checkHalfProducts, kModelsVsOne } from '../support/half-checks.js';
import { toyData } from '../support/train-checks.js';

const info = cudaInfo();
const bf16Gpu = info.built && info.devices > 0 && Number(info.computeCapability.split('.')[0]) >= 8;
const viaBlas = process.env.NN_ARENA_GEMM !== 'tiled' && info.gemm.startsWith('cublas');

/** max |got - ref| / max |ref| */
function relErr(got: ArrayLike<number>, ref: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < ref.length; i++) {
    num = Math.max(num, Math.abs(got[i]! - ref[i]!));
    den = Math.max(den, Math.abs(ref[i]!));
  }
  return num / den;
}

/** An identity network's output (rows x k -> h -> n) in one precision against float64 from the same float32 values. */
async function forwardError(precision: 'fp32' | 'tf32' | 'bf16', rows: number, k: number, h: number, n: number) {
  const arena = Arena.create(planLayout({ layers: [k, h, n], batch: rows, activations: ['identity', 'identity'] }), { backend: 'cuda' });
  try {
    const t = new Trainer(arena, { precision, loss: 'mse' });
    t.init(11);
    const x = Float32Array.from(toyData(k, n, rows, 17, true).x);
    const w1 = arena.view(1, 'w'),
      w2 = arena.view(2, 'w'),
      b1 = arena.view(1, 'b'),
      b2 = arena.view(2, 'b');
    const ref = new Float64Array(rows * n),
      z1 = new Float64Array(h);
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < h; j++) {
        let s = b1[j]!;
        for (let q = 0; q < k; q++) s += x[r * k + q]! * w1[j * k + q]!;
        z1[j] = s;
      }
      for (let j = 0; j < n; j++) {
        let s = b2[j]!;
        for (let q = 0; q < h; q++) s += z1[q]! * w2[j * h + q]!;
        ref[r * n + j] = s;
      }
    }
    return relErr(await t.predict(x), ref);
  } finally {
    arena.dispose();
  }
}

/** Train `steps` steps in `precision` from one seed; the weights, and the last epoch's loss. */
async function train(precision: 'fp32' | 'bf16', layers: number[], batch: number, optimizer: 'sgd' | 'adam', stepsPerEpoch: number, epochs: number) {
  const activations = [...layers.slice(1, -1).map(() => 'relu' as const), 'softmax' as const];
  const spec: LayoutSpec = { layers, batch, optimizer, samples: batch * stepsPerEpoch, activations };
  const arena = Arena.create(planLayout(spec), { backend: 'cuda' });
  try {
    const t = new Trainer(arena, { precision, lr: optimizer === 'adam' ? 1e-3 : 0.05 });
    t.init(3);
    const data = toyData(layers[0]!, layers.at(-1)!, batch * stepsPerEpoch, 5, false);
    // learnable labels: the class of the largest of the first `classes` inputs
    const classes = layers.at(-1)!,
      k = layers[0]!;
    const labels = Uint8Array.from({ length: batch * stepsPerEpoch }, (_, r) => {
      let at = 0;
      for (let c = 1; c < classes; c++) if (data.x[r * k + c]! > data.x[r * k + at]!) at = c;
      return at;
    });
    const r = await t.fit({ x: Float32Array.from(data.x), labels }, { epochs, seed: 9 });
    const parts = [];
    for (let l = 1; l < layers.length; l++) parts.push(arena.view(l, 'w'), arena.view(l, 'b'));
    const w = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      w.set(p, at);
      at += p.length;
    }
    return { w, loss: r.loss, path: r.path };
  } finally {
    arena.dispose();
  }
}

describe.skipIf(!bf16Gpu || !viaBlas)('bf16 through cuBLAS', () => {
  // The CPU emulation's own check (test/bf16-cpu.test.ts): the two backends compute the same thing.
  it('each product reads bf16 roundings of both operands and sums in fp32', () => checkHalfProducts('cuda', 'bf16'));

  it.each([
    [53, 131, 67, 45],
    [256, 784, 1024, 10],
  ])('forward rows %i, %i -> %i -> %i: bf16 rounding shows, bounded', async (rows, k, h, n) => {
    const fp32 = await forwardError('fp32', rows, k, h, n),
      tf32 = await forwardError('tf32', rows, k, h, n),
      bf16 = await forwardError('bf16', rows, k, h, n);
    console.log(`bf16 forward ${rows}x${k}->${h}->${n}: fp32 ${fp32.toExponential(2)} tf32 ${tf32.toExponential(2)} bf16 ${bf16.toExponential(2)}`);
    expect(fp32).toBeLessThan(1e-5);
    expect(bf16).toBeGreaterThan(tf32); // 8 mantissa bits against TF32's 10
    expect(bf16).toBeGreaterThan(100 * fp32);
    expect(bf16).toBeLessThan(3e-2);
  });

  for (const optimizer of ['sgd', 'adam'] as const) {
    it(`40 steps of ${optimizer}: bf16 near fp32, and not fp32`, async () => {
      const f = await train('fp32', [96, 256, 128, 10], 64, optimizer, 40, 1),
        b = await train('bf16', [96, 256, 128, 10], 64, optimizer, 40, 1);
      const d = relErr(b.w, f.w);
      console.log(`bf16 ${optimizer} 40 steps: weights vs fp32 ${d.toExponential(3)}; loss fp32 ${f.loss} bf16 ${b.loss}`);
      expect(b.path).toBe('layers (cublas)');
      expect(d).toBeGreaterThan(1e-6);
      expect(d).toBeLessThan(0.05);
      expect(Math.abs(b.loss - f.loss)).toBeLessThan(0.05 * f.loss);
    });
  }

  it("1,000 SGD steps of M (784-1024-1024-10, batch 256): bf16's loss tracks fp32's within 1%", async () => {
    const f = await train('fp32', [784, 1024, 1024, 10], 256, 'sgd', 100, 10),
      b = await train('bf16', [784, 1024, 1024, 10], 256, 'sgd', 100, 10);
    console.log(`bf16 M 1000 sgd steps: last epoch loss fp32 ${f.loss} bf16 ${b.loss} (${((b.loss / f.loss - 1) * 100).toFixed(3)}%)`);
    expect(Math.abs(b.loss / f.loss - 1)).toBeLessThan(0.01);
  }, 120_000);

  it('K = 3 models in one arena (batched bf16 products, per-model copies): each model trains as a one-model arena from its seed', async () => {
    const d = await kModelsVsOne('cuda', 'bf16');
    console.log(`bf16 K = 3 vs one model: ${d.toExponential(2)}`);
    expect(d).toBeLessThan(1e-3);
  });

  it("K = 3 SGD models with their own lrs (layer 1 folds its step: a copy of d times each model's lr): each trains as a one-model arena", async () => {
    const d = await kModelsVsOne('cuda', 'bf16', 'sgd', [0.05, 0.02, 0.01]);
    console.log(`bf16 K = 3 sgd, own lrs, vs one model: ${d.toExponential(2)}`);
    expect(d).toBeLessThan(1e-3);
  });

  it('refused where it cannot run: a deviceBudget (BAD_OPTION naming precision)', async () => {
    const plan = planLayout({ layers: [64, 128, 10], batch: 32, activations: ['relu', 'softmax'] });
    const b = Arena.create(plan, { backend: 'cuda', memory: 'managed', deviceBudget: minDeviceBudget(plan, 'managed').bytes });
    try {
      expect(() => new Trainer(b, { precision: 'bf16' })).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'precision' }));
      await expect(runArena(b, { op: OPS.eval, rows: 1, loss: 0, precision: PRECISIONS.bf16 })).rejects.toMatchObject({
        code: 'BAD_OPTION',
        field: 'precision',
      });
    } finally {
      b.dispose();
    }
  });
});

describe.skipIf(!bf16Gpu || viaBlas)('bf16 without cuBLAS', () => {
  it('is refused with NOT_SUPPORTED (its products exist only through cuBLAS)', async () => {
    const a = Arena.create(planLayout({ layers: [16, 8, 4], batch: 4, activations: ['relu', 'softmax'] }), { backend: 'cuda' });
    try {
      await expect(runArena(a, { op: OPS.eval, rows: 1, loss: 0, precision: PRECISIONS.bf16 })).rejects.toMatchObject({
        code: 'NOT_SUPPORTED',
        message: expect.stringContaining("precision 'bf16' computes its products through cuBLAS"),
      });
    } finally {
      a.dispose();
    }
  });
});
