// optim-fixtures.ts: nn-arena trained like test/fixtures/gen_optim.py trains with PyTorch (the
// same start weights, batches, optimizer, schedule and clipping), for the CPU fixture test
// (test/optimizers.test.ts) and the CUDA comparisons (test/gpu/optimizers.gpu.test.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Arena, planLayout, Trainer, type ArenaOptions, type TrainerOptions } from '../../src/index.js';

export interface TorchRun {
  w: number[][][];
  b: number[][];
  lrs: number[];
  gradNorms: number[];
}
export interface OptimCase {
  name: string;
  optimizer: string;
  lr: number;
  momentum?: number;
  nesterov?: boolean;
  weightDecay?: number;
  decayBiases?: boolean;
  clipGradNorm?: number;
  schedule?: { type: string; [k: string]: number | string };
  float64: TorchRun;
  float32: TorchRun;
}
export interface OptimFixtures {
  torch: string;
  layers: number[];
  batch: number;
  steps: number;
  w: number[][][];
  b: number[][];
  x: number[][];
  labels: number[];
  cases: OptimCase[];
}

export const FIXTURES: OptimFixtures = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'optim.json'), 'utf8'));

/** The Trainer options of a case (the fixture's fields that are Trainer options). */
export function trainerOptions(c: OptimCase): TrainerOptions {
  const o: TrainerOptions = { lr: c.lr };
  for (const k of ['momentum', 'nesterov', 'weightDecay', 'decayBiases', 'clipGradNorm', 'schedule'] as const)
    if (c[k] !== undefined) (o as Record<string, unknown>)[k] = c[k];
  return o;
}

/** Trains a case from the fixture's start on `options`' backend: the weights after the last
 *  step, the learning rate and the gradient norm nn-arena reports for every step. */
export async function trainCase(c: OptimCase, dtype: 'float32' | 'float64', options: ArenaOptions, extra: TrainerOptions = {}): Promise<TorchRun> {
  const f = FIXTURES;
  const arena = Arena.create(planLayout({ layers: f.layers, batch: f.batch, dtype, optimizer: c.optimizer }), options);
  try {
    const t = new Trainer(arena, { ...trainerOptions(c), ...extra });
    for (let l = 1; l < f.layers.length; l++) {
      arena.view(l, 'w').set(f.w[l - 1]!.flat());
      arena.view(l, 'b').set(f.b[l - 1]!);
    }
    t.markHostChanged();
    const lrs: number[] = [],
      gradNorms: number[] = [];
    for (let s = 0; s < f.steps; s++) {
      lrs.push(t.learningRate());
      await t.step(f.x.slice(s * f.batch, (s + 1) * f.batch).flat(), { labels: f.labels.slice(s * f.batch, (s + 1) * f.batch) });
      gradNorms.push(...t.gradNorms);
    }
    arena.toHost({ kinds: ['w', 'b'] });
    const w = f.layers.slice(1).map((n, i) => {
      const v = arena.view(i + 1, 'w');
      return Array.from({ length: n }, (_, j) => Array.from(v.subarray(j * f.layers[i]!, (j + 1) * f.layers[i]!)));
    });
    const b = f.layers.slice(1).map((_, i) => Array.from(arena.view(i + 1, 'b')));
    return { w, b, lrs, gradNorms };
  } finally {
    arena.dispose();
  }
}

/** The largest |a - b| / (|b| + floor) over every weight and bias. */
export function maxRelError(a: TorchRun, b: TorchRun, floor: number): number {
  const xs = [...a.w.flat(2), ...a.b.flat()],
    ys = [...b.w.flat(2), ...b.b.flat()];
  if (xs.length !== ys.length) return Infinity;
  return xs.reduce((m, x, i) => Math.max(m, Math.abs(x - ys[i]!) / (Math.abs(ys[i]!) + floor)), 0);
}

/** How close nn-arena's weights must be to PyTorch's after the case's steps: float64 1e-12;
 *  float32 within PyTorch's own float32 rounding (its float32 run's distance from its float64
 *  run, at least one float32 ulp per step), four times over: nn-arena sums in another order. */
export const FLOOR = 1e-3;
export function weightTolerance(c: OptimCase, dtype: 'float32' | 'float64'): number {
  if (dtype === 'float64') return 1e-12;
  return 4 * Math.max(maxRelError(c.float32, c.float64, FLOOR), FIXTURES.steps * 2 ** -23);
}
