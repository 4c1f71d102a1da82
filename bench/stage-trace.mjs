// stage-trace.mjs: the L-class network of bench/um.ts trained with explicit staging at 25% of its
// arena, two epochs traced (NN_ARENA_STAGE_TRACE: every copy and phase with its start and end, per
// stream). Compare with bench/micro/stage_sim.cc, which predicts the same timeline without a GPU.
//   node bench/stage-trace.mjs [epochs=3]      (on the GPU machine; uses dist/)
import { Arena, planLayout, Trainer } from '../dist/index.js';

const spec = { layers: [4096, 4096, 4096, 4096, 4096, 4096, 4096], batch: 2048, samples: 4096, optimizer: 'sgd' };
const plan = planLayout(spec);
const budget = Math.floor(plan.totalBytes / 4);
const arena = Arena.create(plan, { backend: 'cuda', memory: 'staged', deviceBudget: budget });
const t = new Trainer(arena, { lr: 1e-3 });
t.init(1);
const x = new Float32Array(spec.samples * 4096);
for (let i = 0; i < x.length; i++) x[i] = (i % 251) / 251;
const labels = Uint8Array.from({ length: spec.samples }, (_, i) => i % 4096);
await t.fit({ x, labels }, { epochs: 1 });  // warm-up
const epochs = Number(process.argv[2] ?? 3);
const r = await t.fit({ x, labels }, { epochs });
console.log(`staged, budget ${budget} B: ${((r.seconds * 1e6) / r.steps).toFixed(0)} us/step over ${r.steps} steps`);
process.env.NN_ARENA_STAGE_TRACE = '1';
await t.fit({ x, labels }, { epochs: 2 });  // two runs: each prints its own timeline
arena.dispose();
