// models-checks.ts: an arena of K models against K one-model arenas trained alike (same seeds,
// learning rates, data and fit seed), region by region, byte for byte. Shared by the CPU suite
// (test/models.test.ts) and the GPU one (test/gpu/models.gpu.test.ts).
import { Arena, KINDS, planLayout, Trainer, type ArenaOptions, type LayoutSpec, type Metrics } from '../../src/index.js';
import { toyData } from './train-checks.js';

export interface ModelsCase {
  spec: LayoutSpec;
  lrs: number[];
  seeds: number[];
  epochs: number;
  /** Samples in the resident data set (<= spec.samples). */
  count: number;
}

export interface ModelsOutcome {
  /** Regions (layer, kind, model) whose bytes differ from the one-model arena's. */
  mismatches: string[];
  /** Per model: [K-model arena, alone] for the fit, a step and an evaluation. */
  fits: Array<[number, number]>;
  steps: Array<[number, number]>;
  evals: Array<[number, number]>;
  path: string;
  regionsCompared: number;
  /** Largest |multi - alone| / max(1, |alone|) over the weights and biases (0 when bit-identical). */
  maxRelWeights: number;
}

const bytesOf = (v: Float32Array | Float64Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.length), Buffer.from(b.buffer, b.byteOffset, b.length)) === 0;
}

/** Fit (resident data, shuffled), one step on a caller batch, an evaluation: the K-model arena
 *  and each model alone. */
export async function compareModels(c: ModelsCase, options: ArenaOptions): Promise<ModelsOutcome> {
  const K = c.lrs.length;
  const { layers } = c.spec;
  const mse = c.spec.activations !== undefined && c.spec.activations[c.spec.activations.length - 1] !== 'softmax';
  const d = toyData(layers[0]!, layers[layers.length - 1]!, c.count, 11, mse);
  const data = 'labels' in d ? { x: d.x, labels: d.labels! } : { x: d.x, y: d.y! };
  const batchRows = Math.min(c.spec.batch, c.count);
  const batch =
    'labels' in d
      ? { x: d.x.subarray(0, batchRows * layers[0]!), target: { labels: d.labels!.subarray(0, batchRows) } }
      : { x: d.x.subarray(0, batchRows * layers[0]!), target: { y: d.y!.subarray(0, batchRows * layers[layers.length - 1]!) } };

  const train = async (arena: Arena, t: Trainer) => {
    const fit = await t.fit(data, { epochs: c.epochs, seed: 5, reportsPerEpoch: 2 });
    const step = await t.step(batch.x, batch.target as never);
    const ev = await t.evaluate(data);
    t.syncToHost();
    return { fit, step, ev, arena };
  };

  const multi = Arena.create(planLayout({ ...c.spec, models: K }), options);
  const alone: Arena[] = [];
  try {
    const tm = new Trainer(multi, { lr: c.lrs });
    tm.init(c.seeds);
    const rm = await train(multi, tm);
    const per = (m: Metrics, k: number, f: 'losses' | 'accuracies') => (K === 1 ? (f === 'losses' ? m.loss : m.accuracy) : m[f]![k]!);
    const out: ModelsOutcome = { mismatches: [], fits: [], steps: [], evals: [], path: rm.fit.path, regionsCompared: 0, maxRelWeights: 0 };
    for (let m = 0; m < K; m++) {
      const a = Arena.create(planLayout(c.spec), options);
      alone.push(a);
      const t = new Trainer(a, { lr: c.lrs[m]! });
      t.init(c.seeds[m]!);
      const r = await train(a, t);
      out.fits.push([per(rm.fit, m, 'losses'), r.fit.loss]);
      out.steps.push([per(rm.step, m, 'losses'), r.step.loss]);
      out.evals.push([per(rm.ev, m, 'losses'), r.ev.loss]);
      for (let l = 0; l < layers.length; l++) {
        for (const k of KINDS) {
          if ((multi.plan.region(l, k)?.models ?? 1) === 1) continue; // absent, or one copy shared by every model
          out.regionsCompared++;
          if (!equalBytes(bytesOf(multi.view(l, k, m)), bytesOf(a.view(l, k)))) out.mismatches.push(`model ${m} layer ${l} ${k}`);
          if (k === 'w' || k === 'b') {
            const x = multi.view(l, k, m) as ArrayLike<number>,
              y = a.view(l, k) as ArrayLike<number>;
            for (let i = 0; i < y.length; i++) out.maxRelWeights = Math.max(out.maxRelWeights, Math.abs(x[i]! - y[i]!) / Math.max(1, Math.abs(y[i]!)));
          }
        }
      }
    }
    return out;
  } finally {
    multi.dispose();
    for (const a of alone) a.dispose();
  }
}
