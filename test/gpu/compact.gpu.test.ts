// Compact plans on CUDA: training is bit-identical to the full plan on the same path. The path is
// whatever NN_ARENA_STEP_PATH / NN_ARENA_GEMM pick (scripts/gpu-session.sh part `compact` runs
// this file on the fused path, the per-layer path with cuBLAS and with the tiled products).
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer, type LayoutSpec } from '../../src/index.js';
import { compactVsFull, COMPACT_NETS, COMPACT_OPS_NET } from '../support/compact-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cuda = { backend: 'cuda' } as const;

/** The path this process's knobs ask for ('auto' leaves small networks on the fused path). */
const wanted = process.env.NN_ARENA_STEP_PATH === 'layers' ? (process.env.NN_ARENA_GEMM === 'tiled' ? 'layers (tiled)' : 'layers (cublas)') : 'fused';

const NETS: Array<[string, LayoutSpec]> = [['S 784-128-10 batch 100', { layers: [784, 128, 10], batch: 100, samples: 300 }], ...COMPACT_NETS];

describe.skipIf(!hasGpu)(`compact == full on CUDA (${wanted})`, () => {
  for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
    for (const [name, spec] of NETS) {
      for (const dtype of ['float32', 'float64'] as const) {
        it(`${optimizer}, ${name}, ${dtype}`, async () => {
          const { full, compact } = await compactVsFull({ ...spec, optimizer, dtype }, cuda, optimizer === 'adam' ? 0.01 : 0.05);
          console.log(`compact ${wanted} ${optimizer} ${name} ${dtype}: ${full.totalBytes} -> ${compact.totalBytes} B, paths ${full.path} / ${compact.path}`);
          expect(full.path).toBe(wanted);
          expect(compact.path).toBe(wanted);
          expect(compact.metrics).toEqual(full.metrics);
          expect(Buffer.from(compact.params).equals(Buffer.from(full.params))).toBe(true);
          expect(Buffer.from(compact.predictions).equals(Buffer.from(full.predictions))).toBe(true);
        });
      }
    }
  }
});

// The TF32 precisions run on the per-layer path (cuBLAS TF32 / 3xTF32 products, or nn-arena's
// tensor-core kernels under NN_ARENA_GEMM=tiled): both fold SGD into the weight-gradient
// product, so a compact SGD plan (no dw) trains exactly as the full one there too.
const tcPath = process.env.NN_ARENA_GEMM === 'tiled' ? 'layers (tiled)' : 'layers (cublas)';
const tf32 = hasGpu && Number(info.computeCapability.split('.')[0]) >= 8;
describe.skipIf(!tf32)(`compact == full on CUDA with a TF32 precision (${tcPath})`, () => {
  for (const precision of ['tf32', 'tf32x3'] as const) {
    for (const optimizer of ['sgd', 'adam'] as const) {
      for (const [name, spec] of NETS) {
        it(`${precision}, ${optimizer}, ${name}`, async () => {
          if (precision === 'tf32x3' && optimizer === 'sgd') {
            // tf32x3 sums dw before applying it (no fold: check.cc); a compact SGD arena has none
            const plan = planLayout({ ...spec, optimizer, dtype: 'float32', compact: true });
            const arena = Arena.create(plan, cuda);
            try {
              // Refused when the options are checked, before any work (src/train/optimizer-options.ts).
              expect(() => new Trainer(arena, { precision })).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'precision' }));
            } finally {
              arena.dispose();
            }
            return;
          }
          const { full, compact } = await compactVsFull({ ...spec, optimizer, dtype: 'float32' }, cuda, optimizer === 'adam' ? 0.01 : 0.05, { precision });
          console.log(
            `compact ${tcPath} ${precision} ${optimizer} ${name}: ${full.totalBytes} -> ${compact.totalBytes} B, paths ${full.path} / ${compact.path}`,
          );
          expect(full.path).toBe(tcPath);
          expect(compact.path).toBe(tcPath);
          expect(compact.metrics).toEqual(full.metrics);
          expect(Buffer.from(compact.params).equals(Buffer.from(full.params))).toBe(true);
          expect(Buffer.from(compact.predictions).equals(Buffer.from(full.predictions))).toBe(true);
        });
      }
    }
  }
});

// Ops run on the per-layer path (the fused step is a chain of dense layers): there a compact
// plan steps each layer in its backward phase, as its phase table says (phases.cc), where a full
// plan steps them all in one launch after the backward.
describe.skipIf(!hasGpu)('compact == full on CUDA with ops (per-layer path)', () => {
  for (const optimizer of ['sgd', 'momentum', 'adamw'] as const) {
    for (const dtype of ['float32', 'float64'] as const) {
      it(`${optimizer}, layernorm, dropout, residual, rmsnorm, ${dtype}`, async () => {
        const spec = { layers: COMPACT_OPS_NET, batch: 8, samples: 60, optimizer, dtype };
        const { full, compact } = await compactVsFull(spec, cuda, optimizer === 'adamw' ? 0.01 : 0.05, { dropoutSeed: 3 });
        console.log(`compact ops ${optimizer} ${dtype}: ${full.totalBytes} -> ${compact.totalBytes} B, paths ${full.path} / ${compact.path}`);
        expect(full.path).toMatch(/^layers/);
        expect(compact.path).toBe(full.path);
        expect(compact.totalBytes).toBeLessThan(full.totalBytes);
        expect(compact.metrics).toEqual(full.metrics);
        expect(Buffer.from(compact.params).equals(Buffer.from(full.params))).toBe(true);
        expect(Buffer.from(compact.predictions).equals(Buffer.from(full.predictions))).toBe(true);
      });
    }
  }
});
