// train-checks.ts: training checks shared by the CPU suite and the CUDA suite.
import { Arena, planLayout, Trainer, type Activation, type ArenaOptions, type LayoutSpec, type LossName } from '../../src/index.js';

/** Random inputs and targets for a small network, from a seed. */
export function toyData(inputs: number, outputs: number, count: number, seed: number, mse: boolean) {
  let s = seed >>> 0;
  const rnd = () => (s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0) / 2 ** 32;
  const x = Float64Array.from({ length: inputs * count }, () => rnd() * 2 - 1);
  if (!mse) return { x, labels: Uint8Array.from({ length: count }, () => Math.floor(rnd() * outputs)) };
  return { x, y: Float64Array.from({ length: outputs * count }, () => rnd() * 2 - 1) };
}

export interface GradCase {
  hidden: [Activation, Activation];
  output: Activation;
  loss?: LossName;
  labelSmoothing?: number;
  leakyReluSlope?: number;
}

export const GRAD_CASES: GradCase[] = (() => {
  const pairs: Array<[Activation, Activation]> = [
    ['relu', 'tanh'],
    ['sigmoid', 'identity'],
    ['tanh', 'relu'],
    ['identity', 'sigmoid'],
  ];
  const outputs: Activation[] = ['softmax', 'identity', 'sigmoid', 'tanh', 'relu'];
  return pairs.flatMap((hidden) => outputs.map((output) => ({ hidden, output })));
})();

/** The activations and losses that came with the descriptors: every new activation before each
 *  kind of output loss, bce-with-logits, label smoothing, a leaky slope of its own. */
export const NEW_GRAD_CASES: GradCase[] = [
  ...(['gelu', 'gelu-tanh', 'silu', 'leaky-relu', 'softplus'] as const).flatMap((a): GradCase[] => [
    { hidden: [a, a], output: 'softmax' },
    { hidden: [a, 'tanh'], output: 'identity' },
    { hidden: ['relu', a], output: 'identity', loss: 'bce-with-logits' },
  ]),
  { hidden: ['leaky-relu', 'leaky-relu'], output: 'sigmoid', leakyReluSlope: 0.3 },
  { hidden: ['gelu', 'silu'], output: 'softmax', labelSmoothing: 0.2 },
  { hidden: ['tanh', 'relu'], output: 'softmax', labelSmoothing: 1 },
];

export const caseName = (c: GradCase) =>
  `${c.hidden.join('+')} -> ${c.output}${c.loss ? ` (${c.loss})` : ''}${c.labelSmoothing ? ` (label smoothing ${c.labelSmoothing})` : ''}${c.leakyReluSlope !== undefined ? ` (slope ${c.leakyReluSlope})` : ''}`;

/** Largest relative error between analytic gradients (dw, db of every layer) and central
 *  finite differences of the mean loss, over every parameter of a 5-6-4-3 float64 network. */
export async function gradientCheck(c: GradCase, options: ArenaOptions): Promise<{ maxRel: number; where: string }> {
  const spec: LayoutSpec = {
    layers: [5, 6, 4, 3],
    batch: 4,
    dtype: 'float64',
    activations: [...c.hidden, c.output],
    ...(c.leakyReluSlope === undefined ? {} : { leakyReluSlope: c.leakyReluSlope }),
  };
  using arena = Arena.create(planLayout(spec), options);
  const mse = c.output !== 'softmax';
  const t = new Trainer(arena, { ...(c.loss ? { loss: c.loss } : {}), ...(c.labelSmoothing ? { labelSmoothing: c.labelSmoothing } : {}) });
  t.init(7);
  // Non-zero biases: with zero biases a row that is dead in a ReLU layer gives later layers a
  // pre-activation of exactly 0, the kink where a central difference averages two slopes.
  for (let l = 1; l < 4; l++)
    arena.view(l, 'b').forEach((_, i, b) => {
      b[i] = 0.05 * Math.sin(3 * l + 7 * i + 1);
    });
  t.markHostChanged();
  const data = toyData(5, 3, 4, 11, mse);
  const target = mse ? { y: data.y! } : { labels: data.labels! };
  await t.gradients(data.x, target);
  return await finiteDifferenceError(arena, t, async () => (await t.evaluate({ x: data.x, ...target })).loss); // await: `using` disposes the arena on return
}

/** Largest relative error between the gradients in dw, db of layers 1-3 (as they stand on the
 *  host) and central finite differences of `loss` over every weight and bias. */
export async function finiteDifferenceError(arena: Arena, t: Trainer, loss: () => Promise<number>): Promise<{ maxRel: number; where: string }> {
  let maxRel = 0;
  let where = '';
  const h = 1e-4;
  for (let l = 1; l < 4; l++) {
    for (const [kind, gkind] of [
      ['w', 'dw'],
      ['b', 'db'],
    ] as const) {
      const p = arena.view(l, kind);
      const g = Float64Array.from(arena.view(l, gkind));
      for (let i = 0; i < p.length; i++) {
        const orig = p[i]!;
        const central = async (step: number) => {
          p[i] = orig + step;
          t.markHostChanged();
          const up = await loss();
          p[i] = orig - step;
          t.markHostChanged();
          const down = await loss();
          p[i] = orig;
          t.markHostChanged();
          return (up - down) / (2 * step);
        };
        // Richardson extrapolation of two central differences: O(h^4) truncation error, so a
        // step large enough to keep round-off far below the 1e-6 bound.
        const numeric = (4 * (await central(h / 2)) - (await central(h))) / 3;
        const rel = Math.abs(numeric - g[i]!) / Math.max(Math.abs(numeric), Math.abs(g[i]!), 1e-7);
        if (rel > maxRel) {
          maxRel = rel;
          where = `layer ${l} ${kind}[${i}]: analytic ${g[i]}, numeric ${numeric}`;
        }
      }
    }
  }
  return { maxRel, where };
}

/** Weights and biases after `steps` fit steps from one seed (for cross-backend comparison). */
export async function trainedParams(options: ArenaOptions, dtype: 'float32' | 'float64', optimizer: 'sgd' | 'momentum' | 'adam', steps = 20) {
  const batch = 16;
  const spec: LayoutSpec = { layers: [12, 32, 24, 5], batch, dtype, optimizer, samples: batch * steps, activations: ['relu', 'tanh', 'softmax'] };
  using arena = Arena.create(planLayout(spec), options);
  const t = new Trainer(arena, { lr: optimizer === 'adam' ? 0.01 : 0.1 });
  t.init(3);
  const data = toyData(12, 5, batch * steps, 5, false);
  await t.fit({ x: data.x, labels: data.labels! }, { epochs: 1, seed: 9 });
  const out: number[] = [];
  for (let l = 1; l < 4; l++) out.push(...arena.view(l, 'w'), ...arena.view(l, 'b'));
  return Float64Array.from(out);
}

/** max |a - b| / max |a|: the norm-wise relative difference of two parameter vectors. */
export function relDiff(a: Float64Array, b: Float64Array): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < a.length; i++) {
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(a[i]!));
  }
  return num / den;
}
