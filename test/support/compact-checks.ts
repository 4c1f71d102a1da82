// compact-checks.ts: the same training on a full plan and on a compact one, shared by the CPU
// suite (test/compact.test.ts) and the CUDA suite (test/gpu/compact.gpu.test.ts).
import { Arena, planLayout, Trainer, type ArenaOptions, type LayerSpec, type LayoutSpec, type TrainerOptions } from '../../src/index.js';
import { toyData } from './train-checks.js';

export interface Trained {
  /** Every w and b, bytes of each layer's regions one after the other. */
  params: Uint8Array;
  /** Loss and accuracy after each phase (steps on staged batches, a fit, an evaluation). */
  metrics: number[];
  predictions: Uint8Array;
  /** The path the fit ran on. */
  path: string;
  totalBytes: number;
}

const bytesOf = (v: ArrayBufferView) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength).slice();

/** Steps on caller-given batches, then a fit over a resident data set (several epochs), an
 *  evaluation and a prediction, all from one seed. */
export async function trainOn(spec: LayoutSpec<LayerSpec>, options: ArenaOptions, lr: number, trainer: TrainerOptions = {}): Promise<Trained> {
  const plan = planLayout(spec);
  const arena = Arena.create(plan, options);
  try {
    const t = new Trainer(arena, { ...trainer, lr });
    t.init(5);
    const units = plan.spec.layers;
    const inputs = units[0]!,
      outputs = units[units.length - 1]!;
    const data = toyData(inputs, outputs, spec.samples ?? 64, 3, false);
    const metrics: number[] = [];
    for (let s = 0; s < 3; s++) {
      const rows = Math.min(spec.batch, 5 + s);
      const m = await t.step(data.x.subarray(s * inputs, (s + rows) * inputs), { labels: data.labels!.subarray(s, s + rows) });
      metrics.push(m.loss, m.accuracy);
    }
    const fit = await t.fit({ x: data.x, labels: data.labels! }, { epochs: 3, seed: 9 });
    metrics.push(fit.loss, fit.accuracy);
    const path = fit.path;
    const ev = await t.evaluate({ x: data.x, labels: data.labels! });
    metrics.push(ev.loss, ev.accuracy);
    const predictions = bytesOf(await t.predict(data.x.subarray(0, inputs * Math.min(spec.batch, 7))));
    t.syncToHost();
    const parts: Uint8Array[] = [];
    for (let l = 1; l < units.length; l++) for (const k of ['w', 'b'] as const) if (plan.region(l, k)) parts.push(bytesOf(arena.view(l, k)));
    const params = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
    parts.reduce((at, p) => {
      params.set(p, at);
      return at + p.length;
    }, 0);
    return { params, metrics, predictions, path, totalBytes: plan.totalBytes };
  } finally {
    arena.dispose();
  }
}

/** The same training on the full plan and on the compact one. */
export async function compactVsFull(
  spec: LayoutSpec<LayerSpec>,
  options: ArenaOptions,
  lr = 0.05,
  trainer: TrainerOptions = {},
): Promise<{ full: Trained; compact: Trained }> {
  const full = await trainOn({ ...spec, compact: false }, options, lr, trainer);
  const compact = await trainOn({ ...spec, compact: true }, options, lr, trainer);
  return { full, compact };
}

/** Networks the compact checks train: the S shape (narrow), three hidden layers, and a last
 *  layer wider than the fused path's output rows (16 units) so that it has an output phase. */
export const COMPACT_NETS: Array<[string, LayoutSpec]> = [
  ['S shape 20-16-10', { layers: [20, 16, 10], batch: 10, samples: 64 }],
  ['3 hidden layers 12-24-16-12-3', { layers: [12, 24, 16, 12, 3], batch: 8, samples: 60, activations: ['relu', 'tanh', 'sigmoid', 'softmax'] }],
  ['wide output 10-24-16-20', { layers: [10, 24, 16, 20], batch: 8, samples: 40 }],
];

/** Every op but the embedding (its x needs index columns): layernorm, dropout, a residual across
 *  three layers, rmsnorm, with `width` units in the hidden layers. */
export const opsNet = (inputs: number, width: number, outputs: number): LayerSpec[] => [
  inputs,
  { units: width, activation: 'relu' },
  { op: 'layernorm' },
  { units: width, activation: 'tanh' },
  { op: 'dropout', p: 0.25 },
  { units: width },
  { op: 'residual', from: 1 },
  { op: 'rmsnorm' },
  { units: outputs, activation: 'softmax' },
];
export const COMPACT_OPS_NET = opsNet(6, 8, 3);
