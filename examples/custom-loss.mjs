// custom-loss.mjs: a training step of your own from the Trainer's primitives: forward, a Huber
// loss written in JavaScript, backward from its gradient, the built-in optimizer.
// Run: node examples/custom-loss.mjs
import { Arena, planLayout, Trainer } from 'nn-arena';

const arena = Arena.create(planLayout({ layers: [2, 16, 1], batch: 64, activations: ['tanh', 'identity'], optimizer: 'adam' }));
try {
  const trainer = new Trainer(arena, { lr: 0.02 });
  trainer.init(1);
  // Learn y = x0 * x1 on 64 points with a Huber loss (quadratic within delta, linear beyond).
  const x = Float32Array.from({ length: 128 }, (_, i) => Math.sin(i * 1.7));
  const y = Float32Array.from({ length: 64 }, (_, r) => x[2 * r] * x[2 * r + 1]);
  const delta = 0.1;
  for (let step = 0; step <= 300; step++) {
    const out = await trainer.forward(x); // 64 x 1 outputs: a view, valid until the next run
    let loss = 0;
    const dOutput = new Float32Array(out.length); // dL/d(output), the mean's 1/rows included
    for (let i = 0; i < out.length; i++) {
      const r = out[i] - y[i];
      loss += (Math.abs(r) <= delta ? (r * r) / 2 : delta * (Math.abs(r) - delta / 2)) / out.length;
      dOutput[i] = Math.max(-delta, Math.min(delta, r)) / out.length;
    }
    if (step % 100 === 0) console.log(`step ${step}: Huber loss ${loss.toFixed(5)}`);
    await trainer.backward({ dOutput }); // dw and db of every layer, on the device
    await trainer.update(); // Adam, exactly as step() applies it
  }
  const s = arena.stats; // per step: x and dOutput up, the outputs down; nothing else
  console.log(`transfers: ${s.toDeviceTransfers} to the device, ${s.toHostTransfers} to the host`);
} finally {
  arena.dispose();
}
