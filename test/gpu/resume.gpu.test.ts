// Exact resume on each CUDA path (issue 31): the CPU suite's checks (test/support/resume-checks.ts)
// on the fused kernel (small networks), the per-layer path (cuBLAS, or nn-arena's tiled products
// with NN_ARENA_GEMM=tiled) and the TF32 precisions. Trainer.load then N steps must equal N
// more steps of the original bit for bit: the device computes the same thing from the same bytes.
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run --no-file-parallelism test/gpu/resume.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer } from '../../src/index.js';
import { checkFitResume, checkPrimitivesResume, checkStepResume, RESUME_CASES, type ResumeCase } from '../support/resume-checks.js';
import { toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const tf32Gpu = hasGpu && Number(info.computeCapability.split('.')[0]) >= 8;
const cuda = { backend: 'cuda' } as const;

/** Wide enough for the per-layer path: the fused kernel takes a layer only while batch x units x
 *  fan-in <= 2^26 (kFusedMaxWork, csrc/cuda/fused_step.cu); here 160 x 2048 x 256 = 2^26.3. */
const WIDE: ResumeCase[] = [
  { name: 'wide momentum', spec: { layers: [256, 2048, 10], batch: 160, optimizer: 'momentum', samples: 400 }, trainer: { lr: 0.02, momentum: 0.8 } },
  { name: 'wide adam', spec: { layers: [256, 2048, 10], batch: 160, optimizer: 'adam', samples: 400 }, trainer: { lr: 0.002, beta1: 0.85 } },
];

async function pathOf(c: ResumeCase, precision = 'fp32'): Promise<string> {
  using arena = Arena.create(planLayout(c.spec), cuda);
  const t = new Trainer(arena, { ...c.trainer, precision } as never);
  t.init(1);
  const { layers } = c.spec;
  return (await t.fit(toyData(layers[0]!, layers.at(-1)!, c.spec.samples!, 1, false), { epochs: 1 })).path;
}

describe.skipIf(!hasGpu)(`exact resume on ${info.name || 'no device'}`, () => {
  describe.each(RESUME_CASES)('$name (small: the fused kernel for fp32)', (c) => {
    it('step()', () => checkStepResume(c, cuda));
    it('fit() stopped mid-epoch', () => checkFitResume(c, cuda));
    it('forward + backward, save, load, update()', () => checkPrimitivesResume(c, cuda));
  });

  // (NN_ARENA_STEP_PATH=fused forces the fused kernel on them: nothing to check then.)
  it.skipIf(process.env.NN_ARENA_STEP_PATH === 'fused')('the wide cases take the per-layer path', async () => {
    for (const c of WIDE) expect(await pathOf(c)).toMatch(/^layers/);
  });

  describe.each(WIDE)('$name (per-layer path)', (c) => {
    it('step()', () => checkStepResume(c, cuda));
    it('fit() stopped mid-epoch', () => checkFitResume(c, cuda));
    it('forward + backward, save, load, update()', () => checkPrimitivesResume(c, cuda));
  });

  describe.skipIf(!tf32Gpu).each(['tf32', 'tf32x3'] as const)('precision %s (saved with the options)', (precision) => {
    const cases = WIDE.map((c) => ({ ...c, name: `${c.name} ${precision}`, trainer: { ...c.trainer, precision } }));
    it.each(cases)('$name: step() and fit()', async (c) => {
      await checkStepResume(c, cuda);
      await checkFitResume(c, cuda);
    });
  });
});
