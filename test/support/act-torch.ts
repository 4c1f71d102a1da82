// act-torch.ts: the PyTorch fixtures of the activations and losses (test/fixtures/gen_act.py ->
// act-torch.json) replayed on an arena, shared by the CPU suite and the GPU suite.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Arena, planLayout, Trainer, type Activation, type ArenaOptions, type LossName, type TrainerOptions } from '../../src/index.js';

export interface TorchResult {
  out: number[];
  loss: number;
  dw: number[][];
  db: number[][];
  wAfter: number[][];
  bAfter: number[][];
}
export interface TorchCase {
  name: string;
  layers: number[];
  batch: number;
  activations: Activation[];
  loss: LossName;
  labelSmoothing: number;
  leakyReluSlope?: number;
  steps: number;
  lr: number;
  x: number[];
  w: number[][];
  b: number[][];
  labels?: number[];
  y?: number[];
  float64: TorchResult;
  float32: TorchResult;
}

export const TORCH = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'act-torch.json'), 'utf8')) as { torch: string; cases: TorchCase[] };

/** float32: float32 rounding (2^-24 a unit) gathered along a forward, backward and 3 SGD steps. */
export const F32_TOLERANCE = 256 * 2 ** -24;

/** max |a - b| / max |b|: the norm-wise relative difference of a tensor from PyTorch's. */
export function rel(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  if (a.length !== b.length) return Infinity;
  return den === 0 ? num : num / den;
}

/** nn-arena's results for a case: outputs, mean loss, gradients, weights after the SGD steps,
 *  each with its relative difference from PyTorch's; `worst` is the largest. */
export async function replay(
  c: TorchCase,
  dtype: 'float32' | 'float64',
  options: ArenaOptions,
  trainer: Partial<TrainerOptions> = {},
): Promise<{ worst: number; what: string }> {
  const plan = planLayout({
    layers: c.layers,
    batch: c.batch,
    dtype,
    optimizer: 'sgd',
    activations: c.activations,
    ...(c.leakyReluSlope === undefined ? {} : { leakyReluSlope: c.leakyReluSlope }),
  });
  using arena = Arena.create(plan, options);
  const t = new Trainer(arena, { lr: c.lr, loss: c.loss, ...(c.labelSmoothing ? { labelSmoothing: c.labelSmoothing } : {}), ...trainer });
  for (let l = 1; l < c.layers.length; l++) {
    arena.view(l, 'w').set(c.w[l - 1]!);
    arena.view(l, 'b').set(c.b[l - 1]!);
  }
  t.markHostChanged();
  const target = c.labels ? { labels: c.labels } : { y: c.y! };
  const want = c[dtype];
  const diffs: Array<[string, number]> = [];
  diffs.push(['outputs', rel(Float64Array.from(await t.predict(c.x)), want.out)]);
  const m = await t.gradients(c.x, target);
  diffs.push(['loss', rel([m.loss], [want.loss])]);
  for (let l = 1; l < c.layers.length; l++) {
    arena.toHost({ layers: [l], kinds: ['dw', 'db'] });
    diffs.push([`dw[${l}]`, rel(arena.view(l, 'dw'), want.dw[l - 1]!)], [`db[${l}]`, rel(arena.view(l, 'db'), want.db[l - 1]!)]);
  }
  for (let s = 0; s < c.steps; s++) await t.step(c.x, target);
  arena.toHost({ kinds: ['w', 'b'] });
  for (let l = 1; l < c.layers.length; l++) {
    diffs.push(
      [`w[${l}] after ${c.steps} steps`, rel(arena.view(l, 'w'), want.wAfter[l - 1]!)],
      [`b[${l}] after ${c.steps} steps`, rel(arena.view(l, 'b'), want.bAfter[l - 1]!)],
    );
  }
  const [what, worst] = diffs.reduce((a, d) => (d[1] > a[1] || Number.isNaN(d[1]) ? d : a));
  return { worst, what };
}
