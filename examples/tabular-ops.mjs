// tabular-ops.mjs: a residual MLP with embeddings, layernorm, dropout and rmsnorm on tabular data
// (a seeded synthetic set generated below: 16 numeric columns and 2 categorical ones, 3 classes).
// Run: node examples/tabular-ops.mjs
import { Arena, planLayout, Trainer } from 'nn-arena';

// The data: class = which of three hidden directions the row leans along most, plus what its
// two categories add. A row: 16 numeric values, then a category in [0, 10) and one in [0, 1000).
function tabular(rows, seed) {
  let s = seed >>> 0;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  const x = new Float32Array(rows * 18);
  const labels = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    const score = [0, 0, 0];
    for (let c = 0; c < 16; c++) {
      const v = rand();
      x[r * 18 + c] = v;
      score[c % 3] += c < 12 ? v : 0.5 * v * v;
    }
    const a = Math.floor((rand() + 1) * 5) % 10,
      b = Math.floor((rand() + 1) * 500) % 1000;
    x[r * 18 + 16] = a; // category indices, as numbers
    x[r * 18 + 17] = b;
    score[a % 3] += 0.5;
    score[b % 3] += 0.25;
    labels[r] = score.indexOf(Math.max(...score));
  }
  return { x, labels };
}

const plan = planLayout({
  batch: 64,
  optimizer: 'adamw',
  samples: 4096,
  layers: [
    18, // x's columns: 16 numeric, then 2 category indices
    {
      op: 'embedding', // the numeric columns, then a table row per category: 16 + 8 + 16 wide
      numeric: 16,
      categorical: [
        { cardinality: 10, dim: 8 }, // nn.Embedding(10, 8)
        { cardinality: 1000, dim: 16 },
      ],
    },
    { units: 64, activation: 'relu' },
    { op: 'layernorm' }, // nn.LayerNorm(64): gain and bias, eps 1e-5
    { units: 64, activation: 'relu' },
    { op: 'dropout', p: 0.1 }, // training runs only
    { units: 64 }, // no activation: identity
    { op: 'residual', from: 2 }, // adds the output of layer 2
    { op: 'rmsnorm' }, // nn.RMSNorm(64): gain
    { units: 3, activation: 'softmax' },
  ],
});
const arena = Arena.create(plan, { backend: 'cpu' }); // or 'cuda' (docs/ops.md)
try {
  const trainer = new Trainer(arena, { lr: 0.003, weightDecay: 0.01, dropoutSeed: 1 });
  trainer.init(1); // dense weights and tables drawn, gains 1, biases 0
  const fit = await trainer.fit(tabular(4096, 1), { epochs: 8, seed: 1 });
  const test = await trainer.evaluate(tabular(1024, 2)); // no dropout outside training
  console.log(`train loss ${fit.loss.toFixed(4)}; test accuracy ${(test.accuracy * 100).toFixed(1)}%`);
} finally {
  arena.dispose();
}
