// um-trace.mjs: the L-class network of bench/um.ts trained by the managed-memory scheduler at 25%
// of its arena, one epoch traced (NN_ARENA_UM_TRACE: every mover op and compute-thread wait with
// host times). Where a managed step goes.   node bench/um-trace.mjs   (on the GPU machine; uses dist/)
import { Arena, planLayout, Trainer } from '../dist/index.js';

const spec = { layers: [4096, 4096, 4096, 4096, 4096, 4096, 4096], batch: 2048, samples: 4096, optimizer: 'sgd' };
const plan = planLayout(spec);
const budget = Math.floor(plan.totalBytes / 4);
const arena = Arena.create(plan, { backend: 'cuda', memory: 'managed', deviceBudget: budget });
const t = new Trainer(arena, { lr: 1e-3 });
t.init(1);
const x = new Float32Array(spec.samples * 4096);
for (let i = 0; i < x.length; i++) x[i] = (i % 251) / 251;
const labels = Uint8Array.from({ length: spec.samples }, (_, i) => i % 4096);
await t.fit({ x, labels }, { epochs: 2 });  // warm-up
process.env.NN_ARENA_UM_TRACE = '1';
const r = await t.fit({ x, labels }, { epochs: 1 });
console.log(`managed + scheduler, budget ${budget} B: ${((r.seconds * 1e6) / r.steps).toFixed(0)} us/step over ${r.steps} steps (with the final download)`);
arena.dispose();
