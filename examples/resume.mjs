// resume.mjs: stop a training run part way, checkpoint it, load it and go on: the result is
// the run that never stopped, bit for bit (README: "Checkpoints and exact resume").
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Arena, inspectCheckpoint, planLayout, Trainer } from 'nn-arena';
import { loadMnist } from 'nn-arena/tools';

const { train } = loadMnist({ seed: 1 });
const plan = planLayout({ layers: [784, 32, 10], batch: 50, optimizer: 'adam', samples: train.count });
const fit = { epochs: 2, seed: 7, reportsPerEpoch: 4 };
const options = { lr: 0.002, beta2: 0.995 }; // saved in the checkpoint with the weights

// The run that never stops.
const whole = Arena.create(plan);
const a = new Trainer(whole, options);
a.init(1);
await a.fit(train, fit);

// The same run, stopped after 3 of its 8 progress reports (here by throwing from onProgress),
// saved, and resumed by a Trainer loaded from the file: fit(data, { resume: true }) goes on
// from the batch, sample order and RNG state where it stopped.
const path = join(mkdtempSync(join(tmpdir(), 'nn-arena-example-')), 'run.nna');
{
  const arena = Arena.create(plan);
  const b = new Trainer(arena, options);
  b.init(1);
  let reports = 0;
  await b
    .fit(train, {
      ...fit,
      onProgress: () => {
        if (++reports === 3) throw new Error('stop');
      },
    })
    .catch(() => {});
  console.log(`stopped at step ${b.steps}; checkpoint of ${b.save(path)} bytes (no data set: ${!inspectCheckpoint(path).data})`);
  arena.dispose();
}
const c = Trainer.load(path); // owns its arena: c.dispose() frees it
try {
  const r = await c.fit(train, { resume: true });
  const bytes = (arena, l, k) => {
    const v = arena.view(l, k);
    return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  };
  const same = [1, 2].every((l) => ['w', 'b'].every((k) => bytes(c.arena, l, k).equals(bytes(whole, l, k))));
  console.log(`resumed for ${r.steps} steps to step ${c.steps}; weights identical to the run that never stopped: ${same}`);
  if (!same) process.exitCode = 1;
} finally {
  c.dispose();
  whole.dispose();
}
