// primitives.test.ts: Trainer.forward / backward / update (issue 17): forward + backward +
// update == step bit for bit, K models, the transfers each one makes, and the refusals. What a
// user builds from them (a custom loss, a custom optimizer): test/primitives-custom.test.ts.
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer } from '../src/index.js';
import { runArena } from '../src/arena/arena.js';
import { OPS, call } from '../src/native/addon.js';
import { toyData } from './support/train-checks.js';
import { firstDiff, modelTwins, twins } from './support/primitives-checks.js';
import { testAddon } from '../src/internal.js';

const cpu = { backend: 'cpu' } as const;

describe('forward + backward + update is step, bit for bit (CPU)', () => {
  for (const dtype of ['float32', 'float64'] as const) {
    for (const optimizer of ['sgd', 'momentum', 'adam'] as const) {
      it(`${optimizer}, ${dtype}, softmax + cross-entropy with labels`, async () => {
        const r = await twins(cpu, dtype, optimizer);
        expect(firstDiff(r.step, r.primitives)).toBe(-1);
        expect(firstDiff(new Uint8Array(r.stepOut.buffer), new Uint8Array(r.primitiveOut.buffer))).toBe(-1);
        // backward() computes the output layer's logits again: step()'s loss, bit for bit.
        expect(r.primitiveLoss).toEqual(r.stepLoss);
      });
    }
  }

  it("backward() reports step()'s loss where softmax's probabilities underflow (logits far apart: a huge Adam step)", async () => {
    const spec = { layers: [6, 8, 4], batch: 5, optimizer: 'adam' as const };
    const data = toyData(6, 4, 5, 3, false);
    const losses: number[] = [];
    for (const way of ['step', 'primitives'] as const) {
      using arena = Arena.create(planLayout(spec), cpu);
      const t = new Trainer(arena, { lr: 1e10 });
      t.init(7);
      await t.step(data.x, { labels: data.labels! }); // the step that sends the logits far apart
      if (way === 'step') losses.push((await t.step(data.x, { labels: data.labels! })).loss);
      else {
        await t.forward(data.x);
        await t.backward({ labels: data.labels! });
        losses.push((await t.metrics()).loss);
      }
    }
    expect(losses[0]).toBeGreaterThan(1e6); // far beyond -log of the smallest float32 (about 87)
    expect(losses[1]).toBe(losses[0]);
  });

  it('adam, float32, a wide network (GEMM tiles and edges, several threads), sigmoid + mse with y', async () => {
    const r = await twins(cpu, 'float32', 'adam', { layers: [300, 520, 70], batch: 64, output: 'sigmoid', steps: 3 });
    expect(firstDiff(r.step, r.primitives)).toBe(-1);
    expect(r.primitiveLoss).toEqual(r.stepLoss); // mse: the same loss code on the same outputs
  });

  it('sgd, float32, a batch deeper than one GEMM K block (300 rows)', async () => {
    const r = await twins(cpu, 'float32', 'sgd', { layers: [20, 40, 5], batch: 300, steps: 2 });
    expect(firstDiff(r.step, r.primitives)).toBe(-1);
  });

  // With clipping, a Train step's norm comes from the dW products' Squares epilogue and
  // update()'s from cpu::squares over dw in memory: the same bits (multi-tile layers).
  const cases = [
    { name: '', spec: { layers: [10, 12, 3], batch: 8, optimizer: 'adam' as const }, options: {} },
    {
      name: ' (momentum, float64, clipping by the global norm)',
      spec: { layers: [37, 50, 3], batch: 8, optimizer: 'momentum' as const, dtype: 'float64' as const },
      options: { clipGradNorm: 0.05 },
    },
  ];
  for (const c of cases) {
    it(`gradients() then update() is a step too${c.name}`, async () => {
      const data = toyData(c.spec.layers[0]!, 3, 8, 1, false);
      const out: Uint8Array[] = [];
      for (const way of [0, 1, 2]) {
        // step(); gradients() + update(); step() without the options
        if (way === 2 && !c.name) break;
        const arena = Arena.create(planLayout(c.spec), cpu);
        try {
          const t = new Trainer(arena, { lr: 0.1, ...(way === 2 ? {} : c.options) });
          t.init(1);
          for (let s = 0; s < 3; s++) {
            if (way !== 1) await t.step(data.x, { labels: data.labels! });
            else {
              await t.gradients(data.x, { labels: data.labels! });
              await t.update();
            }
          }
          t.syncToHost();
          const state = c.spec.optimizer === 'adam' ? 'vb' : 'mb';
          out.push(
            new Uint8Array(
              [...arena.view(1, 'w'), ...arena.view(2, 'w'), ...arena.view(2, state)].flatMap((v) => [...new Uint8Array(Float64Array.of(v).buffer)]),
            ),
          );
          expect(t.steps).toBe(3);
        } finally {
          arena.dispose();
        }
      }
      expect(firstDiff(out[0]!, out[1]!)).toBe(-1);
      if (out[2]) expect(firstDiff(out[0]!, out[2]!)).not.toBe(-1); // the options did act
    });
  }
});

// ---- K models ----------------------------------------------------------------------------
describe('K models: the native runs cover every model; the Trainer refuses its primitives', () => {
  for (const [dtype, optimizer] of [
    ['float32', 'sgd'],
    ['float64', 'momentum'],
    ['float32', 'adam'],
  ] as const) {
    it(`Forward + Backward + Update runs == Train runs, each model bit for bit (${optimizer}, ${dtype}, 3 models, own lrs)`, async () => {
      const lrs = optimizer === 'adam' ? [0.01, 0.003, 0.02] : [0.1, 0.05, 0.2];
      const r = await modelTwins(cpu, dtype, optimizer, lrs);
      for (let m = 0; m < 3; m++) expect(firstDiff(r.step[m]!, r.primitives[m]!), `model ${m}`).toBe(-1);
      expect(firstDiff(r.step[0]!, r.step[1]!)).not.toBe(-1); // the models did train apart
    });
  }

  it('forward / backward / update on an arena of 2 models: ArenaError NOT_SUPPORTED naming models', async () => {
    const arena = Arena.create(planLayout({ layers: [4, 5, 3], batch: 4, models: 2 }), cpu);
    try {
      const t = new Trainer(arena);
      t.init(1);
      const x = toyData(4, 3, 2, 9, false).x;
      for (const call of [() => t.forward(x), () => t.backward({ labels: [0, 1] }), () => t.update()]) {
        await expect(call()).rejects.toMatchObject({ name: 'ArenaError', code: 'NOT_SUPPORTED', message: expect.stringMatching(/models: 2/) });
      }
      expect(t.steps).toBe(0);
      await t.step(x, { labels: [0, 1] }); // the trainer still works
      expect(t.steps).toBe(1);
    } finally {
      arena.dispose();
    }
  });
});

// ---- transfers -------------------------------------------------------------------------------
describe('what each primitive moves', () => {
  it('forward: x rows up, output rows down; backward: target or dOutput rows up; update: the 32-byte stats (did the weights stay finite)', async () => {
    const arena = Arena.create(planLayout({ layers: [8, 16, 4], batch: 10, optimizer: 'adam' }), cpu);
    try {
      const t = new Trainer(arena);
      t.init(1);
      const rows = 6;
      const { x, labels } = toyData(8, 4, rows, 2, false);
      const delta = async (f: () => Promise<unknown>) => {
        const a = arena.stats;
        await f();
        const b = arena.stats;
        return [
          b.toDeviceTransfers - a.toDeviceTransfers,
          b.toDeviceBytes - a.toDeviceBytes,
          b.toHostTransfers - a.toHostTransfers,
          b.toHostBytes - a.toHostBytes,
        ];
      };
      expect(await delta(() => t.forward(x))).toEqual([1, rows * 8 * 4, 1, rows * 4 * 4]);
      expect(await delta(() => t.backward({ labels: labels! }))).toEqual([1, rows * 4 * 4, 0, 0]);
      expect(await delta(() => t.update())).toEqual([0, 0, 1, 32]);
      expect(await delta(() => t.forward(x))).toEqual([1, rows * 8 * 4, 1, rows * 4 * 4]);
      expect(await delta(() => t.backward({ dOutput: new Float32Array(rows * 4).fill(0.01) }))).toEqual([1, rows * 4 * 4, 0, 0]);
      expect(await delta(() => t.update())).toEqual([0, 0, 1, 32]);
      expect(await delta(() => t.metrics())).toEqual([0, 0, 1, 32]);
      expect(t.steps).toBe(2);
    } finally {
      arena.dispose();
    }
  });

  it('forward returns the output rows as a view (softmax rows sum to 1)', async () => {
    const arena = Arena.create(planLayout({ layers: [8, 16, 4], batch: 10 }), cpu);
    try {
      const t = new Trainer(arena);
      t.init(1);
      const out = await t.forward(toyData(8, 4, 3, 2, false).x);
      expect(out.length).toBe(12);
      expect(out.buffer).toBe(arena.view(2, 'z').buffer);
      expect(out.byteOffset).toBe(arena.view(2, 'z').byteOffset);
      for (let r = 0; r < 3; r++) expect(out[r * 4]! + out[r * 4 + 1]! + out[r * 4 + 2]! + out[r * 4 + 3]!).toBeCloseTo(1, 6);
      const predicted = await t.predict(toyData(8, 4, 3, 2, false).x);
      expect(Array.from(predicted)).toEqual(Array.from(out));
    } finally {
      arena.dispose();
    }
  });
});

// ---- refusals --------------------------------------------------------------------------------
describe('primitives: typed refusals', () => {
  const setup = () => {
    const arena = Arena.create(planLayout({ layers: [4, 5, 3], batch: 4, optimizer: 'momentum' }), cpu);
    const t = new Trainer(arena);
    t.init(1);
    return { arena, t, x: toyData(4, 3, 2, 9, false).x };
  };

  it('backward before forward, or after another run replaced its activations: NO_FORWARD', async () => {
    const { arena, t, x } = setup();
    try {
      await expect(t.backward({ labels: [0, 1] })).rejects.toMatchObject({ name: 'ArenaError', code: 'NO_FORWARD' });
      await t.forward(x);
      await t.step(x, { labels: [0, 1] });
      await expect(t.backward({ labels: [0, 1] })).rejects.toMatchObject({ code: 'NO_FORWARD' });
      await t.forward(x);
      await t.evaluate({ x, labels: [0, 1] });
      await expect(t.backward({ labels: [0, 1] })).rejects.toMatchObject({ code: 'NO_FORWARD' });
      await t.forward(x);
      await t.backward({ labels: [0, 1] });
      await t.backward({ labels: [1, 2] }); // again from the same activations: allowed
      await t.update();
      await expect(t.backward({ labels: [0, 1] })).rejects.toMatchObject({ code: 'NO_FORWARD' }); // the weights changed
    } finally {
      arena.dispose();
    }
  });

  it('update without gradients, or twice: NO_GRADIENTS; the step count stays', async () => {
    const { arena, t, x } = setup();
    try {
      await expect(t.update()).rejects.toMatchObject({ name: 'ArenaError', code: 'NO_GRADIENTS' });
      await t.forward(x);
      await expect(t.update()).rejects.toMatchObject({ code: 'NO_GRADIENTS' });
      await t.backward({ labels: [0, 1] });
      await t.update();
      await expect(t.update()).rejects.toMatchObject({ code: 'NO_GRADIENTS' });
      await t.forward(x);
      await t.backward({ labels: [0, 1] });
      await t.step(x, { labels: [0, 1] }); // a step overwrites dw / db with gradients it applied
      await expect(t.update()).rejects.toMatchObject({ code: 'NO_GRADIENTS' });
      expect(t.steps).toBe(2);
    } finally {
      arena.dispose();
    }
  });

  it('bad targets: wrong lengths, NaN, several or no targets, bad labels, too many rows', async () => {
    const { arena, t, x } = setup();
    try {
      const before = arena.stats;
      await expect(t.forward(new Float32Array(4 * 5))).rejects.toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'forward.x.length' });
      await expect(t.forward([1, 2, 3])).rejects.toMatchObject({ code: 'BAD_DATA_WIDTH', field: 'forward.x.length' });
      await t.forward(x); // 2 rows
      await expect(t.backward({ dOutput: new Float32Array(9) })).rejects.toMatchObject({
        name: 'DataError',
        code: 'BAD_DATA_WIDTH',
        field: 'backward.dOutput.length',
        value: 9,
      });
      await expect(t.backward({ dOutput: [0.1, 0, 0, 0, 0, NaN] })).rejects.toMatchObject({
        name: 'DataError',
        code: 'BAD_DATA',
        field: 'backward.dOutput[5]',
      });
      await expect(t.backward({ dOutput: [0.1, 0, 0, 0, 0, Infinity] })).rejects.toMatchObject({ code: 'BAD_DATA', field: 'backward.dOutput[5]' });
      await expect(t.backward({ dOutput: [1e39, 0, 0, 0, 0, 0] })).rejects.toMatchObject({ code: 'BAD_DATA', field: 'backward.dOutput[0]' }); // Infinity in float32
      await expect(t.backward({ labels: [0, 1], dOutput: new Float32Array(6) } as never)).rejects.toMatchObject({
        code: 'BAD_DATA',
        field: 'target',
        value: 'several',
      });
      await expect(t.backward({} as never)).rejects.toMatchObject({ code: 'BAD_DATA', field: 'target', value: 'none' });
      await expect(t.backward(null as never)).rejects.toMatchObject({ code: 'BAD_DATA', field: 'target' });
      await expect(t.backward({ labels: [0, 3] })).rejects.toMatchObject({ code: 'BAD_LABEL', field: 'backward.labels[1]' });
      await expect(t.backward({ labels: [0, 1, 2] })).rejects.toMatchObject({ code: 'BAD_DATA_WIDTH', field: 'backward.labels.length', value: 3 });
      await expect(t.backward({ y: new Float32Array(3) })).rejects.toMatchObject({ code: 'BAD_DATA_WIDTH', field: 'backward.y.length', value: 3 });
      // The refusals moved nothing but the forward's rows, and the forward is still usable.
      const after = arena.stats;
      expect(after.toDeviceTransfers - before.toDeviceTransfers).toBe(1);
      await t.backward({ dOutput: new Float32Array(6).fill(0.1) });
      await t.update();
    } finally {
      arena.dispose();
    }
  });

  it('the run contract: backward / update runs are one non-resident step; unknown ops refused', async () => {
    const arena = Arena.create(planLayout({ layers: [4, 3], batch: 2, samples: 4, activations: ['softmax'] }), cpu);
    try {
      await expect(runArena(arena, { op: OPS.backward, resident: true, samples: 4 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(arena, { op: OPS.backward, rows: 2, numBatches: 2 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(arena, { op: OPS.backwardFromOutput, rows: 3 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(arena, { op: 7 as never, rows: 1 })).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      await expect(runArena(arena, { op: OPS.update })).resolves.toBe('cpu'); // rows unused
    } finally {
      arena.dispose();
    }
  });

  it.skipIf(process.env.NN_ARENA_TEST_ADDON === 'none')('budgeted arenas refuse the primitives (NOT_SUPPORTED): the phase table has none for them', () => {
    const plan = planLayout({ layers: [4, 8, 3], batch: 2 });
    const replay = (op: number) => call(() => testAddon().replayResidency(plan.header, 'staged', plan.totalBytes * 2, [{ op: op as never, rows: 2 }]));
    expect(replay(OPS.forward).error).toBe('');
    for (const op of [OPS.backward, OPS.backwardFromOutput, OPS.update]) expect(() => replay(op)).toThrow(expect.objectContaining({ code: 'NOT_SUPPORTED' }));
  });
});
