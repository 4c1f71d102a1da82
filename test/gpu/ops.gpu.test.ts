// The ops of the layer table (layernorm, rmsnorm, dropout, residual) on the per-layer CUDA
// path: the PyTorch fixture of test/fixtures/gen_ops.py in float64 to 1e-9 as on the CPU;
// float32, tf32, bf16 and fp16 within their rounding of the CPU; dropout's masks equal to the CPU's, step by
// step in a graphed fit; the tabular network's fit the same bytes run to run and without the side
// stream; K models of every op as one-model arenas and as the CPU.
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/ops.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer, type LayerSpec } from '../../src/index.js';
import { ALPHA_DROPOUT_FIXTURE, errorsVsTorch, EVERY_OP_NET, everyOpRows, relErr, trainOpsFixture } from '../support/ops-fixtures.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cpu = { backend: 'cpu' } as const,
  cuda = { backend: 'cuda' } as const;

describe.skipIf(!hasGpu)('ops on CUDA (per-layer path)', () => {
  it('float64: the PyTorch fixture to 1e-9, as on the CPU', async () => {
    const e = errorsVsTorch(await trainOpsFixture('float64', cuda));
    console.log(`ops float64 cuda vs torch: ${JSON.stringify(e)}`);
    expect(e.loss).toBeLessThan(1e-12);
    expect(e.norm).toBeLessThan(1e-12);
    expect(e.params).toBeLessThan(1e-9);
    expect(e.predict).toBeLessThan(1e-9);
  });

  it('alpha-dropout, float64: the PyTorch fixture to 1e-9, and float32 within rounding of the CPU', async () => {
    const e = errorsVsTorch(await trainOpsFixture('float64', cuda, {}, ALPHA_DROPOUT_FIXTURE), ALPHA_DROPOUT_FIXTURE);
    console.log(`alpha-dropout float64 cuda vs torch: ${JSON.stringify(e)}`);
    expect(e.params).toBeLessThan(1e-9);
    expect(e.predict).toBeLessThan(1e-9);
    const [c, g] = [await trainOpsFixture('float32', cpu, {}, ALPHA_DROPOUT_FIXTURE), await trainOpsFixture('float32', cuda, {}, ALPHA_DROPOUT_FIXTURE)];
    expect(Math.max(...g.losses.map((x, s) => Math.abs(x - c.losses[s]!) / c.losses[s]!))).toBeLessThan(1e-5);
  });

  it('float32 fp32, tf32, bf16 and fp16: within their rounding of the CPU', async () => {
    const c = await trainOpsFixture('float32', cpu);
    for (const precision of ['fp32', 'tf32', 'bf16', 'fp16'] as const) {
      // bf16 and fp16 against the CPU's emulation of the same roundings (the products read
      // 16-bit operands on both); fp32 and tf32 against fp32
      const ref = precision === 'bf16' || precision === 'fp16' ? await trainOpsFixture('float32', cpu, { precision }) : c;
      const g = await trainOpsFixture('float32', cuda, { precision });
      const loss = Math.max(...g.losses.map((x, s) => Math.abs(x - ref.losses[s]!) / ref.losses[s]!));
      let params = 0; // largest |difference| of any parameter: AdamW moves each by up to lr a step whatever its size
      for (const l of Object.keys(ref.params)) g.params[l]!.w.forEach((v, i) => (params = Math.max(params, Math.abs(v - ref.params[l]!.w[i]!))));
      console.log(`ops float32 ${precision} cuda vs cpu: loss ${loss.toExponential(2)}, params ${params.toExponential(2)} (absolute)`);
      expect(loss).toBeLessThan({ fp32: 1e-5, tf32: 2e-2, bf16: 2e-2, fp16: 2e-2 }[precision]);
      expect(params).toBeLessThan({ fp32: 1e-4, tf32: 5e-2, bf16: 1e-1, fp16: 1e-1 }[precision]);
    }
  });

  it('a graphed fit drops the units the CPU drops, every step (float64: the same values)', async () => {
    const layers: LayerSpec[] = [
      8,
      { units: 64, activation: 'relu' },
      { op: 'layernorm' },
      { op: 'dropout', p: 0.4 },
      { units: 64 },
      { op: 'residual', from: 1 },
      { op: 'rmsnorm' },
      { units: 4, activation: 'softmax' },
    ];
    const samples = 640;
    const x = Float64Array.from({ length: samples * 8 }, (_, i) => Math.sin(i * 0.37));
    const labels = Int32Array.from({ length: samples }, (_, i) => (i * 7) % 4);
    const run = async (backend: typeof cpu | typeof cuda) => {
      using arena = Arena.create(planLayout({ layers, batch: 32, dtype: 'float64', optimizer: 'adamw', samples }), backend);
      const t = new Trainer(arena, { lr: 0.003, dropoutSeed: 11 });
      t.init(3);
      const fit = await t.fit({ x, labels }, { epochs: 3, seed: 2 }); // 60 steps: the CUDA ones graphed after the second
      arena.toHost({ kinds: ['w', 'b', 'z'] });
      return { loss: fit.loss, w: [1, 2, 4, 6, 7].flatMap((l) => Array.from(arena.view(l, 'w'))), z3: Array.from(arena.view(3, 'z')) };
    };
    const [a, b] = [await run(cpu), await run(cuda)];
    expect(Math.abs(b.loss - a.loss) / a.loss).toBeLessThan(1e-10);
    expect(relErr(b.w, a.w)).toBeLessThan(1e-9);
    expect(b.z3.map((v) => v === 0)).toEqual(a.z3.map((v) => v === 0)); // the last step's mask
  });

  it("the tabular network's fit: the same bytes run to run, and with the side stream off (fp32, tf32, bf16)", async () => {
    // the launches of a network with ops that fuse (a bias gradient with the op above it, the
    // sums of a narrow layer over blocks, an embedding's NaN rows in the output launch) and the
    // work beside the chain must leave what one stream of plain launches leaves
    const layers: LayerSpec[] = [
      66,
      {
        op: 'embedding',
        numeric: 64,
        categorical: [
          { cardinality: 10, dim: 8 },
          { cardinality: 1000, dim: 16 },
        ],
      },
      { units: 256, activation: 'relu' },
      { op: 'layernorm' },
      { units: 256, activation: 'relu' },
      { op: 'dropout', p: 0.1 },
      { units: 256 },
      { op: 'residual', from: 2 },
      { op: 'rmsnorm' },
      { units: 2, activation: 'softmax' },
    ];
    const n = 2048;
    const x = new Float32Array(n * 66),
      labels = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < 64; j++) x[i * 66 + j] = Math.sin(i * 66 + j);
      x[i * 66 + 64] = i % 10;
      x[i * 66 + 65] = (i * 7) % 1000;
      labels[i] = x[i * 66]! > 0 ? 1 : 0;
    }
    const saved = process.env.NN_ARENA_SIDE_STREAM;
    try {
      for (const precision of ['fp32', 'tf32', 'bf16'] as const) {
        const bytes: Buffer[] = [];
        for (const side of ['1', '1', '0']) {
          process.env.NN_ARENA_SIDE_STREAM = side;
          using arena = Arena.create(planLayout({ layers, batch: 256, optimizer: 'adamw', samples: n }), cuda);
          const t = new Trainer(arena, { lr: 1e-3, precision });
          t.init(3);
          await t.fit({ x, labels }, { epochs: 2, seed: 5 });
          bytes.push(Buffer.from(arena.bytes(0, arena.plan.totalBytes)));
        }
        expect(bytes[1]!.equals(bytes[0]!), `${precision}: run to run`).toBe(true);
        expect(bytes[2]!.equals(bytes[0]!), `${precision}: NN_ARENA_SIDE_STREAM=0`).toBe(true);
      }
    } finally {
      if (saved === undefined) delete process.env.NN_ARENA_SIDE_STREAM;
      else process.env.NN_ARENA_SIDE_STREAM = saved;
    }
  });

  it('K models with every op: each model as a one-model CUDA arena of it, and as the CPU K-model arena (float64)', async () => {
    const spec = {
      layers: [...EVERY_OP_NET],
      batch: 8,
      dtype: 'float64' as const,
      optimizer: 'adamw' as const,
    };
    const x = everyOpRows(8, 0.7);
    const labels = Int32Array.from({ length: 8 }, (_, i) => i % 3);
    const run = async (models: number, m: number, backend: typeof cpu | typeof cuda) => {
      using arena = Arena.create(planLayout({ ...spec, models }), backend);
      const t = new Trainer(arena, { lr: 0.01, dropoutSeed: 9, clipGradNorm: 1 });
      t.init(models === 1 ? 5 : [6, 5].slice(0, models));
      for (let s = 0; s < 4; s++) await t.step(x, { labels });
      arena.toHost({ kinds: ['w', 'b'] });
      return [1, 2, 3, 5, 7, 8].flatMap((l) => [...Array.from(arena.view(l, 'w', m)), ...(arena.plan.region(l, 'b') ? Array.from(arena.view(l, 'b', m)) : [])]);
    };
    const k = await run(2, 1, cuda);
    const one = await run(1, 0, cuda);
    const host = await run(2, 1, cpu);
    console.log(`ops K models cuda: vs one model ${relErr(k, one).toExponential(2)}, vs the CPU ${relErr(k, host).toExponential(2)}`);
    expect(relErr(k, one)).toBeLessThan(1e-12);
    expect(relErr(k, host)).toBeLessThan(1e-9);
  });
});
