// export_check.mjs: the nn-arena half of bench/export_check.py (issue 31). Trains small networks
// on the CPU backend, exports each to safetensors and writes, into DIR, the files and a
// cases.json with inputs and nn-arena's predict() outputs for PyTorch to reproduce.
//   node bench/export_check.mjs DIR        (needs dist/: npx tsup)
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Arena, planLayout, Trainer } from '../dist/index.js';
import { saveSafetensors } from '../dist/io.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: node bench/export_check.mjs DIR');
const networks = [
  { name: 'mlp-f32', layers: [20, 32, 16, 5], activations: ['relu', 'tanh', 'softmax'], dtype: 'float32' },
  { name: 'mlp-f64', layers: [12, 24, 3], activations: ['sigmoid', 'identity'], dtype: 'float64' },
  { name: 'mnist-shape-f32', layers: [784, 128, 10], activations: ['relu', 'softmax'], dtype: 'float32' },
  { name: 'modern-f32', layers: [20, 32, 24, 16, 5], activations: ['gelu', 'silu', 'leaky-relu', 'softmax'], dtype: 'float32' },
  { name: 'modern-f64', layers: [12, 24, 16, 3], activations: ['gelu-tanh', 'softplus', 'identity'], dtype: 'float64' },
  // the ops (docs/ops.md): the NnArena module, its layers' objects
  ...['float32', 'float64'].map((dtype) => ({
    name: `ops-${dtype === 'float32' ? 'f32' : 'f64'}`,
    layers: [
      12,
      { units: 24, activation: 'gelu' },
      { op: 'layernorm' },
      { op: 'dropout', p: 0.2 },
      { units: 24 },
      { op: 'residual', from: 1 },
      { op: 'rmsnorm' },
      { units: 3, activation: 'softmax' },
    ],
    dtype,
  })),
  // an embedding of two categorical columns (x's last two: indices of their tables)
  ...['float32', 'float64'].map((dtype) => ({
    name: `embedding-${dtype === 'float32' ? 'f32' : 'f64'}`,
    layers: [
      6,
      {
        op: 'embedding',
        numeric: 4,
        categorical: [
          { cardinality: 9, dim: 3 },
          { cardinality: 40, dim: 5 },
        ],
      },
      { units: 16, activation: 'relu' },
      { units: 3, activation: 'softmax' },
    ],
    dtype,
    indices: [9, 40],
  })),
];
const wave = (n, k) => Array.from({ length: n }, (_, i) => Math.sin(0.37 * i + k) * Math.cos(0.011 * i * k));
// `n` values of rows `inputs` wide, the last columns indices of tables of `indices` rows
const rowsOf = (net, n, inputs, k) =>
  wave(n, k).map((v, i) => {
    const cards = net.indices ?? [],
      c = (i % inputs) - (inputs - cards.length);
    return c < 0 ? v : Math.floor(Math.abs(v) * 997) % cards[c];
  });
const cases = [];
for (const net of networks) {
  const plan = planLayout({
    layers: net.layers,
    ...(net.activations ? { activations: net.activations } : {}),
    dtype: net.dtype,
    batch: 16,
    samples: 64,
    optimizer: 'adam',
  });
  const { layers, activations } = plan.spec;
  const inputs = layers[0],
    outputs = layers.at(-1);
  const arena = Arena.create(plan, { backend: 'cpu' });
  try {
    const t = new Trainer(arena, { lr: 0.01, dropoutSeed: 5 });
    t.init(7);
    const softmax = activations.at(-1) === 'softmax';
    const x = rowsOf(net, 64 * inputs, inputs, 1);
    const target = softmax ? { labels: Array.from({ length: 64 }, (_, i) => (i * 7) % outputs) } : { y: wave(64 * outputs, 2) };
    await t.fit({ x, ...target }, { epochs: 3, seed: 1 });
    const file = `${net.name}.safetensors`;
    saveSafetensors(arena, join(dir, file));
    const xt = rowsOf(net, 9 * inputs, inputs, 3);
    cases.push({ ...net, layers, activations, file, rows: 9, x: xt, predict: Array.from(await t.predict(xt)) });
  } finally {
    arena.dispose();
  }
}
writeFileSync(join(dir, 'cases.json'), JSON.stringify(cases));
console.log(`wrote ${cases.length} networks to ${dir}`);
