// quickstart.cjs: the README's quick start, as CommonJS (Node 20+). Run: node examples/quickstart.cjs
const { Arena, planLayout, Trainer } = require('nn-arena');
const { loadMnist } = require('nn-arena/tools');

async function main() {
  const plan = planLayout({ layers: [784, 64, 10], batch: 100, optimizer: 'adam', samples: 8000 });
  const arena = Arena.create(plan, { backend: 'cpu' }); // or 'auto' / 'cuda'
  try {
    const { train, test } = loadMnist({ seed: 2 });
    const trainer = new Trainer(arena); // adam: lr 0.001 by default
    trainer.init(2);
    await trainer.fit(train, { epochs: 2, seed: 2 });
    const { accuracy } = await trainer.evaluate(test);
    console.log(`backend ${arena.backend}: test accuracy ${(accuracy * 100).toFixed(2)}%`);
  } finally {
    arena.dispose();
  }
}

main().catch((e) => {
  console.error(`${e.code ?? 'ERROR'}: ${e.message}`);
  process.exitCode = 1;
});
