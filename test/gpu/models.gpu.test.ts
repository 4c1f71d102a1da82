// K models in one arena on CUDA: every model's regions bit for bit those of a one-model arena
// trained alike (same seed, learning rate, data, fit seed), on the path this process takes
// (scripts/gpu-session.sh part `models` runs the file with NN_ARENA_STEP_PATH=fused, =layers,
// and =layers NN_ARENA_GEMM=tiled). Fused: one work item is one model's tile, computed as a
// one-model run computes it whichever block takes it. Per layer: grid z = models, products
// as strided batched cuBLAS calls (or the tiled kernels).
import { describe, expect, it } from 'vitest';
import { cudaInfo, type LayoutSpec } from '../../src/index.js';
import { compareModels } from '../support/models-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cuda = { backend: 'cuda' } as const;
const knobs = `${process.env.NN_ARENA_STEP_PATH ?? 'auto'}${process.env.NN_ARENA_GEMM ? ` gemm=${process.env.NN_ARENA_GEMM}` : ''}`;

const lrsOf = (K: number, lo: number, hi: number) => Array.from({ length: K }, (_, m) => lo + ((hi - lo) * m) / Math.max(K - 1, 1));
const seedsOf = (K: number) => Array.from({ length: K }, (_, m) => 100 + 7 * m);

describe.skipIf(!hasGpu)('K models on CUDA: bit-identical to K one-model arenas (fused, tiled; cuBLAS batched: to rounding)', () => {
  const S: LayoutSpec = { layers: [784, 128, 10], batch: 100, samples: 300 };
  const cases: Array<[string, LayoutSpec, number[], number]> = [
    ['S sgd K=4, per-model lrs', S, lrsOf(4, 0.01, 0.1), 2],
    ['S sgd K=4, one lr (the per-layer path folds the update into the batched product)', S, lrsOf(4, 0.05, 0.05), 2],
    ['S sgd K=64, per-model lrs', S, lrsOf(64, 0.001, 0.1), 1],
    [
      'momentum K=4, 3 weight layers (deferred updates, error products)',
      { layers: [40, 96, 64, 7], batch: 32, samples: 200, optimizer: 'momentum' },
      lrsOf(4, 0.01, 0.05),
      2,
    ],
    ['adam K=5, kind-major', { layers: [40, 96, 64, 7], batch: 32, samples: 200, optimizer: 'adam', order: 'kind-major' }, lrsOf(5, 0.001, 0.01), 2],
    // K = 8 S models are past the fused kernel's work limit: the per-layer path, where layer 1 and
    // the output layer fold their SGD steps with each model's lr (scalesD) in float64 too.
    ['S sgd K=8 float64, per-model lrs (auto: per-layer, the folds with each lr)', { ...S, dtype: 'float64' }, lrsOf(8, 0.01, 0.1), 1],
    [
      'adam K=3 float64, wide mse output (no fused output row)',
      { layers: [30, 50, 40], batch: 16, samples: 100, optimizer: 'adam', dtype: 'float64', activations: ['tanh', 'identity'] },
      lrsOf(3, 0.001, 0.01),
      2,
    ],
  ];
  it.each(cases)(
    '%s',
    async (name, spec, lrs, epochs) => {
      const K = lrs.length;
      const r = await compareModels({ spec, lrs, seeds: seedsOf(K), epochs, count: spec.samples! - 3 }, cuda);
      console.log(
        `models [${knobs}] ${name}: path ${r.path}, ${r.regionsCompared} regions compared, ${r.mismatches.length} differ${r.mismatches.length ? ` (${r.mismatches.slice(0, 4).join('; ')})` : ''}`,
      );
      if (process.env.NN_ARENA_STEP_PATH === 'fused') expect(r.path).toBe('fused');
      if (process.env.NN_ARENA_STEP_PATH === 'layers') expect(r.path).toMatch(/^layers/);
      // Unless a path is forced, the one step on a caller's batch takes the per-layer path and
      // its graph (docs/cuda.md), whatever the fit took: with cuBLAS, batched for the K models.
      const stepOnCublas =
        !process.env.NN_ARENA_STEP_PATH && process.env.NN_ARENA_CUDA_GRAPH !== '0' && process.env.NN_ARENA_GEMM !== 'tiled' && info.gemm.startsWith('cublas');
      if (r.path === 'layers (cublas)' || stepOnCublas) {
        // cuBLAS picks its kernels by the batch count: a strided batched product of K models is not
        // the one-model call's kernel, so the sums may be ordered differently (rounding, not more).
        console.log(`models [${knobs}] ${name}: cuBLAS batched vs alone, largest relative weight difference ${r.maxRelWeights.toExponential(3)}`);
        expect(r.maxRelWeights).toBeLessThan(spec.dtype === 'float64' ? 1e-12 : 1e-5);
        for (const [a, b] of [...r.fits, ...r.steps, ...r.evals]) expect(Math.abs(a - b)).toBeLessThan(1e-4 * Math.abs(b));
        return;
      }
      expect(r.mismatches).toEqual([]);
      for (const [a, b] of [...r.fits, ...r.steps, ...r.evals]) {
        expect(Number.isFinite(b)).toBe(true);
        expect(a).toBe(b);
      }
    },
    300_000,
  );
});
