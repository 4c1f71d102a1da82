// launch-overhead.mjs: a run's fixed cost: fit() over epochs of ONE step (one native run each),
// on S (784-128-10, batch 100) or a 4-4-2 net of batch 1 (T: the plumbing alone).
//   npx tsup && node bench/launch-overhead.mjs [S|T] [cuda|cpu] [epochs]
import { Arena, planLayout, Trainer } from '../dist/index.js';

const [net = 'S', backend = 'cuda', epochsArg = '2000'] = process.argv.slice(2);
const layers = net === 'S' ? [784, 128, 10] : [4, 4, 2],
  batch = net === 'S' ? 100 : 1;
const arena = Arena.create(planLayout({ layers, batch, optimizer: 'adam', samples: batch }), { backend });
const t = new Trainer(arena, { lr: 1e-4 });
t.init(1);
const x = new Float32Array(batch * layers[0]).fill(0.5);
const labels = Uint8Array.from({ length: batch }, (_, i) => i % layers[layers.length - 1]);
await t.fit({ x, labels }, { epochs: 20 }); // warm-up
const r = await t.fit({ x, labels }, { epochs: Number(epochsArg) });
console.log(`${net} ${backend}: ${((r.seconds * 1e6) / r.steps).toFixed(1)} us a one-step epoch (${r.steps} epochs, path ${r.path})`);
arena.dispose();
