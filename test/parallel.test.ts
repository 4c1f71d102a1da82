// Data parallelism on a machine without a GPU: the shard arithmetic of a replica's run (CPU
// backend: the gradients of the shards add up to the one-arena gradient of the global batch),
// K models, compact plans and the primitives on a group, and the pass-through and typed errors
// without NCCL. The environment a rank reads and the TCP rendezvous: test/rendezvous.test.ts.
// The GPU side is test/gpu/nccl.gpu.test.ts.
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, DataParallel, ncclInfo, planLayout, Trainer, type LayoutSpec } from '../src/index.js';
import { runArena } from '../src/internal.js';
import { OPS, LOSSES } from '../src/native/addon.js';
import { codeOf } from './support/errors.js';

describe('shards of a global batch (CPU backend)', () => {
  const spec = (batch: number, samples: number): LayoutSpec => ({ layers: [6, 5, 3], batch, samples, activations: ['tanh', 'softmax'], dtype: 'float64' });
  const X = Float64Array.from({ length: 12 * 6 }, (_, i) => Math.sin(i * 0.7));
  const Y = Float64Array.from({ length: 12 * 3 }, (_, i) => (i % 3 === Math.floor(i / 3) % 3 ? 1 : 0));

  function arena(batch: number, samples: number): Arena {
    const a = Arena.create(planLayout(spec(batch, samples)), { backend: 'cpu' });
    for (let l = 1; l < 3; l++) {
      const w = a.view(l, 'w');
      for (let i = 0; i < w.length; i++) w[i] = Math.cos(i * 1.3 + l);
      a.view(l, 'b').fill(0.01 * l);
    }
    a.view(0, 'xdata').set(X.subarray(0, samples * 6));
    a.view(2, 'ydata').set(Y.subarray(0, samples * 3));
    a.toDevice();
    return a;
  }
  const grads = (a: Arena) => {
    a.toHost();
    return [...a.view(1, 'dw'), ...a.view(1, 'db'), ...a.view(2, 'dw'), ...a.view(2, 'db')];
  };
  const base = { op: OPS.grad, loss: LOSSES['cross-entropy'], resident: true, permA: 7, permC: 3 };

  it.each([
    [12, 0],
    [12, 1],
    [10, 1],
  ])('samples %i, step %i: the shards add up to the whole', async (samples, firstBatch) => {
    const whole = arena(8, samples);
    const shards = [arena(4, samples), arena(4, samples)];
    try {
      await runArena(whole, { ...base, samples, firstBatch });
      for (const [r, a] of shards.entries()) await runArena(a, { ...base, samples, firstBatch, globalBatch: 8, shardOffset: 4 * r });
      const g = grads(whole);
      const [g0, g1] = shards.map(grads);
      for (let i = 0; i < g.length; i++) expect(g0![i]! + g1![i]!).toBeCloseTo(g[i]!, 12);
      expect(g.some((v) => Math.abs(v) > 1e-3)).toBe(true);
      if (samples === 10 && firstBatch === 1) expect(g1!.every((v) => v === 0)).toBe(true); // rows 8, 9: shard 1 is empty
      // Rows accumulated: the whole step's rows split between the shards.
      const rows = (a: Arena) => {
        a.toHost({ layers: [2], kinds: ['stats'] });
        return a.view(2, 'stats')[2]!;
      };
      expect(rows(shards[0]!) + rows(shards[1]!)).toBe(rows(whole));
    } finally {
      whole.dispose();
      for (const a of shards) a.dispose();
    }
  });

  it('a run on z[0]/y divides by lossRows; a replica with no rows has zero gradients', async () => {
    const whole = arena(8, 12),
      half = arena(4, 12),
      none = arena(4, 12);
    try {
      whole.view(0, 'z').set(X.subarray(0, 8 * 6));
      whole.view(2, 'y').set(Y.subarray(0, 8 * 3));
      whole.toDevice();
      half.view(0, 'z').set(X.subarray(0, 4 * 6));
      half.view(2, 'y').set(Y.subarray(0, 4 * 3));
      half.toDevice();
      await runArena(whole, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 4 });
      await runArena(half, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 4, lossRows: 8 });
      await runArena(none, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 0, lossRows: 8 });
      const g = grads(whole),
        h = grads(half);
      for (let i = 0; i < g.length; i++) expect(h[i]!).toBeCloseTo(g[i]! / 2, 12);
      expect(grads(none).every((v) => v === 0)).toBe(true);
      await expect(runArena(none, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 0 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { op: OPS.grad, loss: LOSSES['cross-entropy'], rows: 4, lossRows: 2 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, globalBatch: 8, shardOffset: 5 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, globalBatch: 2 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, globalBatch: 8, firstBatch: 2 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(none, { ...base, samples: 12, reduce: true })).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    } finally {
      for (const a of [whole, half, none]) a.dispose();
    }
  });
});

describe('data parallelism and K models', () => {
  it('a plan of K models makes no group (NOT_SUPPORTED naming models); reduce on one is refused natively, naming models', async () => {
    const plan = planLayout({ layers: [4, 6, 3], batch: 4, samples: 8, models: 2 });
    const err = (() => {
      try {
        DataParallel.create(plan, { devices: [0], backend: 'cpu' });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ArenaError);
    expect(err).toMatchObject({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/models/) });
    await expect(DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu' })).rejects.toMatchObject({
      code: 'NOT_SUPPORTED',
      message: expect.stringMatching(/models/),
    });
    const a = Arena.create(plan, { backend: 'cpu' });
    try {
      await expect(runArena(a, { op: OPS.grad, loss: LOSSES['cross-entropy'], resident: true, samples: 8, reduce: true })).rejects.toMatchObject({
        code: 'NOT_SUPPORTED',
        message: expect.stringMatching(/models/),
      });
    } finally {
      a.dispose();
    }
  });

  it("shard runs of a K-model arena: each model's shards add up to its whole step", async () => {
    const spec = (batch: number): LayoutSpec => ({ layers: [6, 5, 3], batch, samples: 10, activations: ['tanh', 'softmax'], dtype: 'float64', models: 2 });
    const mk = (batch: number): Arena => {
      const a = Arena.create(planLayout(spec(batch)), { backend: 'cpu' });
      for (let m = 0; m < 2; m++)
        for (let l = 1; l < 3; l++) {
          const w = a.view(l, 'w', m);
          for (let i = 0; i < w.length; i++) w[i] = Math.cos(i * 1.3 + l + 5 * m);
        }
      a.view(0, 'xdata').set(Float64Array.from({ length: 60 }, (_, i) => Math.sin(i * 0.7)));
      a.view(2, 'ydata').set(Float64Array.from({ length: 30 }, (_, i) => (i % 3 === Math.floor(i / 3) % 3 ? 1 : 0)));
      a.toDevice();
      return a;
    };
    const grads = (a: Arena, m: number) => {
      a.toHost();
      return [...a.view(1, 'dw', m), ...a.view(2, 'db', m)];
    };
    const base = { op: OPS.grad, loss: LOSSES['cross-entropy'], resident: true, samples: 10, permA: 7, permC: 3, firstBatch: 1 };
    const whole = mk(8),
      shards = [mk(4), mk(4)];
    try {
      await runArena(whole, base);
      for (const [r, a] of shards.entries()) await runArena(a, { ...base, globalBatch: 8, shardOffset: 4 * r });
      for (let m = 0; m < 2; m++) {
        const g = grads(whole, m),
          g0 = grads(shards[0]!, m),
          g1 = grads(shards[1]!, m);
        for (let i = 0; i < g.length; i++) expect(g0[i]! + g1[i]!).toBeCloseTo(g[i]!, 12);
        expect(g.some((v) => Math.abs(v) > 1e-3)).toBe(true);
        expect(g1.every((v) => v === 0)).toBe(true); // rows 8, 9 of 10: shard 1 is empty, for every model
      }
      expect(grads(whole, 0)).not.toEqual(grads(whole, 1));
    } finally {
      whole.dispose();
      for (const a of shards) a.dispose();
    }
  });
});

describe('data parallelism, compact plans and the trainer primitives', () => {
  const spec: LayoutSpec = { layers: [4, 6, 3], batch: 4, samples: 8, activations: ['relu', 'softmax'] };

  it.each(['sgd', 'adam'] as const)(
    'a compact %s plan makes no group (NOT_SUPPORTED naming compact); reduce on one is refused natively, naming compact',
    async (optimizer) => {
      const plan = planLayout({ ...spec, optimizer, compact: true });
      const err = (() => {
        try {
          DataParallel.create(plan, { devices: [0], backend: 'cpu' });
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err).toBeInstanceOf(ArenaError);
      expect(err).toMatchObject({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/compact/) });
      await expect(DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu' })).rejects.toMatchObject({
        code: 'NOT_SUPPORTED',
        message: expect.stringMatching(/compact/),
      });
      // The same plan without compact makes a group.
      DataParallel.create(planLayout({ ...spec, optimizer }), { devices: [0], backend: 'cpu' }).dispose();
      const a = Arena.create(plan, { backend: 'cpu' });
      try {
        // checkRun (both backends) names compact before the CPU backend's own refusal of reduce.
        await expect(runArena(a, { op: OPS.train, loss: LOSSES['cross-entropy'], resident: true, samples: 8, reduce: true })).rejects.toMatchObject({
          code: 'NOT_SUPPORTED',
          message: expect.stringMatching(/compact/),
        });
      } finally {
        a.dispose();
      }
    },
  );

  it('forward / backward / update on a group are refused (NOT_SUPPORTED naming the group); step() on it still trains', async () => {
    const group = DataParallel.create(planLayout(spec), { devices: [0], backend: 'cpu' });
    try {
      const t = new Trainer(group, { lr: 0.1 });
      t.init(1);
      const x = Float32Array.from({ length: 16 }, (_, i) => Math.cos(i));
      for (const call of [() => t.forward(x), () => t.backward({ labels: [0, 1, 2, 0] }), () => t.update()]) {
        const e = await (async () => {
          try {
            await call();
          } catch (err) {
            return err;
          }
          return undefined;
        })();
        expect(e).toBeInstanceOf(ArenaError);
        expect(e).toMatchObject({ code: 'NOT_SUPPORTED', message: expect.stringMatching(/data-parallel group/) });
      }
      const before = Array.from(group.replicas[0]!.view(1, 'w'));
      const m = await t.step(x, { labels: [0, 1, 2, 0] });
      expect(Number.isFinite(m.loss)).toBe(true);
      t.syncToHost();
      expect(Array.from(group.replicas[0]!.view(1, 'w'))).not.toEqual(before);
    } finally {
      group.dispose();
    }
  });

  it("backward and update runs take none of a group's run parameters (BAD_ARGUMENT)", async () => {
    const a = Arena.create(planLayout(spec), { backend: 'cpu' });
    try {
      const ce = LOSSES['cross-entropy'];
      await runArena(a, { op: OPS.forward, loss: ce, rows: 4 });
      await expect(runArena(a, { op: OPS.backward, loss: ce, rows: 4, lossRows: 8 })).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringMatching(/lossRows/),
      });
      await expect(runArena(a, { op: OPS.update, loss: ce, lossRows: 8 })).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringMatching(/lossRows/),
      });
      await expect(runArena(a, { op: OPS.backward, loss: ce, rows: 4, reduce: true })).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringMatching(/reduce/),
      });
      await expect(runArena(a, { op: OPS.backward, loss: ce, rows: 4 })).resolves.toBeDefined();
    } finally {
      a.dispose();
    }
  });
});

describe('DataParallel without NCCL', () => {
  const spec: LayoutSpec = { layers: [4, 8, 3], batch: 5, samples: 23, activations: ['relu', 'softmax'], optimizer: 'adam' };
  const x = Float32Array.from({ length: 23 * 4 }, (_, i) => Math.sin(i));
  const labels = Int32Array.from({ length: 23 }, (_, i) => i % 3);

  it('a group of one is a pass-through: the same training as the arena alone', async () => {
    const plan = planLayout(spec);
    const group = DataParallel.create(plan, { devices: [0], backend: 'cpu' });
    const alone = Arena.create(plan, { backend: 'cpu' });
    try {
      expect(group).toMatchObject({ world: 1, rank: 0, globalBatch: 5, reduces: false });
      const a = new Trainer(group, { lr: 0.01 }),
        b = new Trainer(alone, { lr: 0.01 });
      expect(a.globalBatch).toBe(5);
      a.init(7);
      b.init(7);
      const ra = await a.fit({ x, labels }, { epochs: 2, seed: 3 });
      const rb = await b.fit({ x, labels }, { epochs: 2, seed: 3 });
      expect(ra.loss).toBe(rb.loss);
      expect(await a.step(x.subarray(0, 20), { labels: labels.subarray(0, 5) })).toEqual(await b.step(x.subarray(0, 20), { labels: labels.subarray(0, 5) }));
      a.syncToHost();
      b.syncToHost();
      expect(Array.from(group.replicas[0]!.view(2, 'w'))).toEqual(Array.from(alone.view(2, 'w')));
      // From the environment: WORLD_SIZE=1.
      const joined = await DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu' });
      expect(joined.world).toBe(1);
      joined.dispose();
      expect(joined.replicas[0]!.disposed).toBe(true);
    } finally {
      group.dispose();
      alone.dispose();
    }
  });

  it('typed errors: several devices on the CPU, bad devices, a device on the CPU backend, a rank without CUDA', async () => {
    const plan = planLayout(spec);
    expect(codeOf(() => DataParallel.create(plan, { devices: [0, 1], backend: 'cpu' }))).toBe('NOT_SUPPORTED');
    expect(codeOf(() => DataParallel.create(plan, { devices: [] }))).toBe('BAD_OPTION');
    expect(codeOf(() => DataParallel.create(plan, { devices: [1, 1] }))).toBe('BAD_OPTION');
    expect(codeOf(() => DataParallel.create(plan, { devices: [-1] }))).toBe('BAD_OPTION');
    expect(codeOf(() => DataParallel.create(plan, { devices: [0, 1.5] }))).toBe('BAD_OPTION');
    expect(codeOf(() => Arena.create(plan, { backend: 'cpu', device: 1 }))).toBe('BAD_OPTION');
    expect(codeOf(() => Arena.create(plan, { backend: 'cpu', device: -2 }))).toBe('BAD_OPTION');
    await expect(
      DataParallel.join(plan, { env: { RANK: '0', WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '1' }, backend: 'cpu' }),
    ).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    await expect(DataParallel.join(plan, { env: { RANK: '2', WORLD_SIZE: '2' } })).rejects.toMatchObject({ code: 'BAD_ENV', field: 'RANK' });
    const n = ncclInfo();
    expect(typeof n.available).toBe('boolean');
    if (!n.available) expect(n.why).not.toBe('');
  });

  it("gradients on the wire: 'full' or 'bf16' (float32 plans only), typed errors naming gradients, checked before any device", async () => {
    const f32 = planLayout({ ...spec, dtype: 'float32' });
    const f64 = planLayout({ ...spec, dtype: 'float64' });
    for (const gradients of ['full', 'bf16'] as const) DataParallel.create(f32, { devices: [0], backend: 'cpu', gradients }).dispose();
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return { code: (e as { code?: string }).code, field: (e as { field?: string }).field, message: (e as Error).message };
      }
      return null;
    };
    expect(refused(() => DataParallel.create(f64, { devices: [0], backend: 'cpu', gradients: 'bf16' }))).toMatchObject({
      code: 'BAD_OPTION',
      field: 'gradients',
      message: expect.stringContaining('float32'),
    });
    expect(refused(() => DataParallel.create(f32, { devices: [0, 1], gradients: 'fp8' as never }))).toMatchObject({ code: 'BAD_OPTION', field: 'gradients' });
    await expect(DataParallel.join(f64, { env: { RANK: '0', WORLD_SIZE: '1' }, backend: 'cpu', gradients: 'bf16' })).rejects.toMatchObject({
      code: 'BAD_OPTION',
      field: 'gradients',
    });
  });

  it('a Trainer on a group of one takes a batch up to the global batch only', async () => {
    const group = DataParallel.create(planLayout(spec), { devices: [0], backend: 'cpu' });
    try {
      const t = new Trainer(group);
      t.init(1);
      await expect(t.step(x.subarray(0, 24), { labels: labels.subarray(0, 6) })).rejects.toMatchObject({ code: 'BAD_DATA' });
      group.dispose();
      expect(() => new Trainer(group)).toThrow(ArenaError);
    } finally {
      group.dispose();
    }
  });
});

describe('adviseDataParallel (nn-arena/tools)', () => {
  it('checks its options by name; where no group can run, advises one GPU without timing anything', async () => {
    const { adviseDataParallel } = await import('../src/tools.js');
    const spec: LayoutSpec = { layers: [4, 8, 3], batch: 5 };
    for (const [options, field] of [
      [{ steps: 5 }, 'steps'],
      [{ steps: 20.5 }, 'steps'],
      [{ margin: 0.5 }, 'margin'],
      [{ precision: 'fp8' }, 'precision'],
    ] as const)
      await expect(adviseDataParallel(spec, options as never)).rejects.toMatchObject({ code: 'BAD_OPTION', field });
    await expect(adviseDataParallel(spec, { step: 100 } as never)).rejects.toMatchObject({ code: 'UNKNOWN_OPTION', field: 'step' });
    await expect(adviseDataParallel({ layers: [4, 0, 3], batch: 5 })).rejects.toMatchObject({ name: 'LayoutError' });
    const one = await adviseDataParallel(spec, { devices: [0], precision: 'tf32' });
    expect(one).toEqual({
      advice: 'one-gpu',
      why: 'a group needs 2 or more GPUs; 1 given',
      devices: [0],
      precision: 'tf32',
      perGpuBatch: 5,
      oneGpuUsPerStep: null,
      groupUsPerStep: null,
      throughput: null,
    });
  });
});
