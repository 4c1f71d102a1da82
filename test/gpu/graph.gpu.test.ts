// CUDA graphs on the per-layer path (csrc/cuda/step_graph.cuh): a run's second step is captured
// and the later ones replayed, with the nodes whose arguments changed (the rows gathered, the
// step index, Adam's bias corrections, a scheduled lr) updated in place. Same kernels, same
// arguments, same order: every case trains to the bits of the same run with the graph off
// (NN_ARENA_CUDA_GRAPH=0, read per run), and the graphed run did replay its steps. A fit of
// several epochs is several runs: the later ones replay the graph the first one captured, from
// their first step.
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/graph.gpu.test.ts
import { afterEach, describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer, type LayoutSpec, type TrainerOptions } from '../../src/index.js';
import { handleOf } from '../../src/arena/arena.js';
import { toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
// bf16 computes its products through cuBLAS only (refused with NN_ARENA_GEMM=tiled).
const tensorCores = hasGpu && Number(info.computeCapability.split('.')[0]) >= 8 && info.gemm.startsWith('cublas') && process.env.NN_ARENA_GEMM !== 'tiled';
// Graphs serve every run of the per-layer path, its products through cuBLAS or the tiled kernels.
const graphed = hasGpu;

afterEach(() => {
  delete process.env.NN_ARENA_CUDA_GRAPH;
  delete process.env.NN_ARENA_SIDE_STREAM;
});

interface Case {
  spec: LayoutSpec;
  options: TrainerOptions;
  samples: number;
  epochs: number;
}

/** Trains `c` with the graph on or off (and the side stream: NN_ARENA_SIDE_STREAM): every weight, bias and optimizer state; the losses; how many steps were graphed. */
async function train(c: Case, graph: boolean, side = true) {
  process.env.NN_ARENA_CUDA_GRAPH = graph ? '1' : '0';
  process.env.NN_ARENA_SIDE_STREAM = side ? '1' : '0';
  const arena = Arena.create(planLayout({ ...c.spec, samples: c.samples }), { backend: 'cuda' });
  try {
    const t = new Trainer(arena, c.options);
    t.init(3);
    const k = c.spec.layers[0]!,
      n = c.spec.layers.at(-1)!;
    const data = toyData(k, n, c.samples, 5, false);
    const labels = Uint8Array.from({ length: c.samples }, (_, r) => {
      let at = 0;
      for (let j = 1; j < n; j++) if (data.x[r * k + j]! > data.x[r * k + at]!) at = j;
      return at;
    });
    const losses: number[] = [];
    const r = await t.fit(
      { x: Float32Array.from(data.x), labels },
      {
        epochs: c.epochs,
        seed: 9,
        onProgress: (p) => {
          losses.push(p.loss);
        },
      },
    );
    const graphSteps = handleOf(arena).graphSteps();
    arena.toHost();
    const parts: Float32Array[] = [];
    for (let m = 0; m < (c.spec.models ?? 1); m++)
      for (let l = 1; l < c.spec.layers.length; l++)
        for (const kind of ['w', 'b', 'mw', 'vw'] as const) if (arena.plan.region(l, kind)) parts.push(Float32Array.from(arena.view(l, kind, m)));
    const state = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    parts.reduce((at, p) => {
      state.set(p, at);
      return at + p.length;
    }, 0);
    return { state, loss: r.loss, losses, path: r.path, graphSteps };
  } finally {
    arena.dispose();
  }
}

// Wide enough that the auto path is the per-layer one (the fused kernel takes networks of less
// than 2^26 batch x units x fan-in in every layer).
const wide = [300, 1024, 256, 10];
const relu = ['relu', 'relu', 'softmax'] as const;
const cases: [string, Case, number][] = [
  // [name, case, graphed steps of the last run: a fit's first run launches its first step
  // directly (it captures the second), a later run replays from its first; a last partial step
  // is launched directly]
  [
    'sgd, constant lr (the update folded into the products)',
    { spec: { layers: wide, batch: 256, activations: [...relu] }, options: { lr: 0.05 }, samples: 256 * 12, epochs: 2 },
    12,
  ],
  [
    'adamw + cosine + clipping (bias corrections, lr and the norm change every step), a partial last step',
    {
      spec: { layers: wide, batch: 256, optimizer: 'adamw', activations: ['gelu', 'silu', 'softmax'] },
      options: { schedule: { type: 'cosine', total: 40, warmup: 5 }, clipGradNorm: 1 },
      samples: 256 * 12 + 50,
      epochs: 2,
    },
    12,
  ],
  [
    'sgd, K = 3 models with their own rates (layer 1 folds its step from d times each lr)',
    { spec: { layers: wide, batch: 256, models: 3, activations: [...relu] }, options: { lr: [0.05, 0.02, 0.01] }, samples: 256 * 8, epochs: 2 },
    8,
  ],
  [
    'momentum + weight decay, K = 3 models with their own rates (batched products)',
    {
      spec: { layers: wide, batch: 256, optimizer: 'momentum', models: 3, activations: [...relu] },
      options: { lr: [0.05, 0.02, 0.01], weightDecay: 1e-4 },
      samples: 256 * 8,
      epochs: 1,
    },
    7,
  ],
];
if (tensorCores) {
  cases.push([
    'tf32, adam',
    { spec: { layers: wide, batch: 256, optimizer: 'adam', activations: [...relu] }, options: { precision: 'tf32' }, samples: 256 * 8, epochs: 2 },
    8,
  ]);
  cases.push([
    "bf16, sgd, K = 3 models with their own rates (layer 1's bf16 copy of d times each lr)",
    {
      spec: { layers: wide, batch: 256, models: 3, activations: [...relu] },
      options: { precision: 'bf16', lr: [0.05, 0.02, 0.01] },
      samples: 256 * 8,
      epochs: 2,
    },
    8,
  ]);
  cases.push([
    "bf16, sgd (the operands' bf16 copies made by the passes)",
    { spec: { layers: wide, batch: 256, activations: [...relu] }, options: { precision: 'bf16', lr: 0.05 }, samples: 256 * 8, epochs: 3 },
    8,
  ]);
}

describe.skipIf(!hasGpu)('CUDA graphs of the per-layer path', () => {
  it.each(cases)(
    '%s: the bits of the run without the graph, its steps replayed',
    async (_name, c, steps) => {
      const direct = await train(c, false),
        graphedRun = await train(c, true);
      expect(graphedRun.path).toMatch(/^layers/);
      expect(direct.graphSteps).toBe(0);
      expect(graphedRun.graphSteps).toBe(graphed ? steps : 0);
      expect(graphedRun.losses).toEqual(direct.losses);
      expect(graphedRun.loss).toBe(direct.loss);
      expect(graphedRun.state.length).toBeGreaterThan(0);
      expect(Buffer.from(graphedRun.state.buffer).equals(Buffer.from(direct.state.buffer))).toBe(true);
    },
    60_000,
  );

  // The weight-gradient products (and the updates after them) run on a second stream beside the
  // error products, the weights' bf16 casts beside the gather: the graph has branches. Same
  // kernels on the same data: the bits of the run on one stream, graphed or not.
  it.each(cases)(
    '%s: the side stream gives the bits of one stream',
    async (_name, c, steps) => {
      const one = await train(c, true, false),
        two = await train(c, true),
        twoDirect = await train(c, false);
      expect(two.graphSteps).toBe(graphed ? steps : 0);
      expect(two.losses).toEqual(one.losses);
      expect(twoDirect.losses).toEqual(one.losses);
      expect(Buffer.from(two.state.buffer).equals(Buffer.from(one.state.buffer))).toBe(true);
      expect(Buffer.from(twoDirect.state.buffer).equals(Buffer.from(one.state.buffer))).toBe(true);
    },
    60_000,
  );

  // The folded products' alpha (-lr) changes every step: cuBLAS reads it from the device, written
  // by a launch whose argument the graph updates.
  it.each([
    ['fp32', 'sgd'],
    ['bf16', 'sgd'],
    ['fp32', 'sgd, K = 2 models'],
  ] as const)(
    "%s %s under a schedule, the update folded into cuBLAS's products: replayed, same bits",
    async (precision, what) => {
      if (precision === 'bf16' && !tensorCores) return;
      const models = what.endsWith('models') ? 2 : 1;
      const c: Case = {
        spec: { layers: wide, batch: 256, models, activations: [...relu] },
        options: { lr: 0.05, precision, schedule: { type: 'cosine', total: 20 } },
        samples: 256 * 8,
        epochs: 1,
      };
      const direct = await train(c, false),
        g = await train(c, true);
      expect(g.graphSteps).toBe(graphed ? 7 : 0);
      expect(g.losses).toEqual(direct.losses);
      expect(Buffer.from(g.state.buffer).equals(Buffer.from(direct.state.buffer))).toBe(true);
    },
    60_000,
  );
});

// step() in a loop: each call is a one-step run; the first captures its step, the later ones
// replay it (the arena keeps the graph between runs), to the bits of the loop without graphs.
describe.skipIf(!hasGpu)('CUDA graphs of one-step runs', () => {
  const loop = async (graph: boolean, optimizer: 'sgd' | 'adamw', options: TrainerOptions) => {
    process.env.NN_ARENA_CUDA_GRAPH = graph ? '1' : '0';
    // 2^28 multiply-adds a step at batch 256: past the fused kernel's bound, the per-layer path.
    const arena = Arena.create(planLayout({ layers: [784, 1024, 1024, 10], batch: 256, optimizer }), { backend: 'cuda' });
    try {
      const t = new Trainer(arena, options);
      t.init(4);
      const data = toyData(784, 10, 256 * 3, 2, false);
      const x = Float32Array.from(data.x),
        labels = Uint8Array.from(data.labels!);
      const losses: number[] = [],
        graphSteps: number[] = [];
      for (let s = 0; s < 9; s++) {
        const b = s % 3;
        // The last call of each three takes fewer rows: its products differ, so it runs directly.
        const rows = b === 2 ? 200 : 256;
        losses.push((await t.step(x.subarray(b * 256 * 784, (b * 256 + rows) * 784), { labels: labels.subarray(b * 256, b * 256 + rows) })).loss);
        graphSteps.push(handleOf(arena).graphSteps());
      }
      arena.toHost();
      const state = [1, 2, 3].flatMap((l) => [...arena.view(l, 'w'), ...arena.view(l, 'b')]);
      return { losses, graphSteps, state: Float32Array.from(state) };
    } finally {
      arena.dispose();
    }
  };
  it.each([
    ['sgd', 'sgd', { lr: 0.05 }],
    ['adamw, cosine schedule, clipping', 'adamw', { lr: 1e-3, schedule: { type: 'cosine', total: 9 }, clipGradNorm: 1 }],
  ] as const)(
    '%s: the bits of the loop without graphs, its steps replayed',
    async (_name, optimizer, options) => {
      const direct = await loop(false, optimizer, options as TrainerOptions),
        graphedLoop = await loop(true, optimizer, options as TrainerOptions);
      expect(direct.graphSteps.every((n) => n === 0)).toBe(true);
      expect(graphedLoop.graphSteps.filter((n) => n === 1).length).toBeGreaterThanOrEqual(3);
      expect(graphedLoop.losses).toEqual(direct.losses);
      expect(Buffer.from(graphedLoop.state.buffer).equals(Buffer.from(direct.state.buffer))).toBe(true);
    },
    60_000,
  );
});

// The buffers beside the arena (the 16-bit copies, the clipping scratch: csrc/cuda/run_buffers.cuh,
// ScratchShelf) stay with the arena between its runs, with the graph, and go with dispose(): a
// cycle of create, two fits and dispose leaves no device memory behind. bf16 copies of
// 300-4096-4096-10 are about 40 MB, so three leaked cycles would show as more than 100 MB.
describe.skipIf(!tensorCores || process.env.NN_ARENA_UNDER_SANITIZER === '1')('buffers beside the arena', () => {
  it('are kept between runs and freed by dispose()', async () => {
    const c: Case = {
      spec: { layers: [300, 4096, 4096, 10], batch: 256, activations: [...relu] },
      options: { precision: 'bf16', lr: 0.05, clipGradNorm: 1 },
      samples: 256 * 4,
      epochs: 2,
    };
    await train(c, true); // warm-up: cuBLAS's handle workspace and the lane stay for the process
    const before = cudaInfo().freeBytes;
    for (let i = 0; i < 3; i++) {
      const r = await train(c, true);
      expect(r.graphSteps).toBe(4); // the second fit's run replays the first one's graph, in the same bytes
    }
    expect(before - cudaInfo().freeBytes).toBeLessThan(8 * 2 ** 20);
  }, 60_000);
});

// predict() between step() calls: forward runs keep a graph of their own (run_cache.cuh), so the
// step's graph and the forward's both replay, to the bits of the same calls without graphs. A
// predict() of several batches is a fed run: its first batch replays (or captures) the fed
// graph, the later full ones launch it again as it stands (run_feed.cuh).
describe.skipIf(!hasGpu)('CUDA graphs of forward runs', () => {
  const calls = async (graph: boolean) => {
    process.env.NN_ARENA_CUDA_GRAPH = graph ? '1' : '0';
    // Past the fused kernel's bound (as above): the per-layer path with graphs on and off alike.
    const arena = Arena.create(planLayout({ layers: [784, 1024, 1024, 10], batch: 256, optimizer: 'sgd' }), { backend: 'cuda' });
    try {
      const t = new Trainer(arena, { lr: 0.05 });
      t.init(6);
      const data = toyData(784, 10, 1000, 3, false);
      const x = Float32Array.from(data.x),
        labels = Uint8Array.from(data.labels!);
      const losses: number[] = [],
        outputs: number[] = [],
        forwardReplays: number[] = [];
      for (let s = 0; s < 6; s++) {
        losses.push((await t.step(x.subarray(0, 256 * 784), { labels: labels.subarray(0, 256) })).loss);
        const y = await t.predict(x); // four batches (the last of 232 rows runs as a full one): a fed run
        forwardReplays.push(handleOf(arena).graphSteps());
        outputs.push(...y);
      }
      return { losses, outputs: Float32Array.from(outputs), forwardReplays };
    } finally {
      arena.dispose();
    }
  };
  it('predict() and step() alternate, each replaying its own graph: the bits of the calls without graphs', async () => {
    const direct = await calls(false),
      graphed = await calls(true);
    expect(direct.forwardReplays.every((n) => n === 0)).toBe(true);
    expect(graphed.forwardReplays.every((n) => n === 4)).toBe(true);
    expect(graphed.losses).toEqual(direct.losses);
    expect(Buffer.from(graphed.outputs.buffer).equals(Buffer.from(direct.outputs.buffer))).toBe(true);
  }, 60_000);
});
