// CUDA training: the CPU suite's gradient check on the device, and CPU == CUDA after 20 steps
// from one seed. Runs on the GPU machine (NN_ARENA_REQUIRE_GPU=1 bash .gpu/run.sh vitest run test/gpu).
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer } from '../../src/index.js';
import { GRAD_CASES, gradientCheck, relDiff, toyData, trainedParams } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;

describe.skipIf(!hasGpu)('CUDA training', () => {
  const cuda = { backend: 'cuda' } as const;

  // NN_ARENA_GRAD_CASES=n runs the first n cases only (for the compute-sanitizer runs, where
  // every launch is instrumented); the plain GPU run checks all of them.
  const cases = GRAD_CASES.slice(0, Number(process.env.NN_ARENA_GRAD_CASES ?? GRAD_CASES.length));
  it.each(cases.map((c) => [`${c.hidden.join('+')} -> ${c.output}`, c] as const))('gradient check %s', async (_n, c) => {
    const { maxRel, where } = await gradientCheck(c, cuda);
    expect(maxRel, where).toBeLessThanOrEqual(1e-6);
  });

  for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
    it(`20 steps of ${optimizer}: CPU and CUDA weights agree (float32 1e-5, float64 1e-12)`, async () => {
      const f32 = relDiff(await trainedParams({ backend: 'cpu' }, 'float32', optimizer), await trainedParams(cuda, 'float32', optimizer));
      const f64 = relDiff(await trainedParams({ backend: 'cpu' }, 'float64', optimizer), await trainedParams(cuda, 'float64', optimizer));
      console.log(`cpu-vs-cuda ${optimizer}: float32 ${f32.toExponential(3)}, float64 ${f64.toExponential(3)}`);
      expect(f32).toBeLessThanOrEqual(1e-5);
      expect(f64).toBeLessThanOrEqual(1e-12);
    });
  }

  it('trains on managed memory too, with the same result as device memory', async () => {
    const a = await trainedParams(cuda, 'float64', 'adam');
    const b = await trainedParams({ backend: 'cuda', memory: 'managed' }, 'float64', 'adam');
    expect(relDiff(a, b)).toBeLessThanOrEqual(1e-12);
  });

  // Output layers wider than a warp take other code on the GPU (a block or a warp per row,
  // with their own reductions): softmax + cross-entropy and sigmoid + mse, float64.
  for (const [output, loss] of [
    ['softmax', 'cross-entropy'],
    ['sigmoid', 'mse'],
  ] as const) {
    it(`a 300-unit ${output} output layer (${loss}) trains, evaluates and predicts as on the CPU`, async () => {
      const spec = { layers: [20, 40, 300], batch: 16, samples: 64, dtype: 'float64' as const, activations: ['tanh', output] as const };
      const d = toyData(20, 300, 64, 4, loss === 'mse');
      const data = loss === 'mse' ? { x: d.x, y: d.y! } : { x: d.x, labels: d.labels! };
      const out = [];
      for (const backend of ['cpu', 'cuda'] as const) {
        using arena = Arena.create(planLayout({ ...spec, activations: [...spec.activations] }), { backend });
        const t = new Trainer(arena, { lr: 0.05 });
        t.init(2);
        await t.fit(data, { epochs: 3, seed: 5 });
        const m = await t.evaluate(data);
        const params = Float64Array.from([...arena.view(1, 'w'), ...arena.view(2, 'w'), ...arena.view(2, 'b')]);
        out.push({ m, params, pred: Float64Array.from(await t.predict(d.x.subarray(0, 20 * 16))) });
      }
      expect(relDiff(out[0]!.params, out[1]!.params)).toBeLessThan(1e-10);
      expect(relDiff(out[0]!.pred, out[1]!.pred)).toBeLessThan(1e-10);
      expect(Math.abs(out[1]!.m.loss - out[0]!.m.loss)).toBeLessThan(1e-10 * Math.abs(out[0]!.m.loss));
      expect(out[1]!.m.accuracy).toBe(out[0]!.m.accuracy);
    });
  }

  it('predict gives softmax rows; a larger network (tiled GEMM edges) matches the CPU', async () => {
    const spec = { layers: [100, 130, 70, 10], batch: 67, samples: 67 * 3, dtype: 'float64' as const };
    const d = toyData(100, 10, 67 * 3, 8, false);
    const data = { x: d.x, labels: d.labels! };
    const results = [];
    for (const backend of ['cpu', 'cuda'] as const) {
      using arena = Arena.create(planLayout(spec), { backend });
      const t = new Trainer(arena, { lr: 0.1 });
      t.init(5);
      await t.fit(data, { epochs: 2, seed: 2 });
      results.push(await t.predict(d.x.subarray(0, 100 * 5)));
    }
    for (let r = 0; r < 5; r++) expect(Array.from(results[1]!.subarray(r * 10, r * 10 + 10)).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 10);
    expect(relDiff(Float64Array.from(results[0]!), Float64Array.from(results[1]!))).toBeLessThan(1e-10);
  });
});
