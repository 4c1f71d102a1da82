// K models in one arena (planLayout `models`): the layout, the header field and its validation,
// and training that is bit-identical to K one-model arenas on the CPU backend.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, KINDS, LayoutError, OptionError, planLayout, Trainer, type LayoutSpec } from '../src/index.js';
import { runArena, testAddon } from '../src/internal.js';
import * as H from '../src/layout/header.js';
import { decodeSpec } from '../src/layout/decode.js';
import { native, OPS } from '../src/native/addon.js';
import { compareModels } from './support/models-checks.js';

const cpu = { backend: 'cpu' } as const;

describe('layout of K models', () => {
  it('per-model regions hold K aligned copies; z[0], y and the data set are held once', () => {
    const spec: LayoutSpec = { layers: [5, 7, 3], batch: 4, samples: 9, optimizer: 'adam', align: 64 };
    const one = planLayout(spec),
      three = planLayout({ ...spec, models: 3 });
    expect(three.spec.models).toBe(3);
    const sharedByAll = ['0xdata', '0z', '2y', '2ydata']; // nna_kind_per_model: z[0], y and the data set
    for (const r of three.regions) {
      const r1 = one.region(r.layer, r.kind)!;
      expect(r.length).toBe(r1.length); // the header's count: one model's elements
      if (!sharedByAll.includes(`${r.layer}${r.kind}`)) {
        expect(r.models).toBe(3);
        expect(r.stride).toBe(Math.ceil((r.length * 4) / 64) * 64);
        expect(r.bytes).toBe(2 * r.stride + r.length * 4);
      } else {
        expect([r.models, r.stride, r.bytes]).toEqual([1, 0, r1.bytes]);
      }
    }
    const shared = three.regions
      .filter((r) => r.models === 1)
      .map((r) => `${r.layer}${r.kind}`)
      .sort();
    expect(shared).toEqual(sharedByAll);
    // One model: the plan and header of today (models written as 0).
    expect(one.regions.every((r) => r.models === 1 && r.stride === 0)).toBe(true);
    expect(new DataView(one.header.buffer).getBigUint64(H.HEADER_FIELDS.models, true)).toBe(0n);
    expect(new DataView(three.header.buffer).getBigUint64(H.HEADER_FIELDS.models, true)).toBe(3n);
    expect(planLayout({ ...spec, models: 1 }).header).toEqual(one.header);
  });

  it('bytesByKind counts K copies (padding between copies is padding)', () => {
    const spec: LayoutSpec = { layers: [5, 7, 3], batch: 4, models: 4 };
    const p = planLayout(spec),
      p1 = planLayout({ ...spec, models: 1 });
    const by = p.bytesByKind(),
      by1 = p1.bytesByKind();
    expect(by.w).toBe(4 * by1.w);
    expect(by.y).toBe(by1.y);
    const sum = Object.values(by).reduce((a, b) => a + b, 0);
    expect(sum).toBe(p.totalBytes);
  });

  it('header round trip: the native decoder and validator agree with the planner', () => {
    const spec = fc.record({
      layers: fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 2, maxLength: 5 }),
      batch: fc.integer({ min: 1, max: 64 }),
      dtype: fc.constantFrom('float32' as const, 'float64' as const),
      optimizer: fc.constantFrom('sgd' as const, 'momentum' as const, 'adam' as const, 'adamw' as const),
      order: fc.constantFrom('layer-major' as const, 'kind-major' as const),
      align: fc.constantFrom(8, 64, 256),
      samples: fc.integer({ min: 0, max: 50 }),
      models: fc.integer({ min: 1, max: 9 }),
    });
    fc.assert(
      fc.property(spec, (s) => {
        const plan = planLayout(s);
        expect(native().validateHeader(plan.header, plan.totalBytes)).toBe('');
        const h = testAddon().decodeHeader(plan.header) as unknown as { models: bigint; layers: Array<{ regions: Array<[bigint, bigint]> }> };
        expect(h.models).toBe(s.models === 1 ? 0n : BigInt(s.models));
        h.layers.forEach((L, l) =>
          KINDS.forEach((k, i) => {
            const r = plan.region(l, k);
            expect(L.regions[i]).toEqual(r ? [BigInt(r.offset), BigInt(r.length)] : [0n, 0n]);
          }),
        );
        const back = decodeSpec(plan.header);
        expect(typeof back).toBe('object');
        expect(planLayout(back as LayoutSpec).header).toEqual(plan.header);
      }),
      { numRuns: 200 },
    );
  });

  it('the validator refuses a models field the regions do not make room for', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2, optimizer: 'momentum', models: 2 });
    const withModels = (k: bigint) => {
      const b = plan.header.slice();
      new DataView(b.buffer).setBigUint64(H.HEADER_FIELDS.models, k, true);
      return native().validateHeader(b, plan.totalBytes);
    };
    expect(withModels(2n)).toBe('');
    expect(withModels(3n)).toMatch(/overlaps|beyond/);
    expect(withModels(65536n)).toMatch(/models 65536 outside/);
    expect(withModels(2n ** 63n)).toMatch(/models .* outside/);
    // 1 (or 0) model in a 2-model layout is sound: only model 0's copies are bound.
    expect(withModels(0n)).toBe('');
    // A one-model layout claiming K models: the copies overlap the next region or run past the end.
    const one = planLayout({ layers: [4, 3, 2], batch: 2 });
    const b = one.header.slice();
    new DataView(b.buffer).setBigUint64(H.HEADER_FIELDS.models, 2n, true);
    expect(native().validateHeader(b, one.totalBytes)).toMatch(/overlaps|beyond/);
    // Creating an arena from such bytes is refused before anything is allocated.
    expect(() => new (native().ArenaHandle)(b, { cuda: false, pinned: false, memory: 0, scheduled: false })).toThrow(/overlaps|beyond/);
  });

  it('bad models values are typed LayoutErrors naming the field', () => {
    const base: LayoutSpec = { layers: [4, 3, 2], batch: 2 };
    for (const models of [0, -1, 1.5, NaN, '2', 65536, 2 ** 53]) {
      let err: unknown;
      try {
        planLayout({ ...base, models: models as number });
      } catch (e) {
        err = e;
      }
      expect(err, String(models)).toBeInstanceOf(LayoutError);
      expect(err).toMatchObject({ code: 'BAD_MODELS', field: 'models' });
    }
    // Within the models limit, but the arena exceeds exact sizes: TOO_LARGE.
    expect(() => planLayout({ layers: [1_000_000, 1_000_000], batch: 1, models: 65535 })).toThrow(expect.objectContaining({ code: 'TOO_LARGE' }));
  });

  it('device budgets take one model per arena: NOT_SUPPORTED, typed', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2, models: 2 });
    expect(() => Arena.create(plan, { memory: 'managed', deviceBudget: 1 << 20 })).toThrow(expect.objectContaining({ code: 'NOT_SUPPORTED' }));
    expect(() => native().minDeviceBudget(plan.header, 'managed')).toThrow(/one model per arena/);
  });
});

describe('K models on the CPU backend: bit-identical to K one-model arenas', () => {
  const cases: Array<[string, LayoutSpec, number[]]> = [
    ['sgd', { layers: [6, 12, 3], batch: 8, samples: 40 }, [0.05, 0.2, 0.01]],
    ['momentum', { layers: [6, 12, 9, 3], batch: 8, samples: 40, optimizer: 'momentum', order: 'kind-major' }, [0.02, 0.05, 0.1]],
    [
      'adam (float64, mse)',
      { layers: [5, 10, 4], batch: 7, samples: 40, optimizer: 'adam', dtype: 'float64', activations: ['tanh', 'identity'] },
      [0.001, 0.01, 0.003],
    ],
  ];
  it.each(cases)('%s: fit (resident, shuffled), step, evaluate', async (_name, spec, lrs) => {
    const r = await compareModels({ spec, lrs, seeds: [3, 30, 300], epochs: 3, count: 37 }, cpu);
    expect(r.path).toBe('cpu');
    expect(r.regionsCompared).toBeGreaterThan(3 * 8);
    expect(r.mismatches).toEqual([]);
    for (const [a, b] of [...r.fits, ...r.steps, ...r.evals]) {
      expect(Number.isFinite(b)).toBe(true);
      expect(a).toBe(b);
    }
    // Different learning rates really give different models.
    expect(new Set(r.fits.map(([a]) => a)).size).toBe(3);
  });

  it('init(seed) gives model m the weights of seed + m; an lr array of the wrong length is refused', () => {
    const spec: LayoutSpec = { layers: [4, 5, 2], batch: 2 };
    using multi = Arena.create(planLayout({ ...spec, models: 3 }), cpu);
    new Trainer(multi).init(10);
    for (let m = 0; m < 3; m++) {
      using one = Arena.create(planLayout(spec), cpu);
      new Trainer(one).init(10 + m);
      expect(Array.from(multi.view(1, 'w', m))).toEqual(Array.from(one.view(1, 'w')));
    }
    expect(multi.view(1, 'w', 0)).not.toEqual(multi.view(1, 'w', 1));
    expect(() => new Trainer(multi, { lr: [0.1, 0.2] })).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'lr.length' }));
    expect(() => new Trainer(multi, { lr: [0.1, 0, 0.2] })).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'lr[1]' }));
    expect(() => new Trainer(multi).init([1, 2])).toThrow(expect.objectContaining({ code: 'BAD_SEED', field: 'seed.length' }));
    expect(() => new Trainer(multi).init([1, 2.5, 3])).toThrow(expect.objectContaining({ code: 'BAD_SEED', field: 'seed[1]' }));
    expect(() => new Trainer(multi).init(Number.MAX_SAFE_INTEGER)).toThrow(expect.objectContaining({ code: 'BAD_SEED' }));
    expect(() => multi.view(1, 'w', 3)).toThrow(OptionError);
    expect(multi.view(0, 'z', 2).length).toBe(2 * 4); // shared: the one copy
  });

  it('a native run refuses an lrs array whose length is not the arena models', async () => {
    using arena = Arena.create(planLayout({ layers: [3, 2], batch: 2, activations: ['softmax'], models: 2 }), cpu);
    await expect(runArena(arena, { op: OPS.train, rows: 1, lrs: [0.1] } as never)).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
    await expect(runArena(arena, { op: OPS.train, rows: 1, lrs: [0.1, NaN] } as never)).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
    await expect(runArena(arena, { op: OPS.train, rows: 1, lrs: [0.1, '1'] } as never)).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
    await expect(runArena(arena, { op: OPS.train, rows: 1, lrs: [0.1, 0.2] } as never)).resolves.toBe('cpu');
  });

  it('a diverging model stops alone; the others train on (fit reports per model)', async () => {
    const spec: LayoutSpec = { layers: [4, 8, 3], batch: 5, samples: 30, models: 2 };
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena, { lr: [0.05, 1e30] });
    t.init(1);
    const x = Float32Array.from({ length: 30 * 4 }, (_, i) => Math.sin(i) * 100);
    const labels = Uint8Array.from({ length: 30 }, (_, i) => i % 3);
    const r = await t.fit({ x, labels }, { epochs: 2 });
    expect(r.diverged).toEqual([false, true]);
    expect(Number.isFinite(r.losses![0]!)).toBe(true);
    expect(r.accuracies!.length).toBe(2);
    expect(r.loss).toBeNaN(); // the mean over models
  });

  it('a K-model arena saves and loads (the models field survives the checkpoint)', async () => {
    const spec: LayoutSpec = { layers: [4, 6, 3], batch: 4, samples: 12, models: 3, optimizer: 'adam' };
    const dir = mkdtempSync(join(tmpdir(), 'nna-models-'));
    const path = `${dir}/m.nna`;
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena, { lr: [0.01, 0.02, 0.03] });
    t.init(4);
    await t.step(new Float32Array(16).fill(0.5), { labels: [0, 1, 2, 0] });
    t.save(path);
    const back = Trainer.load(path, cpu, { lr: [0.01, 0.02, 0.03] });
    try {
      expect(back.models).toBe(3);
      expect(back.arena.plan.spec.models).toBe(3);
      for (let m = 0; m < 3; m++) expect(Array.from(back.arena.view(1, 'mw', m))).toEqual(Array.from(arena.view(1, 'mw', m)));
    } finally {
      back.arena.dispose();
    }
  });
});

describe('errors of K-model arenas are typed', () => {
  it('view of a model outside the plan', () => {
    using arena = Arena.create(planLayout({ layers: [3, 2], batch: 1 }), cpu);
    for (const m of [-1, 1, 0.5]) expect(() => arena.view(1, 'w', m)).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'model' }));
    expect(arena.view(1, 'w', 0).length).toBe(6);
    expect(ArenaError).toBeDefined();
  });
});
