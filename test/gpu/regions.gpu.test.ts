// User regions on the GPU (issue 17 part 1): in every memory mode (device; managed and staged
// under a device budget) nn-arena's training never reads or writes them, and transfers by name
// move them both ways. (The JIT kernel that finds them by name in device code is in
// jit.gpu.test.ts; the example module's CUDA EMA in custom-kernel.gpu.test.ts.)
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/regions.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, minDeviceBudget, planLayout, Trainer, type ArenaOptions, type Region } from '../../src/index.js';
import { toyData } from '../support/train-checks.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;

const plan = planLayout({
  layers: [64, 256, 256, 10],
  batch: 32,
  optimizer: 'adam',
  samples: 128,
  extra: [
    { name: 'ema', like: 'w' },
    { name: 'act', per: 'z', layers: [1, 2] },
    { name: 'rng', bytes: 4096 },
  ],
});
const extras = plan.regions.filter((r) => r.extra !== undefined);
const pattern = (r: Region) => Float64Array.from({ length: r.length }, (_, i) => (r.extra! + 1) * 1000 + r.layer * 100 + (i % 97));
const fillExtras = (a: Arena) => {
  for (const r of extras) a.view(r.layer, r.kind).set(pattern(r).map((x) => (r.kind === 'rng' ? x & 255 : x)));
};
const expectExtras = (a: Arena) => {
  for (const r of extras)
    expect(Array.from(a.view(r.layer, r.kind)), `${r.kind}[${r.layer}]`).toEqual(Array.from(pattern(r), (x) => (r.kind === 'rng' ? x & 255 : x)));
};

describe.skipIf(!hasGpu)(`user regions on ${info.name || 'no device'}`, () => {
  const budget = Math.max(minDeviceBudget(plan, 'managed').bytes, minDeviceBudget(plan, 'staged').bytes) + (1 << 20);
  for (const [name, options] of [
    ['device memory', { backend: 'cuda' }],
    ['managed memory under a budget', { backend: 'cuda', memory: 'managed', deviceBudget: budget }],
    ['staged memory under a budget', { backend: 'cuda', memory: 'staged', deviceBudget: budget }],
  ] as Array<[string, ArenaOptions]>) {
    it(`${name}: training leaves them as they were; transfers by name move them`, async () => {
      using a = Arena.create(plan, options);
      const t = new Trainer(a, { lr: 0.01 });
      t.init(2);
      fillExtras(a);
      a.toDevice({ kinds: ['ema', 'act', 'rng'] });
      const w1 = Array.from(a.view(1, 'w'));
      await t.fit(toyData(64, 10, 128, 4, false), { epochs: 2 });
      for (const r of extras) a.view(r.layer, r.kind).fill(0);
      a.toHost(); // the whole arena: what the device side holds
      expect(Array.from(a.view(1, 'w'))).not.toEqual(w1);
      expectExtras(a);
      // One of them back and forth on its own: a device-side copy of exactly those bytes.
      a.view('rng').fill(0);
      expect(a.toHost({ kinds: ['rng'] })).toEqual({ transfers: 1, bytes: 4096 });
      expectExtras(a);
    });
  }
});
