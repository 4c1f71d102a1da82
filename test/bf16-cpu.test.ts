// bf16-cpu.test.ts: precision 'bf16' on the CPU backend, emulated (csrc/cpu/gemm_driver.h
// toBf16): each of a layer's three products reads the bf16 roundings (to nearest, ties to even)
// of both its operands and sums in fp32, as the CUDA path's products read its bf16 copies
// (test/gpu/bf16.gpu.test.ts). Checked product by product against a float64 sum of the rounded
// operands, the rounding at its ties, and training beside fp32.
import { describe, expect, it } from 'vitest';
import { Trainer } from '../src/index.js';
import { bf16, checkHalfProducts, kModelsVsOne, passThrough, withArena } from './support/half-checks.js';
import { toyData } from './support/train-checks.js';

describe("precision 'bf16' on the CPU backend (emulated)", () => {
  it('an operand is rounded to bf16 before the product: to nearest, ties to even', () =>
    withArena([1, 1], 5, ['identity'], async (arena) => {
      const t = passThrough(arena, 'bf16');
      expect(t.precision).toBe('bf16');
      // 1 + 2^-8 is half way between 1 and 1 + 2^-7 (bf16 keeps 7 fraction bits): even is 1.
      // 1 + 3 * 2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
      const x = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 1 + 2 ** -8 + 2 ** -20, 3 * 2 ** -140];
      const z = Array.from(await t.forward(Float32Array.from(x)));
      expect(z).toEqual([1, 1 + 2 ** -6, -1, 1 + 2 ** -7, bf16(3 * 2 ** -140)]);
      expect(z.map((v, i) => v === x.map(bf16)[i])).toEqual([true, true, true, true, true]);
      const fp32 = new Trainer(arena, { loss: 'mse' });
      expect(Array.from(await fp32.forward(Float32Array.from(x)))).toEqual(Array.from(Float32Array.from(x)));
    }));

  it('forward, error and weight-gradient products read rounded operands and sum in fp32', () => checkHalfProducts('cpu', 'bf16'));

  it('K = 3 models in one arena: each the bits of a one-model arena from its seed', async () => {
    expect(await kModelsVsOne('cpu', 'bf16')).toBe(0);
  });

  it('trains as fp32 does, within bf16 rounding; deterministic; the weights are fp32 masters', async () => {
    const data = toyData(20, 4, 200, 5, false) as { x: Float64Array; labels: Uint8Array };
    // A learnable class: which of the first 4 inputs is largest.
    data.labels = Uint8Array.from({ length: 200 }, (_, i) => [0, 1, 2, 3].reduce((m, j) => (data.x[i * 20 + j]! > data.x[i * 20 + m]! ? j : m), 0));
    const train = (precision: 'fp32' | 'bf16') =>
      withArena(
        [20, 16, 4],
        20,
        ['tanh', 'softmax'],
        async (arena) => {
          const t = new Trainer(arena, { lr: 0.1, precision });
          t.init(3);
          const r = await t.fit({ x: Float32Array.from(data.x), labels: data.labels }, { epochs: 15, seed: 2 });
          t.syncToHost();
          return { loss: r.loss, accuracy: r.accuracy, w: Float32Array.from(arena.view(1, 'w')) };
        },
        200,
      );
    const [fp32, a, b] = [await train('fp32'), await train('bf16'), await train('bf16')];
    expect(Buffer.compare(Buffer.from(a.w.buffer), Buffer.from(b.w.buffer))).toBe(0);
    expect(a.w).not.toEqual(fp32.w);
    // Masters: an fp32 weight is not in general a bf16 value (its low 16 bits are in use).
    expect(a.w.some((w) => bf16(w) !== w)).toBe(true);
    expect(Math.abs(a.loss - fp32.loss) / fp32.loss).toBeLessThan(0.05);
    expect(Math.abs(a.accuracy - fp32.accuracy)).toBeLessThan(0.05);
    expect(a.loss).toBeLessThan(0.7); // it learned (chance: ln 4 = 1.39)
  });
});
