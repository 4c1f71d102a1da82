// user-regions.mjs: regions of your own in the arena (README: "Embedding nn-arena in your own trainer").
import { Arena, planLayout, Trainer } from 'nn-arena';

const plan = planLayout({
  layers: [4, 8, 3],
  batch: 2,
  extra: [
    { name: 'ema', like: 'w' },
    { name: 'rng', bytes: 4096 },
  ], // an EMA per layer; 4 KiB for everything
});
const arena = Arena.create(plan);
try {
  new Trainer(arena, { lr: 0.1 }).init(1);
  for (const l of [1, 2]) arena.view('ema', l).set(arena.view(l, 'w')); // the EMA starts at w
  arena.toDevice({ kinds: ['ema'] }); // by name, like built-in kinds
  for (const r of plan.find('ema')) console.log(`ema of layer ${r.layer}: ${r.length} values at byte ${r.offset}`);
  console.log(`rng: ${arena.view('rng').length} raw bytes`); // a Uint8Array
} finally {
  arena.dispose();
}
