// profile-step.mjs: a short run of one network's training step for a profiler, e.g. on the GPU
// machine:  ncu --print-summary per-kernel node bench/profile-step.mjs S sgd 20
// Arguments: network (S | M | L), optimizer, steps. Uses the built package (dist/).
import { Arena, planLayout, Trainer } from '../dist/index.js';

const NETS = { S: [[784, 128, 10], 100], M: [[784, 1024, 1024, 10], 256], L: [[4096, 4096, 4096, 4096], 2048] };
const [net = 'S', optimizer = 'sgd', stepsArg = '20', backend = 'cuda'] = process.argv.slice(2);
const [layers, batch] = NETS[net];
const steps = Number(stepsArg);
const plan = planLayout({ layers, batch, optimizer, samples: batch * steps });
const arena = Arena.create(plan, { backend });
const t = new Trainer(arena);
t.init(1);
const x = new Float32Array(batch * steps * layers[0]).map((_, i) => (i % 251) / 251);
const labels = Uint8Array.from({ length: batch * steps }, (_, i) => i % layers[layers.length - 1]);
const r = await t.fit({ x, labels }, { epochs: 1 });
console.log(`${net} ${optimizer} ${backend}: ${r.steps} steps, ${((r.seconds * 1e6) / r.steps).toFixed(1)} us/step (profiled)`);
arena.dispose();
