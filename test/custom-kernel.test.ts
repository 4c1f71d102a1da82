// Issue 17 part 3: a user's own native module on the arena. examples/custom-kernel is built here
// as a user's install builds it (its binding.gyp takes nn-arena's header through the include
// helper), then its C++ function runs between nn-arena's runs and is checked against JS.
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer, type View } from '../src/index.js';
import { buildExample, REPO, type CustomKernel } from './support/custom-kernel.js';

const SPEC = { layers: [6, 5, 3], batch: 4 } as const;
const X = Array.from({ length: 4 * 6 }, (_, i) => Math.sin(i + 1));
const LABELS = [0, 1, 2, 1];

function weightsOf(a: Arena): Float64Array[] {
  return [1, 2].map((l) => Float64Array.from(a.view(l, 'w')));
}

/** w <- (1 - rate) w as the C++ function computes it in the arena's dtype. */
function decayed(w: Float64Array, rate: number, dtype: 'float32' | 'float64'): Float64Array {
  const r = dtype === 'float32' ? Math.fround : (x: number) => x;
  const keep = r(1 - rate);
  return w.map((x) => r(x * keep));
}

describe('examples/custom-kernel (CPU build)', () => {
  let ex: CustomKernel;
  let dir: string;
  beforeAll(() => {
    ({ ex, dir } = buildExample(false));
  }, 300_000);

  it("finds nn-arena's header through the package's include helper, as its binding.gyp does", () => {
    const inc = createRequire(`${dir}/index.js`)('nn-arena/include') as { dir: string; header: string };
    expect(realpathSync(inc.dir)).toBe(`${REPO}/csrc/include`);
    expect(existsSync(inc.header)).toBe(true);
  });

  it('is built without CUDA when asked', () => {
    expect(ex.cudaBuilt).toBe(false);
    expect(() => ex.decayDeviceSide({}, 0.1)).toThrow(/without nvcc/);
  });

  for (const dtype of ['float32', 'float64'] as const) {
    it(`decays the weights between training steps, as JS computes it (${dtype})`, async () => {
      using a = Arena.create(planLayout({ ...SPEC, dtype, optimizer: 'momentum' }), { backend: 'cpu' });
      const t = new Trainer(a, { lr: 0.1 });
      t.init(3);
      const biases = Float64Array.from(a.view(1, 'b'));
      await t.step(X, { labels: LABELS });
      // The step ran on the device side (on the CPU backend: host memory of its own).
      a.toHost();
      const before = weightsOf(a);
      expect(await ex.decayWeights(a, 0.01)).toBe(6 * 5 + 5 * 3);
      a.toHost();
      const after = weightsOf(a);
      for (let l = 0; l < 2; l++) expect(after[l]).toEqual(decayed(before[l]!, 0.01, dtype));
      // Biases are not decayed; the trainer keeps going on the decayed weights.
      await t.step(X, { labels: LABELS });
      a.toHost();
      expect(Float64Array.from(a.view(1, 'b'))).not.toEqual(biases);
      expect(weightsOf(a)[0]).not.toEqual(after[0]);
    });
  }

  it('waits for a run in flight before it touches the arena (arena.synchronize())', async () => {
    using a = Arena.create(planLayout({ ...SPEC, batch: 64, layers: [64, 8, 3] }), { backend: 'cpu' });
    const t = new Trainer(a, { lr: 0.1 });
    t.init(4);
    const x = Array.from({ length: 64 * 64 }, (_, i) => Math.cos(i));
    const labels = Array.from({ length: 64 }, (_, i) => i % 3);
    const step = t.step(x, { labels });
    const decay = ex.decayWeights(a, 0.5);
    await Promise.all([step, decay]);
    // A decay before the step's update would have been lost in its write of w: compare with the
    // same sequence run one after the other.
    a.toHost();
    const raced = weightsOf(a);
    using b = Arena.create(a.plan, { backend: 'cpu' });
    const u = new Trainer(b, { lr: 0.1 });
    u.init(4);
    await u.step(x, { labels });
    await ex.decayWeights(b, 0.5);
    b.toHost();
    expect(raced).toEqual(weightsOf(b));
    // ... and the other order gives other weights, so the comparison can tell.
    using c = Arena.create(a.plan, { backend: 'cpu' });
    const v = new Trainer(c, { lr: 0.1 });
    v.init(4);
    await ex.decayWeights(c, 0.5);
    await v.step(x, { labels });
    c.toHost();
    expect(weightsOf(c)).not.toEqual(raced);
  });

  for (const dtype of ['float32', 'float64'] as const) {
    it(`keeps an EMA of the weights in a user region it finds by name (${dtype})`, async () => {
      const plan = planLayout({
        ...SPEC,
        dtype,
        extra: [
          { name: 'rng', bytes: 64 },
          { name: 'ema', like: 'w' },
        ],
      });
      using a = Arena.create(plan, { backend: 'cpu' });
      const t = new Trainer(a, { lr: 0.1 });
      t.init(5);
      for (const l of [1, 2]) a.view('ema', l).set(a.view(l, 'w')); // the EMA starts at the initial weights
      a.toDevice({ kinds: ['ema'] });
      const start = [1, 2].map((l) => Float64Array.from(a.view('ema', l)));
      await t.step(X, { labels: LABELS });
      expect(await ex.updateEma(a, 0.9)).toBe(6 * 5 + 5 * 3);
      a.toHost();
      // ema = 0.9 ema + 0.1 w, each product and the sum rounded to the dtype (as the C++ does).
      const r = dtype === 'float32' ? Math.fround : (x: number) => x;
      const keep = r(0.9),
        rest = r(1 - keep);
      const w = weightsOf(a);
      [1, 2].forEach((l, i) => {
        const want = start[i]!.map((e, k) => r(r(keep * e) + r(rest * w[i]![k]!)));
        expect(Float64Array.from(a.view('ema', l))).toEqual(want);
        expect(want).not.toEqual(start[i]); // the step moved the weights: the EMA moved
      });
      // The next step trains on w alone: the EMA region is nobody's but ours.
      const ema = [1, 2].map((l) => Float64Array.from(a.view('ema', l)));
      await t.step(X, { labels: LABELS });
      a.toHost();
      expect([1, 2].map((l) => Float64Array.from(a.view('ema', l)))).toEqual(ema);
    });
  }

  it('refuses an arena without the region, or one not shaped like the weights', async () => {
    using a = Arena.create(planLayout({ ...SPEC, extra: [{ name: 'zz', like: 'z' }] }), { backend: 'cpu' });
    await expect(ex.updateEma(a, 0.5)).rejects.toThrow(/no user region named 'ema'/);
    await expect(ex.updateEma(a, 0.5, 'zz')).rejects.toThrow(/not shaped like the weights/);
    expect(() => ex.updateEmaHostSide(a, 2, 'zz')).toThrow(/decay must be/);
  });

  it('works on the host side between toHost() and toDevice()', () => {
    using a = Arena.create(planLayout(SPEC), { backend: 'cpu' });
    const w = a.view(2, 'w') as View;
    w.fill(2);
    expect(ex.decayHostSide(a, 0.25)).toBe(45);
    expect(Array.from(w)).toEqual(Array(15).fill(1.5));
    expect(Array.from(a.view(1, 'w'))).toEqual(Array(30).fill(0));
  });
});
