import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, errorClassOf, FieldError, OptionError, planLayout, Trainer, type LayoutSpec } from '../src/index.js';
import { GRAD_CASES, gradientCheck, toyData, trainedParams } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;

describe('gradient check (CPU, float64): analytic == central differences', () => {
  it.each(GRAD_CASES.map((c) => [`${c.hidden.join('+')} -> ${c.output}`, c] as const))('%s', async (_n, c) => {
    const { maxRel, where } = await gradientCheck(c, cpu);
    expect(maxRel, where).toBeLessThanOrEqual(1e-6);
  });
});

function codeOf(e: unknown): string {
  expect(e).toBeInstanceOf(Error);
  return (e as { code: string }).code;
}

describe('Trainer on the CPU backend', () => {
  const spec: LayoutSpec = { layers: [6, 16, 3], batch: 10, samples: 200, optimizer: 'momentum' };

  it('learns a separable toy problem', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena, { lr: 0.05 });
    t.init(1);
    const n = 200,
      x = new Float32Array(n * 6),
      labels = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      labels[i] = i % 3;
      for (let j = 0; j < 6; j++) x[i * 6 + j] = (j % 3 === labels[i] ? 1 : 0) + 0.3 * Math.sin(i * 13 + j * 7);
    }
    const before = await t.evaluate({ x, labels });
    const r = await t.fit({ x, labels }, { epochs: 30 });
    expect(r.accuracy).toBe(1);
    expect(r.loss).toBeLessThan(before.loss / 10);
    expect(r.steps).toBe(30 * 20);
    const after = await t.evaluate({ x, labels });
    expect(after.accuracy).toBe(1);
    const out = await t.predict(x.subarray(0, 6 * 4));
    expect(out.length).toBe(4 * 3);
    for (let r0 = 0; r0 < 4; r0++) {
      const row = Array.from(out.subarray(r0 * 3, r0 * 3 + 3));
      expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
      expect(row.indexOf(Math.max(...row))).toBe(labels[r0]);
    }
  });

  it('a fit uploads the arena once and the data once, and downloads the weights once', async () => {
    for (const order of ['layer-major', 'kind-major'] as const) {
      const plan = planLayout({ ...spec, order });
      using arena = Arena.create(plan, cpu);
      const t = new Trainer(arena);
      const s0 = arena.stats;
      t.init(2);
      const d = toyData(6, 3, 200, 1, false);
      const data = { x: d.x, labels: d.labels! };
      const epochs = 4;
      await t.fit(data, { epochs });
      const s1 = arena.stats;
      const xdata = plan.region(0, 'xdata')!,
        ydata = plan.region(2, 'ydata')!;
      // Up: what init wrote (the parameters and optimizer state of a new arena: one range from
      // the first to the last, the small untouched regions between going along; nothing of the
      // data regions) and the data set (xdata, ydata adjacent: one range).
      const written = plan.regions.filter((r) => ['w', 'b', 'mw', 'mb', 'vw', 'vb'].includes(r.kind) && r.bytes > 0);
      const span = Math.max(...written.map((r) => r.offset + r.bytes)) - Math.min(...written.map((r) => r.offset));
      expect(span).toBeLessThan(xdata.offset);
      expect(s1.toDeviceTransfers - s0.toDeviceTransfers).toBe(2);
      expect(s1.toDeviceBytes - s0.toDeviceBytes).toBe(span + (ydata.offset + ydata.bytes - xdata.offset));
      // Down: the stats region once per epoch, then w and b once (one range per layer in
      // layer-major order, where each layer's b and w are adjacent; one range in kind-major).
      const paramRanges = order === 'kind-major' ? 1 : 2;
      expect(s1.toHostTransfers - s0.toHostTransfers).toBe(epochs + paramRanges);
      const statsBytes = plan.region(2, 'stats')!.bytes;
      const paramBytes = s1.toHostBytes - s0.toHostBytes - epochs * statsBytes;
      const wb = plan.bytesByKind().w + plan.bytesByKind().b;
      expect(paramBytes).toBeGreaterThanOrEqual(wb);
      expect(paramBytes).toBeLessThan(wb + 4 * plan.spec.align);
      // A second fit on the same data does not upload it again.
      const s2 = arena.stats;
      await t.fit(data, { epochs: 1 });
      expect(arena.stats.toDeviceTransfers).toBe(s2.toDeviceTransfers);
    }
  });

  it('reports progress with epoch, batch, loss, accuracy and speed', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena);
    t.init(4);
    const d = toyData(6, 3, 200, 2, false);
    const seen: Array<[number, number]> = [];
    await t.fit(
      { x: d.x, labels: d.labels! },
      {
        epochs: 2,
        reportsPerEpoch: 4,
        onProgress: (p) => {
          seen.push([p.epoch, p.batch]);
          expect(Number.isFinite(p.loss) && p.samplesPerSecond > 0 && p.accuracy >= 0 && p.accuracy <= 1).toBe(true);
        },
      },
    );
    expect(seen).toEqual([
      [1, 5],
      [1, 10],
      [1, 15],
      [1, 20],
      [2, 5],
      [2, 10],
      [2, 15],
      [2, 20],
    ]);
  });

  it('a fit with nothing watching between runs (each run queued behind the one training) trains as one with onProgress: same loss, steps and bits, fp32 and fp16', async () => {
    for (const precision of ['fp32', 'fp16'] as const) {
      const ends = [];
      for (const watched of [true, false]) {
        using arena = Arena.create(planLayout({ layers: [6, 16, 3], batch: 10, samples: 200, optimizer: 'adam' }), cpu);
        const t = new Trainer(arena, { precision, lr: 0.01 });
        t.init(4);
        const d = toyData(6, 3, 200, 2, false);
        const r = await t.fit({ x: d.x, labels: d.labels! }, { epochs: 3, reportsPerEpoch: 4, seed: 5, ...(watched ? { onProgress: () => undefined } : {}) });
        ends.push({
          loss: r.loss,
          accuracy: r.accuracy,
          steps: r.steps,
          trainerSteps: t.steps,
          w: Array.from(arena.view(1, 'w')),
          v: Array.from(arena.view(2, 'vw')),
          scale: t.lossScale,
        });
      }
      expect(ends[1], precision).toEqual(ends[0]);
      expect(ends[0]!.steps).toBe(60);
    }
  });

  it('same seed, same weights; step() and fit() agree', async () => {
    const a = await trainedParams(cpu, 'float64', 'adam');
    const b = await trainedParams(cpu, 'float64', 'adam');
    expect(b).toEqual(a);
  });

  it('bad data gives typed errors naming the field', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena);
    t.init(1);
    const x = new Float32Array(60),
      labels = new Uint8Array(10);
    const fails = async (f: () => Promise<unknown>, code: string, field: RegExp) => {
      let err: unknown;
      try {
        await f();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(FieldError);
      expect(codeOf(err)).toBe(code);
      expect((err as FieldError).name).toBe(errorClassOf(code)); // DataError for data, OptionError for options
      expect((err as FieldError).field).toMatch(field);
    };
    await fails(() => t.step(new Float32Array(61), { labels }), 'BAD_DATA_WIDTH', /x\.length/);
    await fails(() => t.step(x, { labels: new Uint8Array(9) }), 'BAD_DATA', /labels\.length/);
    await fails(() => t.step(x, { labels: Uint8Array.from({ length: 10 }, (_, i) => (i === 4 ? 3 : 0)) }), 'BAD_LABEL', /labels\[4\]/);
    await fails(() => t.step(x, { labels: [0, 1, 2, 0, 1, 2, 0, 1, 2, -1] }), 'BAD_LABEL', /labels\[9\]/);
    await fails(
      () =>
        t.step(
          Float32Array.from(x, (_, i) => (i === 17 ? NaN : 0)),
          { labels },
        ),
      'BAD_DATA',
      /x\[17\]/,
    );
    await fails(() => t.step(x, { y: new Float32Array(29) }), 'BAD_DATA_WIDTH', /y\.length/);
    await fails(() => t.fit({ x, labels, inputs: 784 }, { epochs: 1 }), 'BAD_DATA_WIDTH', /inputs/);
    await fails(() => t.fit({ x: new Float32Array(6 * 201), labels: new Uint8Array(201) }, { epochs: 1 }), 'DATA_TOO_LARGE', /x\.length/);
    await fails(() => t.step(new Float32Array(66), { labels: new Uint8Array(11) }), 'BAD_DATA', /x\.length/);
    await fails(() => t.fit({ x, labels }, { epochs: 0 }), 'BAD_OPTION', /epochs/);
    expect(() => new Trainer(arena, { lr: -1 })).toThrow(OptionError);
    expect(() => new Trainer(arena, { loss: 'mse' })).toThrow(/softmax/);
  });

  it('a diverging run stops with an error naming the step', async () => {
    using arena = Arena.create(planLayout({ layers: [4, 8, 2], batch: 4, samples: 400, activations: ['relu', 'identity'] }), cpu);
    const t = new Trainer(arena, { lr: 1e6, loss: 'mse' });
    t.init(1);
    const d = toyData(4, 2, 400, 3, true);
    let err: unknown;
    try {
      await t.fit({ x: d.x, y: d.y! }, { epochs: 3 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ArenaError);
    expect(codeOf(err)).toBe('DIVERGED');
    expect((err as Error).message).toMatch(/at step \d+/);
  });

  it('dispose while a run is in flight waits for it; later runs fail cleanly', async () => {
    const arena = Arena.create(planLayout({ layers: [64, 256, 10], batch: 50, samples: 2000 }), cpu);
    const t = new Trainer(arena);
    t.init(1);
    const d = toyData(64, 10, 2000, 4, false);
    const running = t.fit({ x: d.x, labels: d.labels! }, { epochs: 3 });
    await new Promise((r) => setTimeout(r, 1));
    arena.dispose();
    let err: unknown;
    try {
      await running;
    } catch (e) {
      err = e;
    }
    expect(codeOf(err)).toBe('DISPOSED');
    expect(arena.stats.hostFrees).toBe(1);
  });
});
