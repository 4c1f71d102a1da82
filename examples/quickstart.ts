// quickstart.ts: the README's quick start in TypeScript, with `using` (TypeScript 5.2+ compiles it
// for Node 20; plain JavaScript needs Node 24+ for `using`). Run: npm run examples (compiles it
// with the TypeScript compiler first), or with any TypeScript runner (tsx, ts-node, Node 23.6+).
import { Arena, ArenaError, planLayout, Trainer, type Plan } from 'nn-arena';
import { loadMnist } from 'nn-arena/tools';

const plan: Plan = planLayout({ layers: [784, 128, 10], batch: 50, optimizer: 'sgd', samples: 8000 });

{
  using arena = Arena.create(plan); // disposed (both allocations freed) at the end of the block
  const { train, test } = loadMnist();
  const trainer = new Trainer(arena, { lr: 0.05 });
  trainer.init(3);
  await trainer.fit(train, {
    epochs: 2,
    onProgress: (p) => {
      if (p.batch === 0) console.log(`epoch ${p.epoch}`);
    },
  });
  const { accuracy, loss } = await trainer.evaluate(test);
  console.log(`${arena.backend}: test accuracy ${(accuracy * 100).toFixed(2)}%, loss ${loss.toFixed(4)}`);
}

try {
  Arena.create(plan, { memory: 'managed', backend: 'cpu' });
} catch (e) {
  if (e instanceof ArenaError)
    console.log(`as expected: ${e.code}`); // managed memory needs CUDA
  else throw e;
}
