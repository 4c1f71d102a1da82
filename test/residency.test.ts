// Device budgets on the CPU: the options' errors (typed, naming the field and value), the
// smallest budget against the phase table restated here, and the native residency plan
// replayed against a model of where every region's bytes are (no GPU needed).
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, OptionError, minDeviceBudget, planLayout, type ArenaOptions, type Kind, type LayerSpec, type LayoutSpec } from '../src/index.js';
import { call, native, OPS, type RunParams } from '../src/native/addon.js';
import { codeOf } from './support/errors.js';
import { testAddon } from '../src/internal.js';

const L_SPEC: LayoutSpec = { layers: [4096, 4096, 4096, 4096, 4096, 4096, 4096], batch: 2048, samples: 4096 };
const SMALL: LayoutSpec = { layers: [50, 40, 30, 10], batch: 16, samples: 40, optimizer: 'adam' };

function optionError(f: () => unknown): OptionError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(OptionError);
    return e as OptionError;
  }
  throw new Error('expected an OptionError');
}

/** The smallest budget, restated from the kernels' point of view (csrc/train/phases.cc
 *  is the native table): backward of layer l reads d[l], z[l-1], w[l] and writes dw (not for
 *  SGD, whose update is folded into the product), db, d[l-1], then updates w, b and the
 *  optimizer state. Each region rounded out to `granule`. */
function expectedMin(spec: LayoutSpec, granule: number): number {
  const plan = planLayout(spec);
  const round = (layer: number, kind: Kind) => {
    const r = plan.region(layer, kind);
    if (!r) return 0;
    return Math.ceil((r.offset + r.bytes) / granule) * granule - Math.floor(r.offset / granule) * granule;
  };
  const last = plan.spec.layers.length - 1;
  let best = 0;
  const sum = (...parts: Array<[number, Kind]>) => parts.reduce((a, [l, k]) => a + round(l, k), 0);
  best = Math.max(best, sum([0, 'z'], [last, 'y'])); // gather (the data set is read in place)
  for (let l = 1; l <= last; l++) best = Math.max(best, sum([l - 1, 'z'], [l, 'w'], [l, 'b'], [l, 'z']));
  best = Math.max(best, sum([last, 'z'], [last, 'y'], [last, 'd']));
  for (let l = last; l >= 1; l--) {
    const opt = (['mw', 'mb', 'vw', 'vb'] as const).map((k): [number, Kind] => [l, k]);
    const dw: Array<[number, Kind]> = plan.spec.optimizer === 'sgd' ? [] : [[l, 'dw']];
    best = Math.max(best, sum([l, 'd'], [l - 1, 'z'], ...dw, [l, 'db'], [l, 'w'], [l, 'b'], ...(l > 1 ? [[l - 1, 'd'] as [number, Kind]] : []), ...opt));
  }
  // The header and the stats stay resident for the whole of a run.
  return Math.ceil(plan.headerBytes / granule) * granule + round(last, 'stats') + best;
}

describe('device budget options', () => {
  const plan = planLayout(SMALL);
  const min = minDeviceBudget(plan, 'managed').bytes;

  it('the smallest budget is the largest phase plus the header, for both placements', () => {
    for (const spec of [SMALL, L_SPEC, { ...L_SPEC, optimizer: 'adam' as const }, { ...SMALL, order: 'kind-major' as const, samples: 0 }]) {
      const p = planLayout(spec);
      expect(minDeviceBudget(p, 'managed').bytes).toBe(expectedMin(spec, 65536));
      expect(minDeviceBudget(p, 'staged').bytes).toBe(expectedMin(spec, p.spec.align));
    }
    // The L-class network (SGD): backward of a hidden layer (d, z, w, d[l-1] of 2048 x 4096 / 4096 x
    // 4096; no dw: the update is folded into the weight-gradient product).
    const L = minDeviceBudget(planLayout(L_SPEC), 'staged');
    expect(L.stage).toBe('backward');
    expect(L.bytes).toBeGreaterThanOrEqual(160 * 2 ** 20);
    expect(L.bytes).toBeLessThan(161 * 2 ** 20);
  });

  it('a budget that is not a positive safe integer is refused, naming the field and value', () => {
    for (const bad of [0, -1, 1.5, '1000000', Number.NaN, 2 ** 53, null]) {
      const e = optionError(() => Arena.create(plan, { memory: 'managed', deviceBudget: bad as number }));
      expect(e.code).toBe('BAD_BUDGET');
      expect(e.field).toBe('deviceBudget');
      expect(Object.is(e.value, bad)).toBe(true);
    }
  });

  it('a budget below what the largest phase needs is refused before anything is allocated', () => {
    for (const memory of ['managed', 'staged'] as const) {
      const need = minDeviceBudget(plan, memory).bytes;
      const e = optionError(() => Arena.create(plan, { memory, deviceBudget: need - 1 }));
      expect(e.code).toBe('BUDGET_TOO_SMALL');
      expect(e.value).toBe(need - 1);
      expect(e.message).toContain(`at least ${need} bytes`);
      expect(e.message).toMatch(/backward phase of layer \d/);
    }
  });

  it('the budget applies to managed or staged memory only, and staged memory needs one', () => {
    expect(optionError(() => Arena.create(plan, { deviceBudget: min })).code).toBe('BUDGET_NEEDS_MANAGED');
    expect(optionError(() => Arena.create(plan, { memory: 'device', deviceBudget: min })).field).toBe('deviceBudget');
    const staged = optionError(() => Arena.create(plan, { memory: 'staged' }));
    expect([staged.code, staged.field]).toEqual(['BUDGET_REQUIRED', 'deviceBudget']);
  });

  it("residency is 'scheduler' or 'on-demand', for managed memory with a budget", () => {
    const cases: Array<[ArenaOptions, string]> = [
      [{ memory: 'managed', deviceBudget: min, residency: 'eager' as never }, 'BAD_OPTION'],
      [{ memory: 'managed', residency: 'scheduler' }, 'BAD_OPTION'],
      [{ memory: 'staged', deviceBudget: min * 2, residency: 'on-demand' }, 'BAD_OPTION'],
    ];
    for (const [options, code] of cases) {
      const e = optionError(() => Arena.create(plan, options));
      expect([e.code, e.field]).toEqual([code, 'residency']);
    }
  });

  it('a valid budget on the CPU backend gives NOT_SUPPORTED, saying the CUDA backend is needed', () => {
    for (const memory of ['managed', 'staged'] as const) {
      for (const backend of ['cpu', 'auto'] as const) {
        if (backend === 'auto' && native().cudaInfo().devices > 0) continue; // 'auto' is CUDA there
        let err: unknown;
        try {
          Arena.create(plan, { backend, memory, deviceBudget: min * 2 });
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(ArenaError);
        expect((err as ArenaError).code).toBe('NOT_SUPPORTED');
        expect((err as ArenaError).message).toContain(`${memory} memory needs the CUDA backend`);
      }
    }
  });

  it('an arena without a budget has no residency report', () => {
    using arena = Arena.create(plan, { backend: 'cpu' });
    expect(arena.deviceBudget).toBeUndefined();
    expect(codeOf(() => arena.residency())).toBe('NOT_SUPPORTED');
  });
});

// ---- The plan, replayed ------------------------------------------------------------------------

type Run = RunParams;
const OP = OPS;

/** An epoch of resident training in runs of `perRun` batches (the last batch partial when samples % batch). */
function epoch(samples: number, batch: number, perRun: number, op: RunParams['op'] = OP.train, loss: RunParams['loss'] = 1): Run[] {
  const batches = Math.ceil(samples / batch);
  const runs: Run[] = [];
  for (let first = 0; first < batches; first += perRun) {
    runs.push({ op, loss, resident: true, samples, firstBatch: first, numBatches: Math.min(perRun, batches - first), permA: 1, permC: 0 });
  }
  return runs;
}

function replay(spec: LayoutSpec<LayerSpec>, placement: 'managed' | 'staged', budget: number, runs: Run[]) {
  const plan = planLayout(spec);
  return testAddon().replayResidency(plan.header, placement, budget, runs);
}

describe('residency plan (replayed without a GPU)', () => {
  const specs: Array<[string, LayoutSpec<LayerSpec>]> = [
    // Ops (the phase table gives each op's reads and writes): norms, dropout, a residual, and
    // categorical embeddings.
    [
      'ops adamw',
      {
        layers: [
          64,
          { units: 96, activation: 'relu' },
          { op: 'layernorm' },
          { units: 96, activation: 'tanh' },
          { op: 'dropout', p: 0.25 },
          { units: 96 },
          { op: 'residual', from: 1 },
          { op: 'rmsnorm' },
          { units: 5 },
        ],
        batch: 16,
        samples: 40,
        optimizer: 'adamw',
      },
    ],
    [
      'embeddings sgd',
      {
        layers: [
          6,
          {
            op: 'embedding',
            numeric: 4,
            categorical: [
              { cardinality: 10, dim: 3 },
              { cardinality: 500, dim: 16 },
            ],
          },
          { units: 40, activation: 'relu' },
          { units: 6 },
        ],
        batch: 16,
        samples: 40,
      },
    ],
    ['small adam', { ...SMALL, activations: ['relu', 'relu', 'identity'] }],
    ['small momentum kind-major', { ...SMALL, optimizer: 'momentum', order: 'kind-major', activations: ['relu', 'relu', 'identity'] }],
    ['uneven widths sgd', { layers: [300, 700, 20, 500, 9], batch: 32, samples: 100, activations: ['tanh', 'relu', 'sigmoid', 'identity'] }],
    ['float64 adam', { layers: [64, 256, 256, 8], batch: 24, samples: 60, dtype: 'float64', optimizer: 'adam', activations: ['relu', 'relu', 'identity'] }],
  ];

  for (const [name, spec] of specs) {
    for (const placement of ['managed', 'staged'] as const) {
      it(`${name}, ${placement}: every phase finds its regions, no live byte lost, within budget`, () => {
        const plan = planLayout(spec);
        const min = minDeviceBudget(plan, placement).bytes;
        const total = plan.totalBytes;
        const batch = plan.spec.batch,
          samples = plan.spec.samples;
        // Training (partial last batch, runs of 1 and 3 steps), then gradients, evaluation and
        // a forward pass on a staged batch, as a Trainer would issue them.
        const runs: Run[] = [
          ...epoch(samples, batch, 1),
          ...epoch(samples, batch, 3),
          { op: OP.grad, loss: 1, rows: 5 },
          ...epoch(samples, batch, 2, OP.eval),
          { op: OP.forward, loss: 1, rows: batch },
          ...epoch(samples, batch, 3),
        ];
        for (const budget of [min, min + 4096, min + Math.floor(total / 2), min + total * 2]) {
          const r = replay(spec, placement, budget, runs);
          expect(r.error, `budget ${budget}`).toBe('');
          expect(r.counters.peakScheduledBytes).toBeLessThanOrEqual(budget);
          expect(r.counters.runs).toBe(runs.length);
        }
      });
    }
  }

  it('with room for the whole arena, nothing moves once it is resident', () => {
    const cases: Array<[LayoutSpec<LayerSpec>, 'managed' | 'staged']> = [
      [specs[0]![1], 'staged'],
      [{ layers: [512, 512, 512, 16], batch: 128, samples: 300, optimizer: 'momentum', activations: ['relu', 'relu', 'identity'] }, 'managed'],
    ];
    for (const [spec, placement] of cases) {
      const plan = planLayout(spec);
      // Room for every region rounded to the placement's granule, and the header.
      const room = plan.totalBytes + plan.regions.length * 2 * 65536;
      const runs = epoch(plan.spec.samples, plan.spec.batch, 3);
      const once = replay(spec, placement, room, runs);
      const twice = replay(spec, placement, room, [...runs, ...runs]);
      expect(once.error).toBe('');
      expect(twice.error).toBe('');
      expect(twice.counters.fetchedBytes + twice.counters.placedBytes).toBe(once.counters.fetchedBytes + once.counters.placedBytes);
      expect(twice.counters.drops).toBe(0);
      // Managed memory is coherent: nothing is ever copied out. Staged: what a run changed is.
      if (placement === 'managed') expect(twice.counters.writtenBackBytes).toBe(0);
      else expect(twice.counters.writtenBackBytes).toBe(2 * once.counters.writtenBackBytes);
    }
  });

  it('L-class at 25%: each step moves the weights and activations that do not fit, never the data set', () => {
    const plan = planLayout(L_SPEC);
    const budget = Math.floor(plan.totalBytes / 4);
    const runs = Array.from({ length: 4 }, () => epoch(4096, 2048, 2, OP.train, 0)).flat(); // softmax: cross-entropy
    const MiB = 2 ** 20;
    for (const placement of ['managed', 'staged'] as const) {
      const r = replay(L_SPEC, placement, budget, runs);
      expect(r.error).toBe('');
      const c = r.counters;
      const perStep = (x: number) => x / c.steps / MiB;
      // Lower bound (bench/um.ts, linkBound): weights that cannot stay resident come in twice a
      // step (forward and backward) and the activations kept for backward come back once.
      const weights = 6 * 64,
        activations = 6 * 32,
        budgetMiB = budget / MiB;
      const inBound = weights - (budgetMiB - 64) + (weights + activations - (budgetMiB - 96));
      expect(perStep(c.fetchedBytes)).toBeGreaterThanOrEqual(inBound);
      // ... and not much more: the plan keeps the turn's weights and the first layers' resident.
      expect(perStep(c.fetchedBytes)).toBeLessThan(2 * weights + activations);
      expect(perStep(c.writtenBackBytes)).toBeLessThan(2 * weights + activations);
      expect(c.compactions).toBe(0);
      expect(c.peakScheduledBytes).toBeLessThanOrEqual(budget);
    }
  });

  it('refuses a budget below the largest phase', () => {
    const plan = planLayout(SMALL);
    const min = minDeviceBudget(plan, 'staged').bytes;
    expect(codeOf(() => call(() => testAddon().replayResidency(plan.header, 'staged', min - 1, epoch(40, 16, 1, OP.train, 0))))).toBe('BUDGET_TOO_SMALL');
  });
});
