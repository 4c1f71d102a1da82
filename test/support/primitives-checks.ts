// primitives-checks.ts: the trainer primitives (forward / backward / update) against step(), shared
// by the CPU suite (test/primitives.test.ts) and the CUDA one (test/gpu/primitives.gpu.test.ts).
import { Arena, planLayout, Trainer, type Activation, type ArenaOptions, type LayoutSpec, type Optimizer } from '../../src/index.js';
import { runArena } from '../../src/arena/arena.js';
import { LOSSES, OPS, PRECISIONS, type PrecisionName } from '../../src/native/addon.js';
import { toyData } from './train-checks.js';

export interface Twins {
  /** Every parameter and optimizer-state region of both arenas, as bytes, after the steps. */
  step: Uint8Array;
  primitives: Uint8Array;
  /** Each step's loss: from step(), and from backward() + metrics(). */
  stepLoss: number[];
  primitiveLoss: number[];
  /** The last forward()'s outputs of both (after the same training). */
  stepOut: Float64Array;
  primitiveOut: Float64Array;
}

const STATE_KINDS = ['w', 'b', 'mw', 'mb', 'vw', 'vb'] as const;

function stateBytes(arena: Arena, model?: number): Uint8Array {
  const parts: Uint8Array[] = [];
  for (let l = 1; l < arena.plan.spec.layers.length; l++) {
    for (const k of STATE_KINDS) {
      if (!arena.plan.region(l, k)) continue;
      const v = arena.view(l, k, model);
      parts.push(new Uint8Array(v.buffer, v.byteOffset, v.byteLength).slice());
    }
  }
  return Uint8Array.from(parts.flatMap((p) => [...p]));
}

/** `steps` steps from one seed on two arenas: step(x, target) on one, forward(x),
 *  backward(target), update() on the other (batches of alternating full and partial rows). */
export async function twins(
  options: ArenaOptions,
  dtype: 'float32' | 'float64',
  optimizer: Optimizer,
  opts: {
    layers?: number[];
    batch?: number;
    output?: Activation;
    steps?: number;
    precision?: PrecisionName;
  } = {},
): Promise<Twins> {
  const layers = opts.layers ?? [37, 70, 33, 10];
  const batch = opts.batch ?? 24;
  const output = opts.output ?? 'softmax';
  const steps = opts.steps ?? 5;
  const mse = output !== 'softmax';
  const hidden: Activation[] = layers.slice(1, -1).map((_, i) => (i % 2 ? 'tanh' : 'relu'));
  const spec: LayoutSpec = { layers, batch, dtype, optimizer, activations: [...hidden, output] };
  const inputs = layers[0]!,
    outputs = layers[layers.length - 1]!;
  const data = toyData(inputs, outputs, batch * steps, 17, mse);
  const lr = optimizer === 'adam' ? 0.01 : 0.1;
  const result = { stepLoss: [] as number[], primitiveLoss: [] as number[] } as Twins;
  for (const way of ['step', 'primitives'] as const) {
    const arena = Arena.create(planLayout(spec), options);
    try {
      const t = new Trainer(arena, { lr, ...(opts.precision ? { precision: opts.precision } : {}) });
      t.init(4);
      for (let s = 0; s < steps; s++) {
        const rows = s % 2 ? batch - 7 : batch;
        const x = data.x.subarray(s * batch * inputs, (s * batch + rows) * inputs);
        const target = mse
          ? { y: data.y!.subarray(s * batch * outputs, (s * batch + rows) * outputs) }
          : { labels: data.labels!.subarray(s * batch, s * batch + rows) };
        if (way === 'step') {
          result.stepLoss.push((await t.step(x, target)).loss);
        } else {
          await t.forward(x);
          await t.backward(target);
          result.primitiveLoss.push((await t.metrics()).loss);
          await t.update();
        }
      }
      const out = Float64Array.from(await t.forward(data.x.subarray(0, batch * inputs)));
      t.syncToHost();
      result[way] = stateBytes(arena);
      if (way === 'step') result.stepOut = out;
      else result.primitiveOut = out;
    } finally {
      arena.dispose();
    }
  }
  return result;
}

/** Index of the first differing byte, or -1. */
export function firstDiff(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** K models (the arena's `models`, a learning rate each): `steps` Train runs (Trainer.step) on
 *  one arena, Forward + Backward + Update native runs on the same batches on the other (the
 *  Trainer refuses its primitives for K > 1; the runs themselves cover every model). Returns
 *  each model's parameter and optimizer-state bytes of both ways. sigmoid + mse with y. */
export async function modelTwins(
  options: ArenaOptions,
  dtype: 'float32' | 'float64',
  optimizer: Optimizer,
  lrs: number[],
  opts: {
    layers?: number[];
    batch?: number;
    steps?: number;
  } = {},
): Promise<{ step: Uint8Array[]; primitives: Uint8Array[] }> {
  const layers = opts.layers ?? [9, 14, 6, 4];
  const batch = opts.batch ?? 12;
  const steps = opts.steps ?? 4;
  const K = lrs.length;
  const spec: LayoutSpec = { layers, batch, dtype, optimizer, models: K, activations: [...layers.slice(1, -1).map(() => 'tanh' as const), 'sigmoid' as const] };
  const inputs = layers[0]!,
    outputs = layers[layers.length - 1]!,
    L = layers.length - 1;
  const data = toyData(inputs, outputs, batch * steps, 23, true);
  const result = { step: [] as Uint8Array[], primitives: [] as Uint8Array[] };
  for (const way of ['step', 'primitives'] as const) {
    const arena = Arena.create(planLayout(spec), options);
    try {
      const t = new Trainer(arena, { lr: lrs });
      t.init(6);
      for (let s = 0; s < steps; s++) {
        const rows = s % 2 ? batch - 5 : batch;
        const x = data.x.subarray(s * batch * inputs, (s * batch + rows) * inputs);
        const y = data.y!.subarray(s * batch * outputs, (s * batch + rows) * outputs);
        if (way === 'step') {
          await t.step(x, { y });
          continue;
        }
        arena.view(0, 'z').set(x);
        arena.view(L, 'y').set(y);
        arena.toDevice({ layers: [0], kinds: ['z'] });
        arena.toDevice({ layers: [L], kinds: ['y'] });
        const common = { loss: LOSSES.mse, precision: PRECISIONS.fp32, lrs, momentum: 0.9, beta1: 0.9, beta2: 0.999, eps: 1e-8, rows, stepBase: s };
        await runArena(arena, { ...common, op: OPS.forward, resetStats: false });
        await runArena(arena, { ...common, op: OPS.backward });
        await runArena(arena, { ...common, op: OPS.update });
      }
      arena.toHost();
      for (let m = 0; m < K; m++) result[way].push(stateBytes(arena, m));
    } finally {
      arena.dispose();
    }
  }
  return result;
}
