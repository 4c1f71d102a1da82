// quickstart.mjs: the README's quick start, as an ES module (Node 20+). Run: node examples/quickstart.mjs
import { Arena, planLayout, Trainer } from 'nn-arena';
import { loadMnist } from 'nn-arena/tools';

// 1. Plan: every region's offset and size, exact, before anything is allocated.
const plan = planLayout({ layers: [784, 128, 10], batch: 50, optimizer: 'momentum', samples: 8000 });
console.log(`arena: ${plan.totalBytes} bytes in ${plan.regions.length} regions`, JSON.stringify(plan.bytesByKind()));

// 2. Allocate: one host and one device allocation ('auto': CUDA when a usable GPU is here, else CPU).
const arena = Arena.create(plan);
try {
  console.log(`backend: ${arena.backend}`);

  // 3. Train on 8,000 MNIST digits and test on 2,000 held out (shipped by the `mnist` package).
  const { train, test } = loadMnist({ seed: 1 });
  const trainer = new Trainer(arena, { lr: 0.05 });
  trainer.init(1); // seeded weights: the same on every backend
  const fit = await trainer.fit(train, { epochs: 3, seed: 1 });
  const result = await trainer.evaluate(test);
  console.log(`train loss ${fit.loss.toFixed(4)}; test accuracy ${(result.accuracy * 100).toFixed(2)}%`);

  // 4. Read the weights of layer 1 on the host: a zero-copy Float32Array over the arena.
  arena.toHost({ kinds: ['w', 'b'] });
  console.log(`layer 1 weights: ${arena.view(1, 'w').length} floats`);

  // 5. What moved, counted natively. The CPU backend has a "device" side too (a second host
  //    allocation the steps run on), so the counts are the same on both backends: 1 (the header,
  //    at create) + 1 (what init wrote: weights, biases and optimizer state, not the empty data
  //    regions) + 1 (the training set, resident from then on) + 2 (the test set's inputs and
  //    targets, made resident in its turn for one evaluation run).
  const s = arena.stats;
  console.log(
    `allocations: ${s.hostAllocs} host, ${s.deviceAllocs} device; transfers: ${s.toDeviceTransfers} to the device (${s.toDeviceBytes} bytes), ${s.toHostTransfers} to the host (${s.toHostBytes} bytes)`,
  );
} finally {
  arena.dispose(); // frees both allocations (Node 24+ or TypeScript: `using arena = ...`)
}
