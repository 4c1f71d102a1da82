// bf16-cpu.test.ts: precision 'bf16' on the CPU backend, emulated (csrc/cpu/gemm_driver.h
// toBf16): each of a layer's three products reads the bf16 roundings (to nearest, ties to even)
// of both its operands and sums in fp32, as the CUDA path's products read its bf16 copies
// (test/gpu/bf16.gpu.test.ts). Checked product by product against a float64 sum of the rounded
// operands, the rounding at its ties, and training beside fp32.
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer, type Arena as ArenaT } from '../src/index.js';
import { toyData } from './support/train-checks.js';

const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
/** x (a float32 value) rounded to bfloat16, to nearest with ties to even, as a Number. */
function bf16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7fffffff) > 0x7f800000) return NaN;
  u32[0] = (b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000;
  return f32[0]!;
}

function withArena<R>(layers: number[], batch: number, activations: string[], f: (a: ArenaT) => Promise<R>, samples?: number): Promise<R> {
  const arena = Arena.create(planLayout({ layers, batch, activations: activations as never, ...(samples ? { samples } : {}) }), { backend: 'cpu' });
  return f(arena).finally(() => arena.dispose());
}

/** out[r][c] = sum over k of round(a(r, k)) * round(b(k, c)), in float64, with the sum of the
 *  terms' magnitudes (the scale of fp32's summation error). */
function reference(rows: number, cols: number, depth: number, a: (r: number, k: number) => number, b: (k: number, c: number) => number, round: (x: number) => number) {
  const value = new Float64Array(rows * cols), scale = new Float64Array(rows * cols);
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

describe("precision 'bf16' on the CPU backend (emulated)", () => {
  it('an operand is rounded to bf16 before the product: to nearest, ties to even', () =>
    withArena([1, 1], 5, ['identity'], async (arena) => {
      const t = new Trainer(arena, { loss: 'mse', precision: 'bf16' });
      expect(t.precision).toBe('bf16');
      t.init(1);
      arena.view(1, 'w')[0] = 1;
      arena.view(1, 'b')[0] = 0;
      t.markHostChanged();
      // 1 + 2^-8 is half way between 1 and 1 + 2^-7 (bf16 keeps 7 fraction bits): even is 1.
      // 1 + 3 * 2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
      const x = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 1 + 2 ** -8 + 2 ** -20, 3 * 2 ** -140];
      const z = Array.from(await t.forward(Float32Array.from(x)));
      expect(z).toEqual([1, 1 + 2 ** -6, -1, 1 + 2 ** -7, bf16(3 * 2 ** -140)]);
      expect(z.map((v, i) => v === x.map(bf16)[i])).toEqual([true, true, true, true, true]);
      const fp32 = new Trainer(arena, { loss: 'mse' });
      expect(Array.from(await fp32.forward(Float32Array.from(x)))).toEqual(Array.from(Float32Array.from(x)));
    }));

  it('forward, error and weight-gradient products read rounded operands and sum in fp32', () =>
    withArena([5, 4, 3], 6, ['identity', 'identity'], async (arena) => {
      const rows = 6;
      const { x, y } = toyData(5, 3, rows, 11, true) as { x: Float64Array; y: Float64Array };
      const t = new Trainer(arena, { loss: 'mse', precision: 'bf16' });
      t.init(7);
      await t.gradients(x, { y });
      t.syncToHost();
      const v = (l: number, kind: string) => Float64Array.from(arena.view(l, kind as never));
      const [z0, w1, b1, z1, d1, dw1] = [v(0, 'z').subarray(0, rows * 5), v(1, 'w'), v(1, 'b'), v(1, 'z').subarray(0, rows * 4), v(1, 'd').subarray(0, rows * 4), v(1, 'dw')];
      const [w2, b2, z2, d2, dw2] = [v(2, 'w'), v(2, 'b'), v(2, 'z').subarray(0, rows * 3), v(2, 'd').subarray(0, rows * 3), v(2, 'dw')];
      const check = (got: Float64Array, rowsN: number, cols: number, depth: number, a: (r: number, k: number) => number, b: (k: number, c: number) => number, bias: Float64Array | undefined, what: string) => {
        const plus = (ref: ReturnType<typeof reference>) => (bias ? { value: ref.value.map((s, i) => s + bias[i % cols]!), scale: ref.scale.map((s, i) => s + Math.abs(bias[i % cols]!)) } : ref);
        const want = plus(reference(rowsN, cols, depth, a, b, bf16)), plain = plus(reference(rowsN, cols, depth, a, b, (q) => q));
        return expectProduct(got, want, plain, depth, what);
      };
      // z1 = z0 w1^T + b1, z2 = z1 w2^T + b2 (identity), d1 = d2 w2 (identity: f' = 1), dw = d^T z_prev.
      const apart = [
        check(z1, rows, 4, 5, (r, k) => z0[r * 5 + k]!, (k, c) => w1[c * 5 + k]!, b1, 'z1'),
        check(z2, rows, 3, 4, (r, k) => z1[r * 4 + k]!, (k, c) => w2[c * 4 + k]!, b2, 'z2'),
        check(d1, rows, 4, 3, (r, k) => d2[r * 3 + k]!, (k, c) => w2[k * 4 + c]!, undefined, 'd1'),
        check(dw2, 3, 4, rows, (r, k) => d2[k * 3 + r]!, (k, c) => z1[k * 4 + c]!, undefined, 'dw2'),
        check(dw1, 4, 5, rows, (r, k) => d1[k * 4 + r]!, (k, c) => z0[k * 5 + c]!, undefined, 'dw1'),
      ];
      // ... and not the unrounded operands: every product is off those by bf16's relative step (2^-9) somewhere.
      for (const a of apart) expect(a).toBeGreaterThan(2 ** -14);
    }));

  it('trains as fp32 does, within bf16 rounding; deterministic; the weights are fp32 masters', async () => {
    const data = toyData(20, 4, 200, 5, false) as { x: Float64Array; labels: Uint8Array };
    // A learnable class: which of the first 4 inputs is largest.
    data.labels = Uint8Array.from({ length: 200 }, (_, i) => [0, 1, 2, 3].reduce((m, j) => (data.x[i * 20 + j]! > data.x[i * 20 + m]! ? j : m), 0));
    const train = (precision: 'fp32' | 'bf16') =>
      withArena([20, 16, 4], 20, ['tanh', 'softmax'], async (arena) => {
        const t = new Trainer(arena, { lr: 0.1, precision });
        t.init(3);
        const r = await t.fit({ x: Float32Array.from(data.x), labels: data.labels }, { epochs: 15, seed: 2 });
        t.syncToHost();
        return { loss: r.loss, accuracy: r.accuracy, w: Float32Array.from(arena.view(1, 'w')) };
      }, 200);
    const [fp32, a, b] = [await train('fp32'), await train('bf16'), await train('bf16')];
    expect(Buffer.compare(Buffer.from(a.w.buffer), Buffer.from(b.w.buffer))).toBe(0);
    expect(a.w).not.toEqual(fp32.w);
    // Masters: an fp32 weight is not in general a bf16 value (its low 16 bits are in use).
    expect(a.w.some((w) => bf16(w) !== w)).toBe(true);
    expect(Math.abs(a.loss - fp32.loss) / fp32.loss).toBeLessThan(0.05);
    expect(Math.abs(a.accuracy - fp32.accuracy)).toBeLessThan(0.05);
    expect(a.loss).toBeLessThan(0.7);  // it learned (chance: ln 4 = 1.39)
  });
});
