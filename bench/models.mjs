// models.mjs: K models of the S network (784-128-10, batch 100, SGD, one learning rate per
// model) trained together in one arena, Trainer.fit over a resident data set: microseconds per
// step (a step = one batch through every model) for each K, beside the torch.func reference
// (bench/torch_ref.py --models: stack_module_state + vmap(grad(functional_call)), the full SGD
// step, captured as a CUDA graph; bf16: autocast over the forward) run in the same call in the same
// precision. Issue 19 targets (H100): K=64 <= 100 us,
// K=256 <= 300 us.
//   node bench/models.mjs [--models 1,8,64,256] [--steps 500] [--backend cuda] [--precision fp32|bf16] [--out FILE.json] [--no-torch]
// Uses the built package (dist/). Environment knobs of the CUDA backend apply
// (NN_ARENA_STEP_PATH=fused|layers, NN_ARENA_GEMM=tiled, ...): bench/models.mjs runs once per path.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Arena, planLayout, Trainer } from '../dist/index.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const ks = opt('models', '1,8,64,256').split(',').map(Number);
const steps = Number(opt('steps', '500'));
const backend = opt('backend', 'cuda');
const out = opt('out', '');
const precision = opt('precision', 'fp32'); // bf16: per-model bf16 copies, batched bf16 products (per-layer path)
const layers = [784, 128, 10],
  batch = 100;
const perEpoch = Math.min(steps, 100);
const samples = batch * perEpoch;
const x = new Float32Array(samples * layers[0]);
for (let i = 0; i < x.length; i++) x[i] = (i % 251) / 251;
const labels = Uint8Array.from({ length: samples }, (_, i) => i % 10);
const lrsOf = (K) => Array.from({ length: K }, (_, m) => 1e-3 * (1 + (9 * m) / Math.max(K - 1, 1))); // 1e-3 .. 1e-2

const rows = [];
const pathName = `${process.env.NN_ARENA_STEP_PATH ?? 'auto'}${process.env.NN_ARENA_GEMM ? ` gemm=${process.env.NN_ARENA_GEMM}` : ''}`;
for (const K of ks) {
  const plan = planLayout({ layers, batch, samples, models: K });
  const arena = Arena.create(plan, { backend });
  try {
    const t = new Trainer(arena, { lr: lrsOf(K), precision });
    t.init(1);
    await t.fit({ x, labels }, { epochs: 1 }); // warm-up
    const r = await t.fit({ x, labels }, { epochs: Math.ceil(steps / perEpoch) });
    const us = (r.seconds * 1e6) / r.steps;
    const flops = 6 * batch * K * layers.slice(1).reduce((a, n, i) => a + n * layers[i], 0);
    const row = {
      impl: 'nn-arena',
      path: r.path,
      knobs: pathName,
      precision,
      models: K,
      steps: r.steps,
      microsPerStep: us,
      tflops: flops / us / 1e6,
      arenaBytes: plan.totalBytes,
    };
    rows.push(row);
    console.log(
      `nn-arena S x${K} sgd ${backend} ${precision} [${pathName} -> ${r.path}]: ${us.toFixed(1)} us/step, ${row.tflops.toFixed(2)} TFLOP/s, arena ${(plan.totalBytes / 2 ** 20).toFixed(1)} MiB`,
    );
  } finally {
    arena.dispose();
  }
}

if (!args.includes('--no-torch') && backend === 'cuda') {
  const file = out ? out.replace(/\.json$/, '') + '-torch.json' : '/tmp/nn-arena-models-torch.json';
  const py = spawnSync('python3', ['bench/torch_ref.py', '--models', ks.join(','), '--precisions', precision, '--out', file], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  if (py.status === 0) rows.push(...JSON.parse(readFileSync(file, 'utf8')).rows.map((r) => ({ impl: 'torch.func', ...r })));
  else console.log(`torch.func reference not run (python3 bench/torch_ref.py exited ${py.status ?? py.error?.message})`);
}
if (out) writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), network: 'S', layers, batch, rows }, null, 2));
