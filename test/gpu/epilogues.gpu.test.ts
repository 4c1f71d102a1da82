// cuBLASLt's fused epilogues on the per-layer path (csrc/cuda/cublaslt_loader.h): bias and ReLU
// inside the forward product, ReLU's derivative and the bias gradient inside the error product,
// the output layer's bias gradient inside its weight-gradient product. Each case trains the same
// network with the epilogues (NN_ARENA_CUBLASLT=1, read per run) and without (the default:
// cuBLAS's products and nn-arena's own passes) and on the CPU: the same values to the
// precision's rounding, the epilogues really used, and the same bits run to run. With the
// epilogues on, the compact, primitives, act and graph files must pass too (scripts: .gpu).
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/epilogues.gpu.test.ts
import { afterEach, describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer, type Activation, type LayoutSpec, type Optimizer } from '../../src/index.js';
import { handleOf } from '../../src/arena/arena.js';
import { relDiff, toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const blas = hasGpu && info.gemm.startsWith('cublas') && process.env.NN_ARENA_GEMM !== 'tiled';
const asked = process.env.NN_ARENA_CUBLASLT;

afterEach(() => {
  if (asked === undefined) delete process.env.NN_ARENA_CUBLASLT;
  else process.env.NN_ARENA_CUBLASLT = asked;
});

interface Case {
  activations: Activation[];
  optimizer: Optimizer;
  precision: 'fp32' | 'tf32';
  epilogues: number;
}

// batch x units x fan-in above 2^26: the per-layer path in fp32 too.
const layers = [600, 640, 640, 40];
const batch = 256;

async function train(c: Case, backend: 'cpu' | 'cuda', epilogues: boolean) {
  process.env.NN_ARENA_CUBLASLT = epilogues ? '1' : '0';
  const spec: LayoutSpec = { layers, batch, optimizer: c.optimizer, activations: c.activations, samples: batch * 3 + 40 };
  const arena = Arena.create(planLayout(spec), { backend });
  try {
    const t = new Trainer(arena, { lr: c.optimizer === 'sgd' ? 0.05 : 2e-3, ...(backend === 'cuda' ? { precision: c.precision } : {}) });
    t.init(4);
    const d = toyData(layers[0]!, layers.at(-1)!, spec.samples!, 6, false);
    const losses: number[] = [];
    // Two epochs: the second run replays the first's graph; the last step of each is partial.
    const r = await t.fit(
      { x: d.x, labels: d.labels! },
      {
        epochs: 2,
        seed: 5,
        onProgress: (p) => {
          losses.push(p.loss);
        },
      },
    );
    const used = backend === 'cuda' ? handleOf(arena).epilogues() : 0;
    const pred = Float64Array.from(await t.predict(d.x.subarray(0, layers[0]! * 7)));
    t.syncToHost();
    const params: number[] = [];
    for (let l = 1; l < layers.length; l++) for (const k of ['w', 'b'] as const) for (const v of arena.view(l, k)) params.push(v);
    return { params: Float64Array.from(params), pred, loss: r.loss, losses, path: r.path, used };
  } finally {
    arena.dispose();
  }
}

// [activations, products of a step with an epilogue]: forward (relu, and bias alone before the
// softmax), error products into a relu layer (its mask), and where the step is not folded (adam,
// momentum) the output layer's weight-gradient product with its db: fp32 only (tf32 reads d
// transposed, a form cuBLASLt offers no bias-gradient epilogue for on the H100).
const cases: Case[] = [];
for (const precision of ['fp32', 'tf32'] as const) {
  const db = precision === 'fp32' ? 1 : 0;
  cases.push({ activations: ['relu', 'relu', 'softmax'], optimizer: 'sgd', precision, epilogues: 3 + 2 });
  cases.push({ activations: ['relu', 'relu', 'softmax'], optimizer: 'adam', precision, epilogues: 3 + 2 + db });
  // gelu-tanh and sigmoid have no epilogue: their forward and derivative take nn-arena's passes,
  // their db the layer's own bias-gradient pass; the relu layer's still come from the epilogues.
  cases.push({ activations: ['gelu-tanh', 'relu', 'softmax'], optimizer: 'adam', precision, epilogues: 2 + 1 + db });
  cases.push({ activations: ['sigmoid', 'relu', 'softmax'], optimizer: 'momentum', precision, epilogues: 2 + 1 + db });
}

describe.skipIf(!blas)('cuBLASLt epilogues on the per-layer path (NN_ARENA_CUBLASLT=1)', () => {
  for (const c of cases) {
    it(`${c.activations.join(',')} ${c.optimizer} ${c.precision}: the epilogues' run == nn-arena's passes == the CPU, to rounding; same bits run to run`, async () => {
      const a = await train(c, 'cuda', true);
      const again = await train(c, 'cuda', true);
      const off = await train(c, 'cuda', false);
      expect(a.path).toBe('layers (cublas)');
      expect(a.used).toBe(c.epilogues);
      expect(off.used).toBe(0);
      expect(Buffer.from(again.params.buffer).equals(Buffer.from(a.params.buffer))).toBe(true);
      const tol = c.precision === 'fp32' ? 2e-5 : 3e-3;
      const d = relDiff(a.params, off.params);
      console.log(`epilogues ${c.activations.join(',')} ${c.optimizer} ${c.precision}: vs own passes ${d.toExponential(2)}, loss ${a.loss} / ${off.loss}`);
      expect(d).toBeLessThan(tol);
      expect(relDiff(a.pred, off.pred)).toBeLessThan(tol);
      for (let i = 0; i < a.losses.length; i++) expect(Math.abs(a.losses[i]! - off.losses[i]!)).toBeLessThan(tol * 10 * Math.abs(off.losses[i]!));
      if (c.precision === 'fp32') {
        // Adam moves a weight by about lr whatever its gradient's size: a gradient near zero whose
        // rounding differs between the backends moves it by up to 2 lr.
        const cpu = await train(c, 'cpu', true);
        const dc = relDiff(a.params, cpu.params);
        console.log(`  vs CPU ${dc.toExponential(2)}`);
        expect(dc).toBeLessThan(c.optimizer === 'adam' ? 2e-3 : tol);
      }
    });
  }
});
