// A learning-rate sweep: 4 networks of one shape trained together in one arena.
import { Arena, planLayout, Trainer } from 'nn-arena';
import { loadMnist } from 'nn-arena/tools';

const { train, test } = loadMnist({ seed: 1 });
const plan = planLayout({ layers: [784, 64, 10], batch: 50, samples: 8000, models: 4 });
const arena = Arena.create(plan);
try {
  const trainer = new Trainer(arena, { lr: [0.01, 0.03, 0.1, 0.3] });
  trainer.init(7); // model m starts from seed 7 + m
  const fit = await trainer.fit(train, { epochs: 1 });
  const ev = await trainer.evaluate(test);
  ev.accuracies.forEach((a, m) => console.log(`lr ${[0.01, 0.03, 0.1, 0.3][m]}: loss ${fit.losses[m].toFixed(3)}, test accuracy ${(100 * a).toFixed(1)}%`));
} finally {
  arena.dispose();
}
