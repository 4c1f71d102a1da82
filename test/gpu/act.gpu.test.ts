// The activations and losses of the descriptor tables on CUDA, on whatever path NN_ARENA_STEP_PATH /
// NN_ARENA_GEMM pick (scripts/gpu-session.sh part `act` runs this file on the fused path, the
// per-layer path with cuBLAS and with the tiled kernels): PyTorch's fixtures as on the CPU
// (test/act-torch.test.ts), the CPU's results on wider networks (tiled product edges, the wide
// output kernels), compact == full and K models == one model bit for bit, the TF32 precisions
// near fp32, and data parallelism (2+ GPUs) near one GPU.
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, DataParallel, ncclInfo, planLayout, Trainer, type LayoutSpec, type LossName } from '../../src/index.js';
import { F32_TOLERANCE, replay, TORCH } from '../support/act-torch.js';
import { compactVsFull } from '../support/compact-checks.js';
import { relDiff, toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cuda = { backend: 'cuda' } as const;
const path = process.env.NN_ARENA_STEP_PATH === 'layers' ? (process.env.NN_ARENA_GEMM === 'tiled' ? 'layers (tiled)' : 'layers (cublas)') : 'fused';

/** Parameters, predictions and metrics after a resident fit from one seed. */
async function fitOn(spec: LayoutSpec, backend: 'cpu' | 'cuda', loss?: LossName, extra: { labelSmoothing?: number; precision?: 'tf32' | 'tf32x3' } = {}) {
  using arena = Arena.create(planLayout(spec), { backend });
  const t = new Trainer(arena, { lr: 0.02, ...(loss ? { loss } : {}), ...extra });
  t.init(6);
  const inputs = spec.layers[0]!,
    outputs = spec.layers[spec.layers.length - 1]!;
  const multi = loss === 'bce-with-logits' || loss === 'mse';
  const d = toyData(inputs, outputs, spec.samples!, 4, multi);
  const data = multi ? { x: d.x, y: loss === 'bce-with-logits' ? d.y!.map((v) => (v > 0.3 ? 1 : 0)) : d.y! } : { x: d.x, labels: d.labels! };
  const fit = await t.fit(data, { epochs: 2, seed: 3 });
  const ev = await t.evaluate(data);
  const pred = Float64Array.from(await t.predict(d.x.subarray(0, inputs * Math.min(spec.batch, 9))));
  t.syncToHost();
  const params: number[] = [];
  for (let l = 1; l < spec.layers.length; l++) for (const k of ['w', 'b'] as const) for (const v of arena.view(l, k)) params.push(v);
  return { params: Float64Array.from(params), pred, ev, path: fit.path };
}

describe.skipIf(!hasGpu)(`activations and losses on CUDA (${path})`, () => {
  for (const c of TORCH.cases) {
    it(`PyTorch fixture ${c.name}: float64 to 1e-12, float32 to float32 rounding`, async () => {
      const f64 = await replay(c, 'float64', cuda);
      const f32 = await replay(c, 'float32', cuda);
      console.log(`act ${path} ${c.name}: float64 ${f64.worst.toExponential(2)} (${f64.what}), float32 ${f32.worst.toExponential(2)} (${f32.what})`);
      expect(f64.worst, f64.what).toBeLessThan(1e-12);
      expect(f32.worst, f32.what).toBeLessThan(F32_TOLERANCE);
    });
  }

  // Wider networks: tiled product edges, several tiles per layer, the warp- and block-per-row
  // output kernels (> 32 and > 4096 / 16 units), the fused kernel's output rows.
  const nets: Array<[string, LayoutSpec, LossName | undefined, number]> = [
    [
      'gelu + silu, softmax 10, label smoothing',
      { layers: [100, 130, 70, 10], batch: 33, samples: 99, activations: ['gelu', 'silu', 'softmax'] },
      undefined,
      0.1,
    ],
    [
      'gelu-tanh + softplus, 300 logits, bce-with-logits',
      { layers: [40, 72, 48, 300], batch: 16, samples: 48, activations: ['gelu-tanh', 'softplus', 'identity'] },
      'bce-with-logits',
      0,
    ],
    [
      'leaky-relu 0.2 + gelu, 40 softmax, label smoothing',
      { layers: [30, 64, 64, 40], batch: 20, samples: 60, activations: ['leaky-relu', 'gelu', 'softmax'], leakyReluSlope: 0.2 },
      undefined,
      0.3,
    ],
    ['silu, 12 logits, bce-with-logits', { layers: [24, 96, 12], batch: 32, samples: 64, activations: ['silu', 'identity'] }, 'bce-with-logits', 0],
  ];
  for (const [name, spec, loss, labelSmoothing] of nets) {
    it(`${name}: CUDA == CPU (float64 1e-10)`, async () => {
      const s = { ...spec, dtype: 'float64' as const, optimizer: 'adam' as const };
      const cpu = await fitOn(s, 'cpu', loss, { labelSmoothing });
      const gpu = await fitOn(s, 'cuda', loss, { labelSmoothing });
      console.log(`act ${path} ${name}: params ${relDiff(cpu.params, gpu.params).toExponential(2)}, path ${gpu.path}`);
      expect(gpu.path).toBe(path);
      expect(relDiff(cpu.params, gpu.params)).toBeLessThan(1e-10);
      expect(relDiff(cpu.pred, gpu.pred)).toBeLessThan(1e-10);
      expect(Math.abs(gpu.ev.loss - cpu.ev.loss)).toBeLessThan(1e-10 * Math.abs(cpu.ev.loss));
      expect(gpu.ev.accuracy).toBe(cpu.ev.accuracy);
    });

    it(`${name}: compact == full, bit for bit`, async () => {
      const { full, compact } = await compactVsFull({ ...spec, optimizer: 'momentum' }, cuda, 0.05, loss ? { loss, labelSmoothing } : { labelSmoothing });
      expect(compact.metrics).toEqual(full.metrics);
      expect(Buffer.from(compact.params).equals(Buffer.from(full.params))).toBe(true);
    });

    // Momentum, not Adam: on cuBLAS (to rounding, below) Adam's sign-like first steps would turn a
    // rounding difference in a near-zero gradient into a 2 lr step.
    it(`${name}: K = 3 models, each the bits of a one-model arena`, async () => {
      const one = await fitOn({ ...spec, optimizer: 'momentum' }, 'cuda', loss, { labelSmoothing });
      using arena = Arena.create(planLayout({ ...spec, optimizer: 'momentum', models: 3 }), cuda);
      const t = new Trainer(arena, { lr: 0.02, ...(loss ? { loss } : {}), labelSmoothing });
      t.init([6, 7, 8]);
      const multi = loss === 'bce-with-logits';
      const d = toyData(spec.layers[0]!, spec.layers[spec.layers.length - 1]!, spec.samples!, 4, multi);
      await t.fit(multi ? { x: d.x, y: d.y!.map((v) => (v > 0.3 ? 1 : 0)) } : { x: d.x, labels: d.labels! }, { epochs: 2, seed: 3 });
      t.syncToHost();
      const m0: number[] = [];
      for (let l = 1; l < spec.layers.length; l++) for (const k of ['w', 'b'] as const) for (const v of arena.view(l, k, 0)) m0.push(v);
      if (path === 'layers (cublas)') {
        // cuBLAS picks its kernels by the batch count: K models' strided batched product is not the
        // one-model call's kernel, so sums may be ordered differently (test/gpu/models.gpu.test.ts).
        const d = relDiff(Float64Array.from(m0), one.params);
        console.log(`act ${path} ${name}: K = 3 vs one model, cuBLAS batched ${d.toExponential(2)}`);
        expect(d).toBeLessThan(1e-5);
        return;
      }
      expect(Buffer.from(Float32Array.from(m0).buffer).equals(Buffer.from(Float32Array.from(one.params).buffer))).toBe(true);
    });
  }

  const tf32 = Number(info.computeCapability.split('.')[0]) >= 8;
  it.skipIf(!tf32)('tf32x3 and tf32 train a gelu / silu network near fp32', async () => {
    // SGD: Adam's first steps are about lr x sign(gradient), so a gradient near zero whose rounding
    // flips its sign moves a weight by 2 lr, and the comparison would measure that, not the precision.
    const spec: LayoutSpec = { layers: [256, 512, 256, 10], batch: 64, samples: 192, activations: ['gelu', 'silu', 'softmax'], optimizer: 'sgd' };
    const fp32 = await fitOn(spec, 'cuda', undefined, { labelSmoothing: 0.1 });
    for (const [precision, tol] of [
      ['tf32x3', 1e-4],
      ['tf32', 3e-2],
    ] as const) {
      const r = await fitOn(spec, 'cuda', undefined, { labelSmoothing: 0.1, precision });
      const d = relDiff(fp32.params, r.params);
      console.log(`act ${path} ${precision}: params vs fp32 ${d.toExponential(2)}`);
      expect(d).toBeLessThan(tol);
    }
  });
});

const nccl = hasGpu ? ncclInfo() : { available: false };
describe.skipIf(!(hasGpu && info.devices >= 2 && nccl.available))('activations and losses with data parallelism', () => {
  it('a gelu / leaky-relu network with bce-with-logits: replicas identical, near one GPU on the global batch', async () => {
    const spec = (batch: number): LayoutSpec => ({
      layers: [20, 48, 32, 6],
      batch,
      samples: 64,
      dtype: 'float64',
      activations: ['gelu', 'leaky-relu', 'identity'],
      optimizer: 'adam',
    });
    const group = DataParallel.create(planLayout(spec(16)), { devices: [0, 1] });
    const one = Arena.create(planLayout(spec(32)), cuda);
    try {
      const tg = new Trainer(group, { lr: 0.01, loss: 'bce-with-logits' }),
        t1 = new Trainer(one, { lr: 0.01, loss: 'bce-with-logits' });
      tg.init(3);
      t1.init(3);
      const d = toyData(20, 6, 64, 5, true);
      const data = { x: d.x, y: d.y!.map((v) => (v > 0 ? 1 : 0)) };
      const rg = await tg.fit(data, { epochs: 2, seed: 1 });
      const r1 = await t1.fit(data, { epochs: 2, seed: 1 });
      expect(rg.loss).toBeCloseTo(r1.loss, 9);
      const p = (a: Arena) => {
        a.toHost({ kinds: ['w'] });
        return Float64Array.from([...a.view(1, 'w'), ...a.view(2, 'w'), ...a.view(3, 'w')]);
      };
      const reps = group.replicas.map(p);
      expect(Buffer.from(reps[0]!.buffer).equals(Buffer.from(reps[1]!.buffer))).toBe(true);
      expect(relDiff(p(one), reps[0]!)).toBeLessThan(1e-6);
    } finally {
      group.dispose();
      one.dispose();
    }
  }, 120_000);
});
