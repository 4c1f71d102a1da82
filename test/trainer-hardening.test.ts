// trainer-hardening.test.ts: issue 14 items 9-13 (Trainer side) and issue 18 part 5 (resident
// evaluation and prediction), each against the behaviour that was wrong before.
import { describe, expect, it } from 'vitest';
import { Arena, NnArenaError, planLayout, Trainer, type LayoutSpec, OptionError } from '../src/index.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;
const spec: LayoutSpec = { layers: [6, 16, 3], batch: 10, samples: 200, optimizer: 'momentum' };

async function failure(f: () => unknown): Promise<NnArenaError> {
  let err: unknown;
  try {
    await f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(NnArenaError);
  return err as NnArenaError;
}

function setup(s: LayoutSpec = spec, seed = 1) {
  const arena = Arena.create(planLayout(s), cpu);
  const t = new Trainer(arena, { lr: 0.05 });
  t.init(seed);
  return { arena, t };
}

const toy = (n: number, seed: number) => {
  const d = toyData(6, 3, n, seed, false);
  return { x: Float32Array.from(d.x), labels: d.labels! };
};

describe('item 9: every bad argument is a typed error with code and field', () => {
  it('fit, predict, init, the constructor', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const data = toy(20, 1);
    for (const seed of [NaN, Infinity, 'x', 1.5, 2n ** 60n]) {
      const e = await failure(() => t.fit(data, { epochs: 1, seed: seed as number }));
      expect([e.code, (e as OptionError).field]).toEqual(['BAD_SEED', 'seed']);
    }
    let e = await failure(() => (t.fit as (d: unknown) => Promise<unknown>)(data));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_OPTION', 'options']);
    e = await failure(() => t.fit(data, { epochs: 1n as unknown as number }));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_OPTION', 'epochs']);
    e = await failure(() => t.fit(data, { epochs: 1, reportsPerEpoch: 2n as unknown as number }));
    expect((e as OptionError).field).toBe('reportsPerEpoch');
    e = await failure(() => t.predict(undefined as unknown as number[]));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_DATA', 'predict.x']);
    e = await failure(() => t.step(new Float32Array(6), null as unknown as { y: number[] }));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_DATA', 'target']);
    e = await failure(() => t.init(NaN));
    expect(e.code).toBe('BAD_SEED');
    e = await failure(() => new Trainer(arena, null as unknown as object));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_OPTION', 'options']);
    e = await failure(() => new Trainer(arena, { lr: 1n as unknown as number }));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_OPTION', 'lr']);
    e = await failure(() => new Trainer({ plan: arena.plan } as unknown as Arena));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_OPTION', 'arena']);
    e = await failure(() => new Trainer(new Proxy(arena, {})));
    expect(e.code).toBe('BAD_OPTION');
    e = await failure(() => t.fit({ x: [1n, 2n, 3n, 4n, 5n, 6n] as unknown as number[], labels: [0] }, { epochs: 1 }));
    expect(e.code).toBe('BAD_DATA');
    e = await failure(() => t.fit({ x: new BigInt64Array(6) as unknown as number[], labels: [0] }, { epochs: 1 }));
    expect(e.code).toBe('BAD_DATA');
  });

  it('data values that overflow the dtype are refused, not trained on as Infinity', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const x = new Float64Array(6).fill(1e39);
    const e = await failure(() => t.step(x, { labels: [0] }));
    expect([e.code, (e as OptionError).field]).toEqual(['BAD_DATA', 'step.x[0]']);
  });
});

describe('item 10: hyper-parameters are checked as the dtype holds them', () => {
  it('refuses a learning rate that is 0 in float32, a momentum that rounds to 1', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    for (const [o, field] of [
      [{ lr: 1e-50 }, 'lr'],
      [{ lr: 1e39 }, 'lr'],
      [{ momentum: 1 - 1e-9 }, 'momentum'],
      [{ beta2: 0.99999999999 }, 'beta2'],
      [{ eps: 1e-46 }, 'eps'],
      [{ beta1: -0.1 }, 'beta1'],
    ] as const) {
      const e = await failure(() => new Trainer(arena, o));
      expect([e.code, (e as OptionError).field]).toEqual(['BAD_OPTION', field]);
    }
    // float64 holds 1e-50.
    using a64 = Arena.create(planLayout({ ...spec, dtype: 'float64' }), cpu);
    expect(() => new Trainer(a64, { lr: 1e-50 })).not.toThrow();
  });
});

describe('item 11: runs on one arena are queued in call order', () => {
  it('two evaluate() at once give what each gives alone', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const a = toy(200, 1),
      b = toy(50, 2);
    await t.fit(a, { epochs: 20 });
    const aloneA = await t.evaluate(a),
      aloneB = await t.evaluate(b);
    const [ca, cb] = await Promise.all([t.evaluate(a), t.evaluate(b)]);
    expect(ca).toEqual(aloneA);
    expect(cb).toEqual(aloneB);
    // Two Trainers on one arena share the queue.
    const u = new Trainer(arena, { lr: 0.05 });
    const [da, db] = await Promise.all([t.evaluate(a), u.evaluate(b)]);
    expect([da, db]).toEqual([aloneA, aloneB]);
  });

  it('8 concurrent fits end where the same fits in sequence do', async () => {
    const run = async (concurrent: boolean) => {
      const { arena, t } = setup(spec, 3);
      using _a = arena;
      const sets = Array.from({ length: 8 }, (_, i) => toy(200 - i * 10, 10 + i));
      const results = [];
      if (concurrent) results.push(...(await Promise.all(sets.map((d, i) => t.fit(d, { epochs: 2, seed: i })))));
      else for (const [i, d] of sets.entries()) results.push(await t.fit(d, { epochs: 2, seed: i }));
      return { losses: results.map((r) => r.loss), w: Array.from(arena.view(1, 'w')), steps: t.steps };
    };
    expect(await run(true)).toEqual(await run(false));
  });

  it('init, save and syncToHost while a run is queued are refused with BUSY', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const running = t.fit(toy(200, 1), { epochs: 2 });
    for (const f of [() => t.init(1), () => t.syncToHost(), () => t.markHostChanged(), () => t.save('/tmp/never.nna')]) {
      expect((await failure(f)).code).toBe('BUSY');
    }
    await running;
    expect(() => t.syncToHost()).not.toThrow();
  });
});

describe('item 12: a data set changed in place never gives a stale answer', () => {
  it('evaluate and fit see in-place changes of x and labels', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const d = toy(100, 1);
    await t.fit(d, { epochs: 30 });
    const before = await t.evaluate(d);
    // Change the same objects in place: every label shifted, x unchanged.
    for (let i = 0; i < d.labels.length; i++) d.labels[i] = (d.labels[i]! + 1) % 3;
    const after = await t.evaluate(d);
    const fresh = await t.evaluate({ x: Float32Array.from(d.x), labels: Uint8Array.from(d.labels) });
    expect(after).toEqual(fresh);
    expect(after.accuracy).not.toBe(before.accuracy);
    // Change x: the resident copy goes up again.
    const s0 = arena.stats.toDeviceTransfers;
    d.x[0] = d.x[0]! + 5;
    await t.evaluate(d);
    expect(arena.stats.toDeviceTransfers).toBe(s0 + 1);
    // Unchanged: nothing goes up.
    await t.evaluate(d);
    expect(arena.stats.toDeviceTransfers).toBe(s0 + 1);
  });

  it('fit on a data set changed in place trains on the new contents', async () => {
    const copy = (d: { x: Float32Array; labels: Uint8Array }) => ({ x: Float32Array.from(d.x), labels: Uint8Array.from(d.labels) });
    const d = toy(100, 3);
    const before = copy(d);
    const { arena: a1, t: t1 } = setup();
    using _a1 = a1;
    await t1.fit(d, { epochs: 1 });
    for (let i = 0; i < d.labels.length; i++) d.labels[i] = (d.labels[i]! + 2) % 3;
    d.x[5] = -d.x[5]!;
    const inPlace = await t1.fit(d, { epochs: 3 });
    const { arena: a2, t: t2 } = setup();
    using _a2 = a2;
    await t2.fit(before, { epochs: 1 });
    const fresh = await t2.fit(copy(d), { epochs: 3 });
    expect(inPlace.loss).toBe(fresh.loss);
    expect(Array.from(a1.view(1, 'w'))).toEqual(Array.from(a2.view(1, 'w')));
  });

  it('an edit of the host copy of xdata that was not uploaded is detected', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const d = toy(100, 1);
    await t.evaluate(d);
    const s0 = arena.stats.toDeviceTransfers;
    arena.view(0, 'xdata')[3] = 42;
    await t.evaluate(d);
    expect(arena.stats.toDeviceTransfers).toBe(s0 + 1);
    expect(arena.view(0, 'xdata')[3]).toBe(d.x[3]);
  });
});

describe('item 13: after init() host and device hold the same weights', () => {
  it('toHost() after init() keeps the initialised weights', () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena);
    t.init(5);
    const w = Array.from(arena.view(1, 'w'));
    expect(w.some((v) => v !== 0)).toBe(true);
    arena.toHost();
    expect(Array.from(arena.view(1, 'w'))).toEqual(w);
  });

  it('markHostChanged() uploads host edits at once', () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena);
    t.init(5);
    arena.view(1, 'b')[0] = 7;
    t.markHostChanged();
    arena.view(1, 'b')[0] = 0;
    arena.toHost({ kinds: ['b'] });
    expect(arena.view(1, 'b')[0]).toBe(7);
  });
});

describe('issue 18 part 5: evaluation and prediction on resident data', () => {
  it('evaluate uploads a set that fits once and runs it in one run; same metrics as batch by batch', async () => {
    const { arena, t } = setup({ ...spec, samples: 60 });
    using _a = arena;
    const small = toy(55, 4);
    const s0 = arena.stats;
    const m = await t.evaluate(small);
    const s1 = arena.stats;
    expect(s1.toDeviceTransfers - s0.toDeviceTransfers).toBe(2); // x rows and y rows
    expect(s1.toHostTransfers - s0.toHostTransfers).toBe(1); // stats once
    // A larger set goes batch by batch: same metrics over the first 55 rows repeated.
    const big = { x: new Float32Array(6 * 110), labels: new Uint8Array(110) };
    big.x.set(small.x);
    big.x.set(small.x, 6 * 55);
    big.labels.set(small.labels);
    big.labels.set(small.labels, 55);
    const mb = await t.evaluate(big);
    expect(mb.accuracy).toBeCloseTo(m.accuracy, 10);
    expect(mb.loss).toBeCloseTo(m.loss, 5);
  });

  it('predict goes batch by batch through z[0] and leaves the resident data set where it is', async () => {
    const { arena, t } = setup({ ...spec, samples: 60 });
    using _a = arena;
    const train = toy(60, 1);
    await t.fit(train, { epochs: 5 });
    const d = toy(45, 2);
    const s0 = arena.stats;
    const out = await t.predict(d.x);
    const s1 = arena.stats;
    expect(s1.toDeviceTransfers - s0.toDeviceTransfers).toBe(Math.ceil(45 / 10)); // each batch's x rows
    expect(s1.toDeviceBytes - s0.toDeviceBytes).toBe(45 * 6 * 4);
    expect(s1.toHostBytes - s0.toHostBytes).toBe(45 * 3 * 4); // each batch's output rows
    // The same rows in other batches give the same outputs; into an array of the caller's.
    const big = new Float32Array(6 * 90);
    big.set(d.x);
    big.set(d.x, 6 * 45);
    const mine = new Float32Array(90 * 3 + 7);
    const byBatch = await t.predict(big, { out: mine });
    expect(byBatch).toBe(mine);
    expect(Array.from(byBatch.subarray(0, 45 * 3))).toEqual(Array.from(out));
    expect(Array.from(byBatch.subarray(45 * 3, 90 * 3))).toEqual(Array.from(out));
    // The training set is still resident: fitting it again uploads nothing.
    const s2 = arena.stats.toDeviceTransfers;
    await t.fit(train, { epochs: 1 });
    expect(arena.stats.toDeviceTransfers).toBe(s2);
    await expect(t.predict(d.x, { out: new Float32Array(10) })).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'out.length' });
    await expect(t.predict(d.x, { out: new Float64Array(200) as never })).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'out' });
  });
});

describe('issue 27, found by test/property.test.ts: a run refused as DISPOSED changes nothing', () => {
  it('update() on a disposed arena does not consume the gradients: every later primitive says DISPOSED', async () => {
    const { arena, t } = setup({ layers: [2, 3], batch: 2 });
    await t.forward([1, 2, 3, 4]);
    await t.backward({ labels: [0, 1] });
    arena.dispose();
    // Before the fix: DISPOSED, then NO_FORWARD and NO_GRADIENTS (the refused update() had
    // cleared the forward rows and the gradients before its run was refused).
    for (const f of [() => t.update(), () => t.backward({ labels: [0, 1] }), () => t.update(), () => t.step([1, 2], { labels: [0] })]) {
      expect((await failure(f)).code).toBe('DISPOSED');
    }
  });
});
