// run-length.mjs: what a run's fixed cost is on the per-layer path. Resident M fits
// (784-1024-1024-10, batch 256, 65,536 rows, SGD) with 1 or 4 progress reports an epoch, so runs
// of 256 or 64 steps (a 16k-row streamed window is a 64-step run), in fp16, fp32 and bf16, each
// twice: fit()'s own us/step (result.seconds). The difference times 64 is about a run's fixed cost.
//   npx tsup && node bench/run-length.mjs
import { Arena, planLayout, Trainer } from '../dist/index.js';

const rows = 65536,
  layers = [784, 1024, 1024, 10],
  batch = 256;
const x = new Float32Array(rows * 784);
for (let i = 0; i < x.length; i++) x[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
const labels = Int32Array.from({ length: rows }, (_, i) => (i * 7) % 10);
for (const precision of ['fp16', 'fp32', 'bf16']) {
  for (const reportsPerEpoch of [1, 4, 1, 4]) {
    const arena = Arena.create(planLayout({ layers, batch, samples: rows, optimizer: 'sgd' }), { backend: 'cuda' });
    try {
      const t = new Trainer(arena, { lr: 0.01, precision });
      t.init(1);
      await t.fit({ x, labels }, { epochs: 1, seed: 1, reportsPerEpoch }); // warm-up: uploads, kernels, the kept graph
      const r = await t.fit({ x, labels }, { epochs: 3, seed: 1, reportsPerEpoch });
      console.log(`${precision} runs of ${256 / reportsPerEpoch} steps: ${((r.seconds * 1e6) / r.steps).toFixed(1)} us/step`);
    } finally {
      arena.dispose();
    }
  }
}
