// Issue 27 on CUDA: non-finite weights are DIVERGED on the fused and per-layer paths (the weight
// check after each run, cuda_train.cu markNonFinite), and compact arenas run forward exactly and
// refuse backward / update. GPU machine: bash .gpu/run.sh vitest run test/gpu/reliability.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { cudaInfo } from '../../src/index.js';
import { blowUp } from '../support/divergence-checks.js';
import { COMPACT_PRIMITIVE_SPECS, compactPrimitives } from '../support/compact-primitives-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const cuda = { backend: 'cuda' } as const;

describe.skipIf(!hasGpu)('CUDA: non-finite weights are DIVERGED', () => {
  for (const how of ['fit', 'step', 'primitives'] as const) {
    it(`${how} (${process.env.NN_ARENA_STEP_PATH ?? 'default'} path)`, async () => {
      for (const seed of [1, 2, 3]) {
        const r = await blowUp(cuda, seed, how);
        if (r.nonFinite) expect(r.outcome, `seed ${seed}: loss ${r.loss}`).toBe('DIVERGED');
        else console.log(`seed ${seed}: the weights stayed finite on this GPU (${r.outcome})`);
      }
    });
  }
});

describe.skipIf(!hasGpu)('CUDA: primitives on a compact arena', () => {
  for (const spec of COMPACT_PRIMITIVE_SPECS) {
    for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
      it(`${spec.layers.join('-')} ${optimizer}`, async () => {
        const r = await compactPrimitives(cuda, spec, optimizer, false);
        expect(Buffer.from(r.compactOut.buffer).equals(Buffer.from(r.fullOut.buffer))).toBe(true);
        expect(r.backward).toBe('NOT_SUPPORTED');
        expect(r.update).toBe('NO_GRADIENTS');
        expect(r.step).toBe('resolved');
      });
    }
  }
});
