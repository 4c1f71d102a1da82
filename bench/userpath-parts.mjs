// userpath-parts.mjs: where a user call's wall clock goes on one backend: each part of step() /
// predict() timed alone (a transfer of z[0], of the stats, a forward, a step, the primitives),
// to read beside bench/userpath.mjs.   npx tsup && node bench/userpath-parts.mjs
import { Arena, planLayout, Trainer } from '../dist/index.js';
const T = async (name, n, f) => {
  for (let i = 0; i < 20; i++) await f();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f();
  console.log(name, (((performance.now() - t0) / n) * 1000).toFixed(1), 'us');
};
for (const [net, layers, batch] of [
  ['T', [4, 4, 2], 1],
  ['S', [784, 128, 10], 100],
  ['M', [784, 1024, 1024, 10], 256],
]) {
  const arena = Arena.create(planLayout({ layers, batch, optimizer: 'sgd', samples: 1000 }), { backend: process.argv[2] ?? 'cuda' });
  const t = new Trainer(arena, { lr: 0.01 });
  t.init(1);
  const x = new Float32Array(batch * layers[0]).fill(0.5),
    labels = new Uint8Array(batch);
  const x1 = x.subarray(0, layers[0]);
  await T(`${net} toDevice z[0] whole region`, 500, () => arena.toDevice({ layers: [0], kinds: ['z'] }));
  await T(`${net} toHost stats`, 500, () => arena.toHost({ layers: [layers.length - 1], kinds: ['stats'] }));
  await T(`${net} synchronize`, 500, () => arena.synchronize());
  await T(`${net} toDevice stats (one sync transfer of 32 bytes)`, 500, () => arena.toDevice({ layers: [layers.length - 1], kinds: ['stats'] }));
  await T(`${net} forward 1 row`, 500, () => t.forward(x1));
  await T(`${net} forward batch`, 500, () => t.forward(x));
  await T(`${net} step batch`, 500, () => t.step(x, { labels }));
  await T(`${net} step 1 row`, 500, () => t.step(x1, { labels: labels.subarray(0, 1) }));
  await T(`${net} forward+backward+update`, 300, async () => {
    await t.forward(x);
    await t.backward({ labels });
    await t.update();
  });
  await T(`${net} metrics()`, 500, () => t.metrics());
  await T(`${net} predict 1 row`, 500, () => t.predict(x1));
  const x1000 = new Float32Array(1000 * layers[0]).fill(0.5);
  await T(`${net} predict 1000 rows`, 100, () => t.predict(x1000));
  const xs = new Float32Array(1000 * layers[0]).fill(0.25),
    ls = new Uint8Array(1000);
  await T(`${net} fit 1 epoch of 1000 rows (same data)`, 50, () => t.fit({ x: xs, labels: ls }, { epochs: 1 }));
  console.log('path', (await t.fit({ x: xs, labels: ls }, { epochs: 1 })).path);
  arena.dispose();
}
