// half-checks.ts: what precisions 'bf16' and 'fp16' compute, checked on any backend from the
// run's own operands: each of a layer's three products reads the roundings (to nearest, ties to
// even) of both operands and sums in fp32 (test/bf16-cpu.test.ts, test/fp16-cpu.test.ts: the
// CPU's emulation; test/gpu/bf16.gpu.test.ts: cuBLAS from the bf16 copies).
import { expect } from 'vitest';
import { Arena, planLayout, Trainer } from '../../src/index.js';
import { toyData } from './train-checks.js';

const f32 = new Float32Array(1),
  u32 = new Uint32Array(f32.buffer);
/** x (a float32 value) rounded to bfloat16, to nearest with ties to even, as a Number. */
export function bf16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7fffffff) > 0x7f800000) return NaN;
  u32[0] = (b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000;
  return f32[0]!;
}

/** A Trainer of `precision` on a [1, 1] identity arena with w = 1 and b = 0: its forward outputs
 *  are its inputs as the product reads them (rounded). */
export function passThrough(arena: Arena, precision: 'bf16' | 'fp16'): Trainer {
  const t = new Trainer(arena, { loss: 'mse', precision });
  t.init(1);
  arena.view(1, 'w')[0] = 1;
  arena.view(1, 'b')[0] = 0;
  t.markHostChanged();
  return t;
}

/** f on a fresh arena (disposed after). */
/** x rounded to IEEE binary16 (10 fraction bits; exponents down to -14, then multiples of
 *  2^-24), to nearest with ties to even, as a Number; infinite from 65520 up. Written with
 *  arithmetic, apart from the bit-level rounding it checks (csrc/cpu/gemm_driver.h roundPanel). */
export function fp16(x: number): number {
  x = Math.fround(x);
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x),
    sign = Math.sign(x) || (Object.is(x, -0) ? -1 : 1);
  const even = (v: number) => {
    const f = Math.floor(v),
      r = v - f;
    return r > 0.5 ? f + 1 : r < 0.5 ? f : f % 2 === 0 ? f : f + 1;
  };
  if (a >= 65520) return sign * Infinity;
  if (a < 2 ** -14) return sign * even(a * 2 ** 24) * 2 ** -24;
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  const q = 2 ** (e - 10);
  return sign * even(a / q) * q;
}

export function withArena<R>(
  layers: number[],
  batch: number,
  activations: string[],
  f: (a: Arena) => Promise<R>,
  samples?: number,
  backend: 'cpu' | 'cuda' = 'cpu',
): Promise<R> {
  const arena = Arena.create(planLayout({ layers, batch, activations: activations as never, ...(samples ? { samples } : {}) }), { backend });
  return f(arena).finally(() => arena.dispose());
}

/** out[r][c] = sum over k of round(a(r, k)) * round(b(k, c)), in float64, with the sum of the
 *  terms' magnitudes (the scale of fp32's summation error). */
function reference(
  rows: number,
  cols: number,
  depth: number,
  a: (r: number, k: number) => number,
  b: (k: number, c: number) => number,
  round: (x: number) => number,
) {
  const value = new Float64Array(rows * cols),
    scale = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++)
      for (let k = 0; k < depth; k++) {
        const t = round(a(r, k)) * round(b(k, c));
        value[r * cols + c]! += t;
        scale[r * cols + c]! += Math.abs(t);
      }
  return { value, scale };
}

/** Every got[i] within fp32 summation error of want (depth terms), and how far it is from `other` at most. */
function expectProduct(got: ArrayLike<number>, want: ReturnType<typeof reference>, other: ReturnType<typeof reference>, depth: number, what: string): number {
  let apart = 0;
  for (let i = 0; i < got.length; i++) {
    const tol = (depth + 2) * 2 ** -23 * want.scale[i]! + 1e-30;
    expect(Math.abs(got[i]! - want.value[i]!), `${what}[${i}]: ${got[i]} against ${want.value[i]}`).toBeLessThanOrEqual(tol);
    apart = Math.max(apart, Math.abs(got[i]! - other.value[i]!) / (other.scale[i]! || 1));
  }
  return apart;
}

/** A [5, 4, 3] identity network's gradients in `precision` on `backend`: z1, z2, d1, dw2 and dw1
 *  each within fp32 summation error of the float64 sum of the rounded operands (the run's own
 *  z, w and d), and each off the unrounded operands' sum by the format's step somewhere. bf16:
 *  gradients(); fp16 (whose loss scaling runs in step() only): a step of lr 1e-30, which leaves
 *  the weights as they were, and d holds the scaled errors the products read. */
export function checkHalfProducts(backend: 'cpu' | 'cuda', precision: 'bf16' | 'fp16'): Promise<void> {
  const round = precision === 'bf16' ? bf16 : fp16;
  return withArena(
    [5, 4, 3],
    6,
    ['identity', 'identity'],
    async (arena) => {
      const rows = 6;
      const { x, y } = toyData(5, 3, rows, 11, true) as { x: Float64Array; y: Float64Array };
      const t = new Trainer(arena, { loss: 'mse', precision, ...(precision === 'fp16' ? { lr: 1e-30 } : {}) });
      t.init(7);
      if (precision === 'bf16') await t.gradients(x, { y });
      else await t.step(x, { y });
      t.syncToHost();
      const v = (l: number, kind: string) => Float64Array.from(arena.view(l, kind as never));
      const [z0, w1, b1, z1, d1, dw1] = [
        v(0, 'z').subarray(0, rows * 5),
        v(1, 'w'),
        v(1, 'b'),
        v(1, 'z').subarray(0, rows * 4),
        v(1, 'd').subarray(0, rows * 4),
        v(1, 'dw'),
      ];
      const [w2, b2, z2, d2, dw2] = [v(2, 'w'), v(2, 'b'), v(2, 'z').subarray(0, rows * 3), v(2, 'd').subarray(0, rows * 3), v(2, 'dw')];
      const check = (
        got: Float64Array,
        rowsN: number,
        cols: number,
        depth: number,
        a: (r: number, k: number) => number,
        b: (k: number, c: number) => number,
        bias: Float64Array | undefined,
        what: string,
      ) => {
        const plus = (ref: ReturnType<typeof reference>) =>
          bias ? { value: ref.value.map((s, i) => s + bias[i % cols]!), scale: ref.scale.map((s, i) => s + Math.abs(bias[i % cols]!)) } : ref;
        const want = plus(reference(rowsN, cols, depth, a, b, round)),
          plain = plus(reference(rowsN, cols, depth, a, b, (q) => q));
        return expectProduct(got, want, plain, depth, what);
      };
      // z1 = z0 w1^T + b1, z2 = z1 w2^T + b2 (identity), d1 = d2 w2 (identity: f' = 1), dw = d^T z_prev.
      const apart = [
        check(
          z1,
          rows,
          4,
          5,
          (r, k) => z0[r * 5 + k]!,
          (k, c) => w1[c * 5 + k]!,
          b1,
          'z1',
        ),
        check(
          z2,
          rows,
          3,
          4,
          (r, k) => z1[r * 4 + k]!,
          (k, c) => w2[c * 4 + k]!,
          b2,
          'z2',
        ),
        check(
          d1,
          rows,
          4,
          3,
          (r, k) => d2[r * 3 + k]!,
          (k, c) => w2[k * 4 + c]!,
          undefined,
          'd1',
        ),
        check(
          dw2,
          3,
          4,
          rows,
          (r, k) => d2[k * 3 + r]!,
          (k, c) => z1[k * 4 + c]!,
          undefined,
          'dw2',
        ),
        check(
          dw1,
          4,
          5,
          rows,
          (r, k) => d1[k * 4 + r]!,
          (k, c) => z0[k * 5 + c]!,
          undefined,
          'dw1',
        ),
      ];
      // ... and not the unrounded operands: every product is off those by bf16's relative step (2^-9) somewhere.
      for (const a of apart) expect(a).toBeGreaterThan(2 ** -14);
    },
    undefined,
    backend,
  );
}

/** K = 3 models in one arena in `precision` against three one-model arenas from the same seeds
 *  (momentum, 2 epochs): the largest relative difference of any model's weights and biases. The
 *  CPU runs model after model (0 expected: bits); cuBLAS's batched product may order sums
 *  differently from the one-model call. */
// lrs: each model's (one for all by default); sgd with lrs that differ: the CUDA path folds layer
// 1's step into its batched product from a copy of d times each model's lr.
export async function kModelsVsOne(
  backend: 'cpu' | 'cuda',
  precision: 'bf16',
  optimizer: 'momentum' | 'sgd' = 'momentum',
  lrs = [0.02, 0.02, 0.02],
): Promise<number> {
  const layers = [24, 32, 16, 5],
    seeds = [6, 7, 8];
  const spec = { layers, batch: 16, samples: 64, activations: ['relu', 'tanh', 'softmax'] as never, optimizer };
  const d = toyData(24, 5, 64, 4, false) as { x: Float64Array; labels: Uint8Array };
  const data = { x: Float32Array.from(d.x), labels: d.labels };
  const params = (a: Arena, m: number) => layers.slice(1).flatMap((_, i) => [...a.view(i + 1, 'w', m), ...a.view(i + 1, 'b', m)]);
  const k = Arena.create(planLayout({ ...spec, models: 3 }), { backend });
  try {
    const t = new Trainer(k, { lr: lrs, precision });
    t.init(seeds);
    await t.fit(data, { epochs: 2, seed: 3 });
    t.syncToHost();
    let worst = 0;
    for (const [m, seed] of seeds.entries()) {
      const one = Arena.create(planLayout(spec), { backend });
      try {
        const u = new Trainer(one, { lr: lrs[m]!, precision });
        u.init(seed);
        await u.fit(data, { epochs: 2, seed: 3 });
        u.syncToHost();
        const a = params(k, m),
          b = params(one, 0);
        let num = 0,
          den = 0;
        for (let i = 0; i < b.length; i++) {
          num = Math.max(num, Math.abs(a[i]! - b[i]!));
          den = Math.max(den, Math.abs(b[i]!));
        }
        worst = Math.max(worst, num / den);
      } finally {
        one.dispose();
      }
    }
    return worst;
  } finally {
    k.dispose();
  }
}
