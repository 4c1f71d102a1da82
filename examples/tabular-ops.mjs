// tabular-ops.mjs: a residual MLP with layernorm, dropout and rmsnorm on tabular data (a seeded
// synthetic set generated below: 16 numeric columns, 3 classes). Run: node examples/tabular-ops.mjs
import { Arena, planLayout, Trainer } from 'nn-arena';

// The data: class = which of three hidden directions the row leans along most, plus noise.
function tabular(rows, seed) {
  let s = seed >>> 0;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  const x = new Float32Array(rows * 16);
  const labels = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    const score = [0, 0, 0];
    for (let c = 0; c < 16; c++) {
      const v = rand();
      x[r * 16 + c] = v;
      score[c % 3] += c < 12 ? v : 0.5 * v * v;
    }
    labels[r] = score.indexOf(Math.max(...score));
  }
  return { x, labels };
}

const plan = planLayout({
  batch: 64,
  optimizer: 'adamw',
  samples: 4096,
  layers: [
    16,
    { units: 64, activation: 'relu' },
    { op: 'layernorm' }, // nn.LayerNorm(64): gain and bias, eps 1e-5
    { units: 64, activation: 'relu' },
    { op: 'dropout', p: 0.1 }, // training runs only
    { units: 64 }, // no activation: identity
    { op: 'residual', from: 1 }, // adds the output of layer 1
    { op: 'rmsnorm' }, // nn.RMSNorm(64): gain
    { units: 3, activation: 'softmax' },
  ],
});
const arena = Arena.create(plan, { backend: 'cpu' }); // or 'cuda' (docs/ops.md)
try {
  const trainer = new Trainer(arena, { lr: 0.003, weightDecay: 0.01, dropoutSeed: 1 });
  trainer.init(1); // dense weights drawn, gains 1, biases 0
  const fit = await trainer.fit(tabular(4096, 1), { epochs: 8, seed: 1 });
  const test = await trainer.evaluate(tabular(1024, 2)); // no dropout outside training
  console.log(`train loss ${fit.loss.toFixed(4)}; test accuracy ${(test.accuracy * 100).toFixed(1)}%`);
} finally {
  arena.dispose();
}
