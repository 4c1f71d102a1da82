// The optimizers, schedules and clipping on every CUDA path, against the CPU backend (and so
// against PyTorch's fixtures, test/optimizers.test.ts): the fixture cases of gen_optim.py on the
// path this process takes (small networks: the fused kernel, clipping with a grid-wide norm
// phase; NN_ARENA_STEP_PATH=layers: cuBLAS; with NN_ARENA_GEMM=tiled: nn-arena's tiled
// products; NN_ARENA_STEP_PATH=fused forces the fused kernel), the TF32 precisions, K models with their own rates, and a data-parallel group
// (2+ GPUs) whose clipping takes the norm after the all-reduce.
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/optimizers.gpu.test.ts
//   NN_ARENA_STEP_PATH=layers NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/optimizers.gpu.test.ts
//   NN_ARENA_STEP_PATH=layers NN_ARENA_GEMM=tiled NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/optimizers.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, DataParallel, ncclInfo, planLayout, Trainer } from '../../src/index.js';
import { handleOf } from '../../src/arena/arena.js';
import { FIXTURES, FLOOR, maxRelError, trainCase, trainerOptions, weightTolerance } from '../support/optim-fixtures.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cpu = { backend: 'cpu' } as const,
  cuda = { backend: 'cuda' } as const;

describe.skipIf(!hasGpu)(`optimizers on CUDA (${process.env.NN_ARENA_STEP_PATH ?? 'auto'} path, gemm ${process.env.NN_ARENA_GEMM ?? info.gemm})`, () => {
  it.each(FIXTURES.cases.map((c) => [c.name, c] as const))(
    '%s: CUDA matches PyTorch as the CPU does (float64 1e-12; float32 within its rounding), norms and rates too',
    async (_n, c) => {
      for (const dtype of ['float64', 'float32'] as const) {
        const [a, b] = [await trainCase(c, dtype, cpu), await trainCase(c, dtype, cuda)];
        const rel = maxRelError(b, a, FLOOR),
          torch = maxRelError(b, c[dtype], FLOOR),
          tol = weightTolerance(c, dtype);
        console.log(`${c.name} ${dtype}: cuda vs cpu ${rel.toExponential(2)}, cuda vs torch ${torch.toExponential(2)} (tolerance ${tol.toExponential(2)})`);
        // The real thing first: CUDA as close to PyTorch as test/optimizers.test.ts holds the CPU;
        // so the two backends are within twice that of each other.
        expect(torch, `${c.name} ${dtype} vs torch`).toBeLessThanOrEqual(tol);
        expect(rel, `${c.name} ${dtype}`).toBeLessThanOrEqual(dtype === 'float64' ? 1e-12 : 2 * tol);
        expect(b.lrs).toEqual(a.lrs);
        expect(b.gradNorms.length).toBe(a.gradNorms.length);
        b.gradNorms.forEach((n, s) => expect(Math.abs(n - a.gradNorms[s]!) / a.gradNorms[s]!).toBeLessThanOrEqual(dtype === 'float64' ? 1e-12 : 1e-5));
      }
    },
  );

  const tf32 = info.computeCapability >= '8.0';
  it.skipIf(!tf32).each(['tf32', 'tf32x3'] as const)('%s: AdamW + cosine + clipping trains as fp32 does (within the precision)', async (precision) => {
    const c = FIXTURES.cases.find((x) => x.name === 'adamw-cosine-clip')!;
    const fp32 = await trainCase(c, 'float32', cuda);
    const got = await trainCase(c, 'float32', cuda, { precision });
    const rel = maxRelError(got, fp32, 1e-3);
    console.log(`${precision} adamw-cosine-clip vs fp32: ${rel.toExponential(2)}`);
    expect(rel).toBeLessThanOrEqual(precision === 'tf32x3' ? 1e-5 : 5e-3);
    expect(got.gradNorms.length).toBe(FIXTURES.steps);
  });

  it('K models: per-model rates under a schedule, with clipping and AdamW, each model as a run of it alone', async () => {
    const c = FIXTURES.cases.find((x) => x.name === 'adamw-cosine-clip')!;
    const f = FIXTURES,
      K = 3,
      lrs = [0.02, 0.01, 0.005];
    const multi = Arena.create(planLayout({ layers: f.layers, batch: f.batch, dtype: 'float64', optimizer: 'adamw', models: K }), cuda);
    try {
      const t = new Trainer(multi, { ...trainerOptions(c), lr: lrs });
      for (let m = 0; m < K; m++)
        for (let l = 1; l < f.layers.length; l++) {
          multi.view(l, 'w', m).set(f.w[l - 1]!.flat());
          multi.view(l, 'b', m).set(f.b[l - 1]!);
        }
      t.markHostChanged();
      for (let s = 0; s < f.steps; s++)
        await t.step(f.x.slice(s * f.batch, (s + 1) * f.batch).flat(), { labels: f.labels.slice(s * f.batch, (s + 1) * f.batch) });
      multi.toHost({ kinds: ['w', 'b'] });
      for (let m = 0; m < K; m++) {
        const alone = await trainCase({ ...c, lr: lrs[m]! }, 'float64', cuda);
        const got = {
          ...alone,
          w: f.layers
            .slice(1)
            .map((n, i) => Array.from({ length: n }, (_, j) => Array.from(multi.view(i + 1, 'w', m).subarray(j * f.layers[i]!, (j + 1) * f.layers[i]!)))),
          b: f.layers.slice(1).map((_, i) => Array.from(multi.view(i + 1, 'b', m))),
        };
        expect(maxRelError(got, alone, 1e-3), `model ${m}`).toBeLessThanOrEqual(1e-12);
      }
      expect(t.gradNorms.length).toBe(K);
    } finally {
      multi.dispose();
    }
  });

  // The fused kernel's clip phase updates every parameter once the step's norm is known: 784-256-10
  // has ~203k parameters, more than two per thread of the grid (~68k threads on an H100), and
  // K = 2 walks model 1's too. Momentum (with Nesterov and decay) keeps its state in the walk;
  // Adam's m / sqrt(v) would magnify the backends' last-bit differences in gradients that cancel.
  it.each([1, 2])('clipping on a network of more parameters than two per thread of the fused grid, K = %i: CUDA as the CPU (momentum)', async (K) => {
    const layers = [784, 256, 10],
      batch = 32,
      samples = batch * 3;
    const x = Float64Array.from({ length: samples * 784 }, (_, i) => Math.sin(i * 0.37) * 0.5);
    const labels = Array.from({ length: samples }, (_, i) => (i * 7) % 10);
    const train = async (backend: 'cpu' | 'cuda') => {
      const arena = Arena.create(planLayout({ layers, batch, samples, dtype: 'float64', optimizer: 'momentum', activations: ['gelu', 'softmax'], models: K }), {
        backend,
      });
      try {
        const t = new Trainer(arena, {
          lr: K === 1 ? 0.01 : [0.01, 0.004],
          momentum: 0.9,
          nesterov: true,
          weightDecay: 0.01,
          clipGradNorm: 0.01,
          schedule: { type: 'cosine', total: 6, warmup: 2 },
        });
        t.init(3);
        const r = await t.fit({ x, labels }, { epochs: 2, seed: 1 });
        arena.toHost({ kinds: ['w', 'b'] });
        const params = Array.from({ length: K }, (_, m) => [1, 2].flatMap((l) => [...arena.view(l, 'w', m), ...arena.view(l, 'b', m)]));
        return { path: r.path, params, norms: t.gradNorms };
      } finally {
        arena.dispose();
      }
    };
    const [a, b] = [await train('cpu'), await train('cuda')];
    if (!process.env.NN_ARENA_STEP_PATH || process.env.NN_ARENA_STEP_PATH === 'fused') expect(b.path).toBe('fused');
    expect(b.norms.length).toBe(a.norms.length);
    a.norms.forEach((n, s) => {
      expect(n).toBeGreaterThan(0.01); // every step clips
      expect(Math.abs(b.norms[s]! - n) / n).toBeLessThanOrEqual(1e-12);
    });
    for (let m = 0; m < K; m++) {
      let worst = 0;
      a.params[m]!.forEach((v, i) => {
        worst = Math.max(worst, Math.abs(b.params[m]![i]! - v) / Math.max(Math.abs(v), 1e-3));
      });
      expect(worst, `model ${m}`).toBeLessThanOrEqual(1e-12);
    }
  });

  const nccl = info.devices >= 2 ? ncclInfo() : { available: false };
  it.skipIf(!(info.devices >= 2 && nccl.available))(
    'a data-parallel group clips after the all-reduce: equal to one GPU on the global batch, its steps graphed',
    async () => {
      const c = FIXTURES.cases.find((x) => x.name === 'adamw-cosine-clip')!;
      const f = FIXTURES,
        world = 2;
      const group = DataParallel.create(planLayout({ layers: f.layers, batch: f.batch / world, dtype: 'float64', optimizer: 'adamw' }), { devices: [0, 1] });
      try {
        const t = new Trainer(group, trainerOptions(c));
        for (const a of group.replicas)
          for (let l = 1; l < f.layers.length; l++) {
            a.view(l, 'w').set(f.w[l - 1]!.flat());
            a.view(l, 'b').set(f.b[l - 1]!);
          }
        t.markHostChanged();
        const norms: number[] = [],
          replays: number[] = [];
        for (let s = 0; s < f.steps; s++) {
          await t.step(f.x.slice(s * f.batch, (s + 1) * f.batch).flat(), { labels: f.labels.slice(s * f.batch, (s + 1) * f.batch) });
          norms.push(...t.gradNorms);
          replays.push(handleOf(group.replicas[0]!).graphSteps());
        }
        // One-step runs: the first launched directly (NCCL connects on its first collectives:
        // GradSync::capturable), the second captured (and launched), the later ones replayed.
        expect(replays[0]).toBe(0);
        const graphed = process.env.NN_ARENA_CUDA_GRAPH !== '0' && process.env.NN_ARENA_SYNC_GRAPHS !== '0';
        expect(
          replays.slice(1).every((n) => n === (graphed ? 1 : 0)),
          `replays ${replays}`,
        ).toBe(true);
        const one = await trainCase(c, 'float64', cuda);
        for (const a of group.replicas) {
          a.toHost({ kinds: ['w', 'b'] });
          const got = {
            ...one,
            w: f.layers
              .slice(1)
              .map((n, i) => Array.from({ length: n }, (_, j) => Array.from(a.view(i + 1, 'w').subarray(j * f.layers[i]!, (j + 1) * f.layers[i]!)))),
            b: f.layers.slice(1).map((_, i) => Array.from(a.view(i + 1, 'b'))),
          };
          expect(maxRelError(got, one, 1e-3)).toBeLessThanOrEqual(1e-12);
        }
        norms.forEach((n, s) => expect(Math.abs(n - one.gradNorms[s]!) / one.gradNorms[s]!).toBeLessThanOrEqual(1e-12));
      } finally {
        group.dispose();
      }
    },
  );
});
