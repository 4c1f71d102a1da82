// act.test.ts: the activations and losses of the descriptor tables on the CPU backend: gradients
// against finite differences, where the pre-activations live (z), every combination the table
// says works (compact plans, K models, the primitives, checkpoints), and every typed refusal.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Arena, LayoutError, OptionError, planLayout, Trainer, type LayoutSpec } from '../src/index.js';
import { caseName, gradientCheck, NEW_GRAD_CASES, toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;

describe('gradient check of the new activations and losses (CPU, float64): analytic == central differences', () => {
  it.each(NEW_GRAD_CASES.map((c) => [caseName(c), c] as const))('%s', async (_n, c) => {
    const { maxRel, where } = await gradientCheck(c, cpu);
    expect(maxRel, where).toBeLessThanOrEqual(1e-6);
  });
});

/** Weights and biases after `steps` resident steps of a 6-10-8-3 network from one seed. */
async function trained(spec: Partial<LayoutSpec>, models = 1, steps = 6, loss?: 'bce-with-logits') {
  const batch = 8;
  const full: LayoutSpec = {
    layers: [6, 10, 8, 3],
    batch,
    samples: batch * steps,
    optimizer: 'adam',
    activations: ['gelu', 'silu', 'softmax'],
    ...spec,
    ...(models > 1 ? { models } : {}),
  };
  using arena = Arena.create(planLayout(full), cpu);
  const t = new Trainer(arena, { lr: 0.01, ...(loss ? { loss } : {}) });
  t.init(4);
  const d = toyData(6, 3, batch * steps, 2, loss !== undefined);
  await t.fit(loss ? { x: d.x, y: d.y!.map((v) => (v > 0 ? 1 : 0)) } : { x: d.x, labels: d.labels! }, { epochs: 1, seed: 3 });
  arena.toHost({ kinds: ['w', 'b'] });
  const out: number[] = [];
  for (let m = 0; m < models; m++) for (let l = 1; l < 4; l++) out.push(...arena.view(l, 'w', m), ...arena.view(l, 'b', m));
  return out;
}

describe("pre-activations: kept in z only where f' needs them", () => {
  it('a relu / tanh network keeps its exact bytes; gelu, gelu-tanh, silu, softplus double z of their layers', () => {
    const relu = planLayout({ layers: [4, 6, 5, 3], batch: 7, activations: ['relu', 'tanh', 'softmax'] });
    expect(relu.region(1, 'z')!.length).toBe(42);
    for (const a of ['gelu', 'gelu-tanh', 'silu', 'softplus'] as const) {
      const p = planLayout({ layers: [4, 6, 5, 3], batch: 7, activations: [a, 'tanh', 'softmax'] });
      expect(p.region(1, 'z')!.length, a).toBe(84);
      expect(p.region(2, 'z')!.length, a).toBe(35);
      expect(p.totalBytes).toBeGreaterThan(relu.totalBytes);
    }
    const leaky = planLayout({ layers: [4, 6, 5, 3], batch: 7, activations: ['leaky-relu', 'tanh', 'softmax'] });
    expect(leaky.region(1, 'z')!.length).toBe(42); // f' from the output: z > 0 exactly where x > 0
  });

  it('after a forward pass the second half of z holds the pre-activations x W^T + b', async () => {
    using arena = Arena.create(planLayout({ layers: [2, 3, 2], batch: 2, dtype: 'float64', activations: ['silu', 'softmax'] }), cpu);
    const t = new Trainer(arena);
    arena.view(1, 'w').set([1, 2, -1, 0.5, 0, -3]);
    arena.view(1, 'b').set([0.1, -0.2, 0.3]);
    t.markHostChanged();
    await t.predict([1, -1, 0.5, 2]);
    arena.toHost({ layers: [1], kinds: ['z'] });
    const z = arena.view(1, 'z');
    const x = [1 - 2 + 0.1, -1 - 0.5 - 0.2, 0 + 3 + 0.3, 0.5 + 4 + 0.1, -0.5 + 1 - 0.2, 0 - 6 + 0.3];
    x.forEach((v, i) => {
      expect(z[6 + i]).toBeCloseTo(v, 14);
      expect(z[i]).toBeCloseTo(v / (1 + Math.exp(-v)), 14);
    });
  });
});

describe('every combination of the table trains alike', () => {
  it('a compact plan trains the bits of the full plan (gelu, silu; pre-activations in shared bytes)', async () => {
    expect(await trained({ compact: true })).toEqual(await trained({}));
  });

  it('K models: each model trains the bits of a one-model arena', async () => {
    const two = await trained({}, 2);
    const one = await trained({});
    expect(two.slice(0, one.length)).toEqual(one);
  });

  it('bce-with-logits on a resident fit, compact or not', async () => {
    const spec = { activations: ['softplus', 'leaky-relu', 'identity'] as const, leakyReluSlope: 0.05 };
    expect(await trained({ ...spec, activations: [...spec.activations], compact: true }, 1, 6, 'bce-with-logits')).toEqual(
      await trained({ ...spec, activations: [...spec.activations] }, 1, 6, 'bce-with-logits'),
    );
  });

  it('forward / backward / update give the bits of step() (the pre-activations survive between runs)', async () => {
    const spec: LayoutSpec = { layers: [5, 7, 3], batch: 4, dtype: 'float64', optimizer: 'momentum', activations: ['gelu-tanh', 'softmax'] };
    const d = toyData(5, 3, 4, 8, false);
    const run = async (parts: boolean) => {
      using arena = Arena.create(planLayout(spec), cpu);
      const t = new Trainer(arena, { lr: 0.1, labelSmoothing: 0.1 });
      t.init(2);
      for (let s = 0; s < 3; s++) {
        if (parts) {
          await t.forward(d.x);
          await t.backward({ labels: d.labels! });
          await t.update();
        } else await t.step(d.x, { labels: d.labels! });
      }
      arena.toHost({ kinds: ['w'] });
      return [...arena.view(1, 'w'), ...arena.view(2, 'w')];
    };
    expect(await run(true)).toEqual(await run(false));
  });

  it('a checkpoint of a gelu / leaky-relu arena loads with its slope and trains on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nna-act-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const plan = planLayout({ layers: [4, 5, 5, 2], batch: 3, activations: ['gelu', 'leaky-relu', 'softmax'], leakyReluSlope: 0.125 });
    using arena = Arena.create(plan, cpu);
    new Trainer(arena).init(1);
    arena.save(join(dir, 'a.nnackpt'));
    using loaded = Arena.load(join(dir, 'a.nnackpt'), cpu);
    expect(loaded.plan.spec.leakyReluSlope).toBe(0.125);
    expect(loaded.plan.spec.activations).toEqual(['gelu', 'leaky-relu', 'softmax']);
    expect(Buffer.from(loaded.plan.header)).toEqual(Buffer.from(plan.header));
  });
});

describe('typed refusals, naming the field and the value', () => {
  const refuse = (f: () => unknown, cls: typeof LayoutError | typeof OptionError, code: string, field: string) => {
    let err: unknown;
    try {
      f();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(cls);
    expect((err as { code: string }).code).toBe(code);
    expect((err as { field: string }).field).toBe(field);
  };

  it('plans: a hidden-only activation on the output, softmax on a hidden layer, an unknown name, a bad slope', () => {
    for (const a of ['gelu', 'gelu-tanh', 'silu', 'leaky-relu', 'softplus'] as const) {
      refuse(() => planLayout({ layers: [3, 4, 2], batch: 1, activations: ['relu', a] }), LayoutError, 'BAD_ACTIVATIONS', 'activations[1]');
    }
    refuse(() => planLayout({ layers: [3, 4, 2], batch: 1, activations: ['softmax', 'softmax'] }), LayoutError, 'BAD_ACTIVATIONS', 'activations[0]');
    refuse(() => planLayout({ layers: [3, 4, 2], batch: 1, activations: ['swish' as never, 'softmax'] }), LayoutError, 'BAD_ACTIVATIONS', 'activations[0]');
    refuse(
      () => planLayout({ layers: [3, 4, 2], batch: 1, activations: ['leaky-relu', 'softmax'], leakyReluSlope: -0.1 }),
      LayoutError,
      'BAD_ACTIVATIONS',
      'leakyReluSlope',
    );
    refuse(
      () => planLayout({ layers: [3, 4, 2], batch: 1, activations: ['leaky-relu', 'softmax'], leakyReluSlope: Number.NaN }),
      LayoutError,
      'BAD_ACTIVATIONS',
      'leakyReluSlope',
    );
    refuse(
      () => planLayout({ layers: [3, 4, 2], batch: 1, activations: ['gelu', 'softmax'], leakyReluSlope: 0.1 }),
      LayoutError,
      'BAD_ACTIVATIONS',
      'leakyReluSlope',
    );
  });

  it('trainers: a loss the output layer does not take, label smoothing out of range or with another loss', () => {
    using soft = Arena.create(planLayout({ layers: [3, 2], batch: 1, activations: ['softmax'] }), cpu);
    using sig = Arena.create(planLayout({ layers: [3, 2], batch: 1, activations: ['sigmoid'] }), cpu);
    using id = Arena.create(planLayout({ layers: [3, 2], batch: 1, activations: ['identity'] }), cpu);
    refuse(() => new Trainer(soft, { loss: 'bce-with-logits' }), OptionError, 'BAD_LOSS', 'loss');
    refuse(() => new Trainer(soft, { loss: 'mse' }), OptionError, 'BAD_LOSS', 'loss');
    refuse(() => new Trainer(sig, { loss: 'bce-with-logits' }), OptionError, 'BAD_LOSS', 'loss');
    refuse(() => new Trainer(id, { loss: 'cross-entropy' }), OptionError, 'BAD_LOSS', 'loss');
    refuse(() => new Trainer(id, { loss: 'hinge' as never }), OptionError, 'BAD_LOSS', 'loss');
    refuse(() => new Trainer(soft, { labelSmoothing: 1.5 }), OptionError, 'BAD_OPTION', 'labelSmoothing');
    refuse(() => new Trainer(soft, { labelSmoothing: '0.1' as never }), OptionError, 'BAD_OPTION', 'labelSmoothing');
    refuse(() => new Trainer(id, { loss: 'bce-with-logits', labelSmoothing: 0.1 }), OptionError, 'BAD_OPTION', 'labelSmoothing');
    refuse(() => new Trainer(sig, { labelSmoothing: 0.1 }), OptionError, 'BAD_OPTION', 'labelSmoothing');
    expect(new Trainer(id, { loss: 'bce-with-logits' }).loss).toBe('bce-with-logits');
    expect(new Trainer(id).loss).toBe('mse'); // the default: the first loss the output layer takes
    expect(new Trainer(soft, { labelSmoothing: 0.1 }).loss).toBe('cross-entropy');
  });

  it('bce-with-logits counts a row correct when every label is', async () => {
    using arena = Arena.create(planLayout({ layers: [1, 3], batch: 2, dtype: 'float64', activations: ['identity'] }), cpu);
    const t = new Trainer(arena, { loss: 'bce-with-logits' });
    arena.view(1, 'w').set([1, -1, 1]);
    arena.view(1, 'b').set([0, 0, -5]);
    t.markHostChanged();
    // x = 1: logits 1, -1, -4 -> predictions 1, 0, 0; x = -1: -1, 1, -6 -> 0, 1, 0
    const m = await t.evaluate({ x: [1, -1], y: [1, 0, 0, 0, 1, 1] });
    expect(m.accuracy).toBe(0.5);
    const softplus = (v: number) => Math.log1p(Math.exp(v)); // bce(x, y) = softplus(x) - x y
    const want = [1, -1, -4, -1, 1, -6].map((x, i) => softplus(x) - x * [1, 0, 0, 0, 1, 1][i]!).reduce((a, b) => a + b) / 6;
    expect(m.loss).toBeCloseTo(want, 14);
  });
});
