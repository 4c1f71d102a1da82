// ops.mjs: the residual tabular MLP (an embedding of 2 categorical columns after 64
// numeric ones, layernorm, dropout, residual, rmsnorm; batch 512, AdamW) trained by fit: the wall
// clock around the call, measured from outside, beside the Trainer's own `seconds`.
// Data: a seeded synthetic set (65,536 rows x 66 float32, 2 classes), made once.
//   npx tsup && node bench/ops.mjs [--backend cpu|cuda] [--precisions fp32,tf32] [--samples N] [--epochs E] [--dense] [--json file]
// --dense: the same widths without the ops (66-256-256-256-2, the indices read as numbers), what the ops cost beside it.
// PyTorch in the same run: bench/ops_torch.py (the caller runs it; scripts/gpu-session.sh ops).
import { Arena, Dataset, planLayout, Trainer } from '../dist/index.js';
import { writeFileSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import { headCommit } from './git-commit.mjs';
import { flag, option, xorshift } from './bench-args.mjs';

const opt = option;
const backend = opt('backend', 'auto');
const precisions = opt('precisions', 'fp32').split(',');
const samples = Number(opt('samples', '65536'));
const epochs = Number(opt('epochs', '5'));
const jsonOut = opt('json', undefined);
const dense = flag('dense');

export const OPS_NET = [
  66,
  {
    op: 'embedding',
    numeric: 64,
    categorical: [
      { cardinality: 10, dim: 8 },
      { cardinality: 1000, dim: 16 },
    ],
  },
  { units: 256, activation: 'relu' },
  { op: 'layernorm', eps: 1e-5 },
  { units: 256, activation: 'relu' },
  { op: 'dropout', p: 0.1 },
  { units: 256 },
  { op: 'residual', from: 2 },
  { op: 'rmsnorm' },
  { units: 2, activation: 'softmax' },
];
const DENSE_NET = [66, { units: 256, activation: 'relu' }, { units: 256, activation: 'relu' }, { units: 256 }, { units: 2, activation: 'softmax' }];
const BATCH = 512;

function makeSet(n) {
  const x = new Float32Array(n * 66),
    labels = new Uint8Array(n);
  const draw = xorshift(0x2545f491);
  const next = () => draw() - 0.5;
  for (let r = 0; r < n; r++) {
    let score = 0;
    for (let c = 0; c < 64; c++) {
      const v = next();
      x[r * 66 + c] = v;
      score += c % 2 ? v : v * v - 1 / 12;
    }
    const a = Math.floor((next() + 0.5) * 10) % 10,
      b = Math.floor((next() + 0.5) * 1000) % 1000;
    x[r * 66 + 64] = a; // category indices
    x[r * 66 + 65] = b;
    labels[r] = score + (a % 2 ? 0.2 : -0.2) > 0 ? 1 : 0;
  }
  return { x, labels };
}

const data = new Dataset(makeSet(samples));
const rows = [];
for (const precision of precisions) {
  const arena = Arena.create(planLayout({ layers: dense ? DENSE_NET : OPS_NET, batch: BATCH, optimizer: 'adamw', samples }), { backend });
  try {
    const t = new Trainer(arena, { lr: 1e-3, weightDecay: 0.01, precision, dropoutSeed: 1 });
    t.init(1);
    let at = performance.now();
    const first = await t.fit(data, { epochs: 1, seed: 1 }); // the first call: the upload and the first graph capture
    const firstMs = performance.now() - at;
    at = performance.now();
    const fit = await t.fit(data, { epochs, seed: 2 });
    const wallMs = performance.now() - at;
    const steps = epochs * Math.ceil(samples / BATCH);
    rows.push({
      net: dense ? 'dense' : 'ops',
      precision,
      backend: arena.backend,
      samples,
      epochs,
      steps,
      firstEpochMs: firstMs,
      wallMs,
      wallStepUs: (wallMs * 1000) / steps,
      secondsStepUs: (fit.seconds * 1e6) / steps,
      loss: fit.loss,
      firstLoss: first.loss,
    });
    console.log(
      `${dense ? 'dense' : 'ops'} ${arena.backend} ${precision}: fit ${epochs} epochs ${wallMs.toFixed(1)} ms wall (${((wallMs * 1000) / steps).toFixed(1)} us a step; seconds ${((fit.seconds * 1e6) / steps).toFixed(1)} us), loss ${fit.loss.toFixed(4)}; first epoch ${firstMs.toFixed(1)} ms`,
    );
  } finally {
    arena.dispose();
  }
}
if (jsonOut)
  writeFileSync(
    jsonOut,
    JSON.stringify({ bench: 'ops', machine: { host: hostname(), cpu: cpus()[0]?.model, cores: cpus().length }, commit: headCommit(), rows }, null, 1),
  );
