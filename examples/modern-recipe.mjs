// modern-recipe.mjs: AdamW, a linear-warmup + cosine schedule and gradient clipping. Run: node examples/modern-recipe.mjs
import { Arena, planLayout, Trainer } from 'nn-arena';
import { loadMnist } from 'nn-arena/tools';

const { train, test } = loadMnist({ seed: 1 });
const arena = Arena.create(planLayout({ layers: [784, 128, 10], batch: 50, optimizer: 'adamw', samples: 8000 }));
const trainer = new Trainer(arena, { lr: 0.003, weightDecay: 0.01, schedule: { type: 'cosine', warmup: 100, total: 480 }, clipGradNorm: 1 });
trainer.init(1);
await trainer.fit(train, {
  epochs: 3,
  onProgress: (p) =>
    console.log(`epoch ${p.epoch}: loss ${p.loss.toFixed(4)}, lr ${p.lr.toExponential(2)}, last gradient norm ${p.gradNorms.at(-1).toFixed(3)}`),
});
console.log(`test accuracy ${((await trainer.evaluate(test)).accuracy * 100).toFixed(2)}%`);
arena.dispose();
