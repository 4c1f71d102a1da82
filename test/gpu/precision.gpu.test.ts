// The products' precision on the GPU (Trainer option `precision`): each product of a layer
// (forward, error, weight gradient) in fp32, tf32x3 and tf32 against a float64 reference on
// odd sizes, and training N steps in each mode against fp32, measured relative to fp32's own
// distance from float64. Run twice by scripts/gpu-session.sh part `precision`: through cuBLAS,
// and with NN_ARENA_GEMM=tiled (nn-arena's tensor-core kernels, tf32_kernels.cuh).
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, minDeviceBudget, planLayout, Trainer, type LayoutSpec } from '../../src/index.js';
import { runArena } from '../../src/arena/arena.js';
import { OPS, PRECISIONS } from '../../src/native/addon.js';
import { toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const tf32Gpu = hasGpu && Number(info.computeCapability.split('.')[0]) >= 8;
const MODES = ['fp32', 'tf32x3', 'tf32'] as const;
type Mode = (typeof MODES)[number];
const expectedPath = process.env.NN_ARENA_GEMM === 'tiled' || !info.gemm.startsWith('cublas') ? 'layers (tiled)' : 'layers (cublas)';

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

/** C (r x c) = A (r x k) . B^T where B is c x k, in float64. */
function mulBt(a: ArrayLike<number>, b: ArrayLike<number>, r: number, k: number, c: number): Float64Array {
  const out = new Float64Array(r * c);
  for (let i = 0; i < r; i++)
    for (let j = 0; j < c; j++) {
      let s = 0;
      for (let q = 0; q < k; q++) s += a[i * k + q]! * b[j * k + q]!;
      out[i * c + j] = s;
    }
  return out;
}
const transpose = (a: ArrayLike<number>, r: number, c: number) => {
  const t = new Float64Array(r * c);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) t[j * r + i] = a[i * c + j]!;
  return t;
};

/** The three products of a 3-layer identity network with mse (rows x k -> h -> n) in one
 *  precision: forward output z2 (predict), dw2 (weight gradient) and dw1 (through the error
 *  product d1 = d2 . w2), each against float64 computed from the same float32 inputs. */
async function productErrors(mode: Mode, rows: number, k: number, h: number, n: number) {
  const spec: LayoutSpec = { layers: [k, h, n], batch: rows, activations: ['identity', 'identity'] };
  const arena = Arena.create(planLayout(spec), { backend: 'cuda' });
  try {
    const t = new Trainer(arena, { precision: mode, loss: 'mse' });
    t.init(11);
    const { x, y } = toyData(k, n, rows, 17, true);
    const x32 = Float32Array.from(x),
      y32 = Float32Array.from(y!);
    const w1 = Float64Array.from(arena.view(1, 'w')),
      w2 = Float64Array.from(arena.view(2, 'w'));
    const z1 = mulBt(x32, w1, rows, k, h),
      z2 = mulBt(z1, w2, rows, h, n);
    const d2 = z2.map((v, i) => (2 * (v - y32[i]!)) / (rows * n));
    const dw2 = mulBt(transpose(d2, rows, n), transpose(z1, rows, h), n, rows, h);
    const d1 = mulBt(d2, transpose(w2, n, h), rows, n, h);
    const dw1 = mulBt(transpose(d1, rows, h), transpose(x32, rows, k), h, rows, k);
    const out = await t.predict(x32);
    await t.gradients(x32, { y: y32 });
    return { forward: relErr(out, z2), weightGrad: relErr(arena.view(2, 'dw'), dw2), errorAndWeightGrad: relErr(arena.view(1, 'dw'), dw1) };
  } finally {
    arena.dispose();
  }
}

/** Weights after `steps` steps of fit in `dtype` / `mode`, from the same float32 initial weights. */
async function trained(mode: Mode, dtype: 'float32' | 'float64', optimizer: 'sgd' | 'adam', steps: number) {
  const batch = 64;
  const spec: LayoutSpec = { layers: [96, 256, 128, 10], batch, dtype, optimizer, samples: batch * steps, activations: ['relu', 'tanh', 'softmax'] };
  const arena = Arena.create(planLayout(spec), { backend: 'cuda' });
  try {
    const t = new Trainer(arena, { precision: mode, lr: optimizer === 'adam' ? 0.002 : 0.05 });
    t.init(3);
    if (dtype === 'float64') {
      // the float32 start, exactly
      for (let l = 1; l < 4; l++) {
        const w = arena.view(l, 'w');
        w.set(Float32Array.from(w));
      }
      t.markHostChanged();
    }
    const data = toyData(96, 10, batch * steps, 5, false);
    const r = await t.fit({ x: Float32Array.from(data.x), labels: data.labels! }, { epochs: 1, seed: 9 }); // the same inputs in both dtypes
    const w: number[] = [];
    for (let l = 1; l < 4; l++) w.push(...arena.view(l, 'w'), ...arena.view(l, 'b'));
    return { w: Float64Array.from(w), path: r.path, loss: r.loss };
  } finally {
    arena.dispose();
  }
}

describe.skipIf(!tf32Gpu)('precision on the GPU', () => {
  it.each([
    [53, 131, 67, 45],
    [200, 300, 257, 129],
    [256, 784, 1024, 10],
  ])('products rows %i, %i -> %i -> %i: tf32x3 as accurate as fp32, tf32 less', async (rows, k, h, n) => {
    const e: Record<string, Awaited<ReturnType<typeof productErrors>>> = {};
    for (const mode of MODES) e[mode] = await productErrors(mode, rows, k, h, n);
    console.log(`precision products ${rows}x${k}->${h}->${n} [${expectedPath}]: ${JSON.stringify(e)}`);
    for (const p of ['forward', 'weightGrad', 'errorAndWeightGrad'] as const) {
      const fp32 = e.fp32![p],
        x3 = e.tf32x3![p],
        tf32 = e.tf32![p];
      expect(fp32, `fp32 ${p}`).toBeLessThan(1e-5);
      // Tensor cores accumulate each mma in FP32 without a rounded add: measured on the H100, tf32x3
      // products land 4-40x fp32's own distance from float64 (1e-6 relative), TF32 200-1000x.
      expect(x3, `tf32x3 ${p}`).toBeLessThanOrEqual(Math.max(64 * fp32, 2e-6));
      expect(tf32, `tf32 ${p}`).toBeGreaterThan(25 * x3);
      // TF32 really ran (its 10-bit mantissa shows) and is still a usable product.
      expect(tf32, `tf32 ${p}`).toBeGreaterThan(Math.max(20 * fp32, 1e-5));
      expect(tf32, `tf32 ${p}`).toBeLessThan(1e-2);
    }
  });

  for (const optimizer of ['sgd', 'adam'] as const) {
    it(`40 steps of ${optimizer}: tf32x3 within fp32's rounding noise, tf32 further`, async () => {
      const steps = 40;
      const f64 = await trained('fp32', 'float64', optimizer, steps);
      const r: Record<string, Awaited<ReturnType<typeof trained>>> = {};
      for (const mode of MODES) r[mode] = await trained(mode, 'float32', optimizer, steps);
      const noise = relErr(r.fp32!.w, f64.w); // fp32's own distance from float64
      const x3 = relErr(r.tf32x3!.w, r.fp32!.w),
        tf32 = relErr(r.tf32!.w, r.fp32!.w);
      console.log(
        `precision ${optimizer} ${steps} steps: fp32-vs-fp64 ${noise.toExponential(3)}, tf32x3-vs-fp32 ${x3.toExponential(3)} (${(x3 / noise).toFixed(2)}x), ` +
          `tf32-vs-fp32 ${tf32.toExponential(3)} (${(tf32 / noise).toFixed(1)}x); loss fp32 ${r.fp32!.loss} tf32x3 ${r.tf32x3!.loss} tf32 ${r.tf32!.loss}`,
      );
      expect(r.tf32x3!.path).toBe(expectedPath);
      expect(r.tf32!.path).toBe(expectedPath);
      expect(noise).toBeLessThan(1e-2); // Adam's normalised steps carry fp32's rounding further (9e-4 at 40 steps)
      expect(x3).toBeLessThanOrEqual(4 * noise);
      expect(tf32).toBeGreaterThan(x3);
      expect(tf32).toBeLessThan(0.05);
      expect(Math.abs(r.tf32!.loss - r.fp32!.loss)).toBeLessThan(0.05 * r.fp32!.loss);
    });
  }

  it("tf32x3 is refused on a budgeted arena (its workspace would lie outside the budget); 'tf32' runs there", async () => {
    const spec: LayoutSpec = { layers: [64, 128, 10], batch: 32, activations: ['relu', 'softmax'] };
    const plan = planLayout(spec);
    const arena = Arena.create(plan, { backend: 'cuda', memory: 'managed', deviceBudget: minDeviceBudget(plan, 'managed').bytes });
    try {
      expect(() => new Trainer(arena, { precision: 'tf32x3' })).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'precision' }));
      // the native check, for callers that bypass the Trainer
      await expect(runArena(arena, { op: OPS.eval, rows: 1, precision: PRECISIONS.tf32x3 })).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'precision' });
      const t = new Trainer(arena, { precision: 'tf32' });
      t.init(1);
      const { x, labels } = toyData(64, 10, 32, 3, false);
      const m = await t.step(x, { labels: labels! });
      expect(Number.isFinite(m.loss)).toBe(true);
    } finally {
      arena.dispose();
    }
  });
});
