// profile-step.mjs: one network's training step as Trainer.fit over a resident data set, short
// enough for a profiler, e.g. on the GPU machine:
//   ncu --print-summary per-kernel node bench/profile-step.mjs S sgd 20
// Arguments: network (S | M | L), optimizer (or 'recipe': AdamW + GELU + cosine + clip 1.0), steps, backend, precision (fp32 | tf32 | tf32x3 | bf16:
// the Trainer's `precision`). Uses the built package (dist/). --json FILE appends the result
// as one JSON line; --per-epoch N sets the steps of an epoch (default 100, L 10).
// Environment knobs of the CUDA backend apply (NN_ARENA_STEP_PATH=fused|layers,
// NN_ARENA_GEMM=tiled, NN_ARENA_CUBLAS=0, NN_ARENA_CUBLASLT=1, NN_ARENA_FUSED_BLOCKS_PER_SM=n).
import { Arena, planLayout, Trainer } from '../dist/index.js';

const NETS = { S: [[784, 128, 10], 100], M: [[784, 1024, 1024, 10], 256], L: [[4096, 4096, 4096, 4096], 2048] };
const argv = process.argv.slice(2);
const jsonAt = argv.indexOf('--json');
const jsonFile = jsonAt >= 0 ? argv.splice(jsonAt, 2)[1] : undefined;
const perEpochAt = argv.indexOf('--per-epoch'); // steps per epoch (one launch each on the fused path)
const perEpochArg = perEpochAt >= 0 ? Number(argv.splice(perEpochAt, 2)[1]) : undefined;
const [net = 'S', optimizer = 'sgd', stepsArg = '20', backend = 'cuda', precision = 'fp32'] = argv;
const [layers, batch] = NETS[net];
const steps = Number(stepsArg);
const perEpoch = perEpochArg ?? Math.min(steps, net === 'L' ? 10 : 100);
const samples = batch * perEpoch;
// 'recipe': issue 28's modern recipe, AdamW + GELU hidden layers + warmup-cosine + clipping.
const recipe = optimizer === 'recipe';
const plan = planLayout({
  layers,
  batch,
  optimizer: recipe ? 'adamw' : optimizer,
  samples,
  ...(recipe ? { activations: [...layers.slice(2).map(() => 'gelu'), 'softmax'] } : {}),
});
const arena = Arena.create(plan, { backend });
const extra = recipe ? { weightDecay: 0.01, schedule: { type: 'cosine', total: 100000, warmup: 100 }, clipGradNorm: 1 } : {};
const t = new Trainer(arena, { lr: optimizer === 'sgd' ? 1e-3 : 1e-4, precision, ...extra });
t.init(1);
const x = new Float32Array(samples * layers[0]);
for (let i = 0; i < x.length; i++) x[i] = (i % 251) / 251;
const labels = Uint8Array.from({ length: samples }, (_, i) => i % layers[layers.length - 1]);
await t.fit({ x, labels }, { epochs: 1 }); // warm-up
const r = await t.fit({ x, labels }, { epochs: Math.ceil(steps / perEpoch) });
const us = (r.seconds * 1e6) / r.steps;
const flops = 6 * batch * layers.slice(1).reduce((a, n, i) => a + n * layers[i], 0);
const tflops = flops / us / 1e6;
console.log(
  `${net} ${optimizer} ${backend} ${precision} [${process.env.NN_ARENA_STEP_PATH ?? 'auto'}${process.env.NN_ARENA_GEMM ? ` gemm=${process.env.NN_ARENA_GEMM}` : ''}${process.env.NN_ARENA_FUSED_BLOCKS_PER_SM ? ` bps=${process.env.NN_ARENA_FUSED_BLOCKS_PER_SM}` : ''}${process.env.NN_ARENA_CUBLASLT ? ` cublasLt=${process.env.NN_ARENA_CUBLASLT}` : ''}]: ${r.steps} steps, ${us.toFixed(1)} us/step, ${tflops.toFixed(2)} TFLOP/s, loss ${r.loss.toFixed(4)}, path ${r.path}`,
);
if (jsonFile) {
  const { appendFileSync } = await import('node:fs');
  // cublasLt: NN_ARENA_CUBLASLT (0, forward: the default, 1)
  const row = {
    network: net,
    layers,
    batch,
    optimizer,
    backend,
    precision,
    path: r.path,
    cublasLt: process.env.NN_ARENA_CUBLASLT || 'forward',
    steps: r.steps,
    microsPerStep: us,
    tflops,
    loss: r.loss,
  };
  appendFileSync(jsonFile, JSON.stringify(row) + '\n');
}
arena.dispose();
