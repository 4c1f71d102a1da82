// budget-trace.mjs: the L-class network of bench/um.ts trained with a device budget of 25% of its
// arena, one epoch traced: `staged` (NN_ARENA_STAGE_TRACE: every copy and phase with its GPU times,
// per stream; compare with bench/micro/stage_sim.cc) or `managed` (NN_ARENA_UM_TRACE: every mover
// op and compute-thread wait of the prefetch scheduler, with host times).
//   node bench/budget-trace.mjs staged|managed      (on the GPU machine; uses dist/)
import { Arena, planLayout, Trainer } from '../dist/index.js';

const memory = process.argv[2] ?? 'staged';
if (memory !== 'staged' && memory !== 'managed') throw new Error(`memory must be staged or managed, got ${memory}`);
const spec = { layers: [4096, 4096, 4096, 4096, 4096, 4096, 4096], batch: 2048, samples: 4096, optimizer: 'sgd' };
const plan = planLayout(spec);
const budget = Math.floor(plan.totalBytes / 4);
const arena = Arena.create(plan, { backend: 'cuda', memory, deviceBudget: budget });
const t = new Trainer(arena, { lr: 1e-3 });
t.init(1);
const x = new Float32Array(spec.samples * 4096);
for (let i = 0; i < x.length; i++) x[i] = (i % 251) / 251;
const labels = Uint8Array.from({ length: spec.samples }, (_, i) => i % 4096);
await t.fit({ x, labels }, { epochs: 2 }); // warm-up
process.env[memory === 'staged' ? 'NN_ARENA_STAGE_TRACE' : 'NN_ARENA_UM_TRACE'] = '1';
const r = await t.fit({ x, labels }, { epochs: 1 });
console.log(
  `${memory}, budget ${budget} B: ${((r.seconds * 1e6) / r.steps).toFixed(0)} us/step over ${r.steps} steps (with the final download of the weights)`,
);
arena.dispose();
