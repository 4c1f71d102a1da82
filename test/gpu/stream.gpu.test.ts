// stream.gpu.test.ts: fit() from a stream on CUDA (issue 31): in source order, streaming a
// source 4x larger than the data regions leaves the weights of resident training on the whole
// set (the same batches in the same order, run by the same paths): through pinned slots (the
// default), pageable ones (pinned: false) and into managed memory, twice on one arena (the
// window buffers kept); a non-finite value is found on upload. Shuffled, a .npy source streams
// in the resident epoch's order over all its rows: the weights of resident shuffled training.
// GPU machine: bash .gpu/run.sh vitest run test/gpu/stream.gpu.test.ts
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout, Trainer, type Data, type TrainerOptions } from '../../src/index.js';
import { streamNpy, toNpy } from '../../src/io.js';
import { toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;

describe.skipIf(!hasGpu)('CUDA: fit() from a stream', () => {
  for (const [layers, batch] of [
    [[6, 10, 4], 8],
    [[784, 256, 10], 64],
  ] as const) {
    it(`${layers.join('-')} batch ${batch}: the weights of resident training, streamed in source order`, async () => {
      const N = batch * 16 + 3;
      const data = toyData(layers[0], layers[2], N, 3, false) as { x: Float64Array; labels: Uint8Array };
      const run = async (
        samples: number,
        source: unknown,
        options: { pinned?: boolean; memory?: 'managed' } = {},
        fits = 1,
        trainer: Partial<TrainerOptions> = {},
      ) => {
        const arena = Arena.create(planLayout({ layers: [...layers], batch, samples, optimizer: 'adam' }), { backend: 'cuda', ...options });
        try {
          const t = new Trainer(arena, { lr: 0.01, ...trainer });
          t.init(5);
          let r = await t.fit(source as Data, { epochs: 2 / fits, shuffle: false });
          if (fits === 2) r = await t.fit(source as Data, { epochs: 1, shuffle: false });
          return { r, w: Float32Array.from(arena.view(1, 'w')), scale: [t.lossScale, t.skippedSteps] };
        } finally {
          arena.dispose();
        }
      };
      const resident = await run(N, data);
      const batches = Array.from({ length: Math.ceil(N / 33) }, (_, i) => ({
        x: data.x.subarray(i * 33 * layers[0], Math.min(N, (i + 1) * 33) * layers[0]),
        labels: data.labels.subarray(i * 33, (i + 1) * 33),
      }));
      for (const [name, options, fits] of [
        ['pinned', {}, 1],
        ['pageable', { pinned: false }, 1],
        ['managed', { memory: 'managed' }, 1],
        ['two fits', {}, 2],
      ] as const) {
        const streamed = await run(batch * 4, batches, options, fits);
        expect(streamed.r.path, name).toBe(resident.r.path);
        let max = 0;
        for (let i = 0; i < resident.w.length; i++) max = Math.max(max, Math.abs(resident.w[i]! - streamed.w[i]!));
        expect(max, name).toBe(0);
      }
      // Windows' runs queued behind one another with clipping (norms brought back) and fp16 (each
      // going on from the loss scale the run before it left; the scale moves within and across windows).
      for (const [name, trainer] of [
        ['clip', { clipGradNorm: 0.5 }],
        ['fp16', { precision: 'fp16', lossScale: { init: 2 ** 40, growthInterval: 2 } }],
      ] as const) {
        const want = await run(N, data, {}, 1, trainer),
          got = await run(batch * 4, batches, {}, 1, trainer);
        expect(
          got.w.every((v, i) => v === want.w[i]),
          name,
        ).toBe(true);
        expect(got.scale, name).toEqual(want.scale);
      }
      // Shuffled: a .npy file gathered in the resident order (seed 3).
      const dir = mkdtempSync(join(tmpdir(), 'nn-arena-gpu-stream-'));
      try {
        writeFileSync(join(dir, 'x.npy'), toNpy(Float32Array.from(data.x), [N, layers[0]]));
        writeFileSync(join(dir, 'l.npy'), toNpy(Int32Array.from(data.labels)));
        const shuffled = async (samples: number, source: unknown) => {
          const arena = Arena.create(planLayout({ layers: [...layers], batch, samples, optimizer: 'adam' }), { backend: 'cuda' });
          try {
            const t = new Trainer(arena, { lr: 0.01 });
            t.init(5);
            await t.fit(source as Data, { epochs: 2, seed: 3 });
            return Float32Array.from(arena.view(1, 'w'));
          } finally {
            arena.dispose();
          }
        };
        const want = await shuffled(N, { x: Float32Array.from(data.x), labels: data.labels });
        const got = await shuffled(batch * 4, streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'l.npy') }));
        expect(
          got.every((v, i) => v === want[i]),
          'shuffled npy',
        ).toBe(true);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const bad = Float64Array.from(data.x);
      bad[(batch * 5 + 2) * layers[0] + 1] = NaN;
      await expect(run(batch * 4, [{ x: bad, labels: data.labels }])).rejects.toMatchObject({
        code: 'BAD_DATA',
        field: `batch 0.x[${(batch * 5 + 2) * layers[0] + 1}]`,
      });
    });
  }
});
