// stream-npy.mjs: train from .npy files larger than the plan's data regions. The 8,000 MNIST
// training digits are written as x.npy / labels.npy (as NumPy's np.save would); the arena holds
// 1,000 rows, and fit() streams the files through them a window at a time, reading the next
// window while the current one trains. Run: node examples/stream-npy.mjs
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Arena, planLayout, Trainer } from 'nn-arena';
import { loadNpy, streamNpy, toNpy } from 'nn-arena/io';
import { loadMnist } from 'nn-arena/tools';

const dir = mkdtempSync(join(tmpdir(), 'nn-arena-stream-'));
const { train, test } = loadMnist({ seed: 1 });
writeFileSync(join(dir, 'x.npy'), toNpy(Float32Array.from(train.x), [8000, 784]));
writeFileSync(join(dir, 'labels.npy'), toNpy(Uint8Array.from(train.labels)));
console.log(`x.npy: ${loadNpy(join(dir, 'x.npy')).shape.join(' x ')} float32`);

const arena = Arena.create(planLayout({ layers: [784, 128, 10], batch: 50, optimizer: 'momentum', samples: 1000 }));
try {
  const trainer = new Trainer(arena, { lr: 0.05 });
  trainer.init(1);
  const fit = await trainer.fit(streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') }), { epochs: 3, seed: 1 });
  const result = await trainer.evaluate({ x: test.x.subarray(0, 1000 * 784), labels: test.labels.subarray(0, 1000) });
  console.log(
    `streamed 8000 rows through a 1000-row arena: ${fit.steps} steps, train loss ${fit.loss.toFixed(4)}; test accuracy ${(result.accuracy * 100).toFixed(1)}%`,
  );
} finally {
  arena.dispose();
  rmSync(dir, { recursive: true, force: true });
}
