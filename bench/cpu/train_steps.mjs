// train_steps.mjs: N training steps of one bench/steps.ts network on the CPU backend, alone in a
// process, for a profiler (perf stat / perf record) to watch: node bench/cpu/train_steps.mjs
// S|M|L sgd|adam STEPS. Needs the built addon and dist/ (npm run build).
import { Arena, planLayout, Trainer } from '../../dist/index.js';

const [net = 'M', optimizer = 'sgd', stepsArg = '20'] = process.argv.slice(2);
const steps = Number(stepsArg);
const nets = {
  S: [[784, 128, 10], 100, ['relu', 'softmax']],
  M: [[784, 1024, 1024, 10], 256, ['relu', 'relu', 'softmax']],
  L: [[4096, 4096, 4096, 4096], 2048, ['relu', 'relu', 'softmax']],
};
const [layers, batch, activations] = nets[net];
const samples = batch * Math.min(steps, 10);
const arena = Arena.create(planLayout({ layers, batch, optimizer, samples, activations }), { backend: 'cpu' });
const t = new Trainer(arena, { lr: optimizer === 'adam' ? 1e-4 : 1e-3 });
t.init(1);
const x = new Float32Array(samples * layers[0]);
for (let i = 0; i < x.length; i++) x[i] = ((i * 2654435761) >>> 8) / 2 ** 24;
const labels = Uint8Array.from({ length: samples }, (_, i) => i % layers[layers.length - 1]);
await t.fit({ x, labels }, { epochs: 1, shuffle: true });
const r = await t.fit({ x, labels }, { epochs: Math.ceil(steps / Math.min(steps, 10)), shuffle: true });
const flops = 6 * batch * layers.slice(1).reduce((a, n, i) => a + n * layers[i], 0);
console.log(
  `${net} ${optimizer}: ${((r.seconds * 1e3) / r.steps).toFixed(3)} ms/step, ${((flops * r.steps) / r.seconds / 1e9).toFixed(1)} GFLOP/s (${r.steps} steps)`,
);
