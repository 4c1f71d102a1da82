// The embedding op on the per-layer CUDA path: the PyTorch fixture of
// test/fixtures/gen_embedding.py in float64 to 1e-9, as on the CPU; float32 in each precision
// within its rounding of the CPU; a graphed fit of a batch beyond the gradient kernel's shared
// memory (its sort keys in the shelf) as the CPU trains it; bad indices give NaN outputs.
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/embedding.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer, type LayerSpec } from '../../src/index.js';
import { EMBEDDING_FIXTURE as F, errorsVsTorch, relErr, trainOpsFixture } from '../support/ops-fixtures.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cpu = { backend: 'cpu' } as const,
  cuda = { backend: 'cuda' } as const;

describe.skipIf(!hasGpu)('embedding on CUDA (per-layer path)', () => {
  it('float64: the PyTorch fixture to 1e-9, as on the CPU', async () => {
    const e = errorsVsTorch(await trainOpsFixture('float64', cuda, {}, F), F);
    console.log(`embedding float64 cuda vs torch: ${JSON.stringify(e)}`);
    expect(e.loss).toBeLessThan(1e-12);
    expect(e.norm).toBeLessThan(1e-12);
    expect(e.params).toBeLessThan(1e-9);
    expect(e.predict).toBeLessThan(1e-9);
  });

  it('a compact plan trains bit for bit as the full one, and as the CPU within float64 rounding (no clipping: a compact plan refuses it)', async () => {
    const full = await trainOpsFixture('float64', cuda, { clipGradNorm: 0 }, F);
    expect(await trainOpsFixture('float64', cuda, { clipGradNorm: 0 }, F, true)).toEqual(full);
    const onCpu = await trainOpsFixture('float64', cpu, { clipGradNorm: 0 }, F, true);
    expect(relErr(full.losses, onCpu.losses)).toBeLessThan(1e-12);
  });

  it('float32 fp32, tf32, bf16 and fp16: within their rounding of the CPU', async () => {
    const c = await trainOpsFixture('float32', cpu, {}, F);
    for (const precision of ['fp32', 'tf32', 'bf16', 'fp16'] as const) {
      const ref = precision === 'bf16' || precision === 'fp16' ? await trainOpsFixture('float32', cpu, { precision }, F) : c;
      const g = await trainOpsFixture('float32', cuda, { precision }, F);
      const loss = Math.max(...g.losses.map((x, s) => Math.abs(x - ref.losses[s]!) / ref.losses[s]!));
      let params = 0;
      for (const l of Object.keys(ref.params)) g.params[l]!.w.forEach((v, i) => (params = Math.max(params, Math.abs(v - ref.params[l]!.w[i]!))));
      console.log(`embedding float32 ${precision} cuda vs cpu: loss ${loss.toExponential(2)}, params ${params.toExponential(2)} (absolute)`);
      expect(loss).toBeLessThan({ fp32: 1e-5, tf32: 2e-2, bf16: 2e-2, fp16: 2e-2 }[precision]);
      expect(params).toBeLessThan({ fp32: 1e-4, tf32: 5e-2, bf16: 1e-1, fp16: 1e-1 }[precision]);
    }
  });

  it('a graphed fit with 6,000-row batches (sort keys beyond shared memory) trains as the CPU does (float64)', async () => {
    const layers: LayerSpec[] = [
      4,
      {
        op: 'embedding',
        numeric: 2,
        categorical: [
          { cardinality: 50, dim: 6 },
          { cardinality: 3000, dim: 4 },
        ],
      },
      { units: 32, activation: 'relu' },
      { op: 'layernorm' },
      { units: 3, activation: 'softmax' },
    ];
    const samples = 24000,
      batch = 6000;
    const x = Float64Array.from({ length: samples * 4 }, (_, i) =>
      i % 4 < 2 ? Math.sin(i * 0.37) : Math.floor(Math.abs(Math.sin(i * 1.3)) * 977) % (i % 4 === 2 ? 50 : 3000),
    );
    const labels = Int32Array.from({ length: samples }, (_, i) => (i * 7 + (x[i * 4 + 2]! % 3)) % 3);
    const run = async (backend: typeof cpu | typeof cuda) => {
      using arena = Arena.create(planLayout({ layers, batch, dtype: 'float64', optimizer: 'adamw', samples }), backend);
      const t = new Trainer(arena, { lr: 0.01, weightDecay: 0.01 });
      t.init(3);
      const fit = await t.fit({ x, labels }, { epochs: 3, seed: 2 }); // 12 steps: the CUDA ones graphed after the second
      arena.toHost({ kinds: ['w', 'b'] });
      return {
        loss: fit.loss,
        tables: Array.from(arena.view(1, 'w')),
        w2: Array.from(arena.view(2, 'w')),
        predict: Array.from(await t.predict(x.subarray(0, 400))),
      };
    };
    const [c, g] = [await run(cpu), await run(cuda)];
    console.log(
      `embedding batch ${batch} cuda vs cpu: tables ${relErr(g.tables, c.tables).toExponential(2)}, predict ${relErr(g.predict, c.predict).toExponential(2)}`,
    );
    expect(Math.abs(g.loss - c.loss) / c.loss).toBeLessThan(1e-10);
    expect(relErr(g.tables, c.tables)).toBeLessThan(1e-9);
    expect(relErr(g.w2, c.w2)).toBeLessThan(1e-9);
    expect(relErr(g.predict, c.predict)).toBeLessThan(1e-9);
  });

  it('an index outside its table gives NaN outputs for its row only, as on the CPU', async () => {
    const layers: LayerSpec[] = [
      3,
      {
        op: 'embedding',
        numeric: 1,
        categorical: [
          { cardinality: 4, dim: 2 },
          { cardinality: 5, dim: 3 },
        ],
      },
      { units: 8, activation: 'relu' },
      { units: 2, activation: 'softmax' },
    ];
    using arena = Arena.create(planLayout({ layers, batch: 4 }), cuda);
    const t = new Trainer(arena, { lr: 0.01 });
    t.init(1);
    const out = await t.predict([0.5, 3, 4, 0.5, 4, 0, 0.5, 1, 2.5, -0.5, 0, 0]);
    expect(out.slice(0, 2).every(Number.isFinite)).toBe(true);
    expect(out.slice(2, 6).every(Number.isNaN)).toBe(true);
    expect(out.slice(6, 8).every(Number.isFinite)).toBe(true);
    await expect(t.step([0.5, 9, 0], { labels: [1] })).rejects.toThrow(/category index/);
  });
});
