// ops-fixtures.ts: nn-arena trained like test/fixtures/gen_ops.py and gen_embedding.py train
// with PyTorch (the same start values, batches, AdamW with clipping, dropout seed), for the CPU
// test (test/ops.test.ts) and the CUDA one (test/gpu/ops.gpu.test.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { Arena, planLayout, Trainer, type ArenaOptions, type LayerSpec, type TrainerOptions } from '../../src/index.js';

export interface OpsParams {
  w: number[];
  b?: number[];
}
export interface OpsFixture {
  torch: string;
  spec: LayerSpec[];
  batch: number;
  steps: number;
  dropoutSeed: number;
  lr: number;
  weightDecay: number;
  clipGradNorm: number;
  start: Record<string, OpsParams>;
  after: Record<string, OpsParams>;
  x: number[];
  labels: number[];
  losses: number[];
  gradNorms: number[];
  xEval: number[];
  predict: number[];
}
const load = (file: string): OpsFixture => JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', file), 'utf8'));
/** test/fixtures/gen_ops.py's network: layernorm, dropout, residual and rmsnorm. */
export const OPS_FIXTURE = load('ops-torch.json');
/** test/fixtures/gen_embedding.py's network: an embedding of two categorical columns. */
export const EMBEDDING_FIXTURE = load('embedding-torch.json');
/** test/fixtures/gen_alpha_dropout.py's network: two alpha-dropout layers (nn.AlphaDropout). */
export const ALPHA_DROPOUT_FIXTURE = load('alpha-dropout-torch.json');

/** Every op in one network: an embedding (3 numeric columns, 1 categorical of 5 rows), layernorm,
 *  dropout, a residual across three layers, rmsnorm (the GPU tests of K models and of groups). */
export const EVERY_OP_NET: readonly LayerSpec[] = [
  4,
  { op: 'embedding', numeric: 3, categorical: [{ cardinality: 5, dim: 2 }] },
  { units: 16, activation: 'relu' },
  { op: 'layernorm' },
  { op: 'dropout', p: 0.3 },
  { units: 16 },
  { op: 'residual', from: 2 },
  { op: 'rmsnorm' },
  { units: 3, activation: 'softmax' },
];
/** `rows` rows of EVERY_OP_NET's x: sin(i * freq) in the numeric columns, a category index in [0, 5) in column 3. */
export const everyOpRows = (rows: number, freq: number): Float64Array =>
  Float64Array.from({ length: rows * 4 }, (_, i) => (i % 4 === 3 ? (i * 7) % 5 : Math.sin(i * freq)));

/** The largest |got - want| / (|want| + 1e-3). */
export function relErr(got: ArrayLike<number>, want: readonly number[]): number {
  expect(got.length).toBe(want.length);
  let e = 0;
  for (let i = 0; i < want.length; i++) e = Math.max(e, Math.abs(got[i]! - want[i]!) / (Math.abs(want[i]!) + 1e-3));
  return e;
}

export interface OpsRun {
  losses: number[];
  gradNorms: number[];
  params: Record<string, OpsParams>;
  predict: number[];
}

/** The fixture's 10 steps from its start values on `options`' backend, then predict of xEval. */
export async function trainOpsFixture(
  dtype: 'float32' | 'float64',
  options: ArenaOptions,
  extra: TrainerOptions = {},
  F: OpsFixture = OPS_FIXTURE,
  compact = false,
): Promise<OpsRun> {
  const arena = Arena.create(planLayout({ layers: F.spec, batch: F.batch, dtype, optimizer: 'adamw', compact }), options);
  try {
    const t = new Trainer(arena, { lr: F.lr, weightDecay: F.weightDecay, clipGradNorm: F.clipGradNorm, dropoutSeed: F.dropoutSeed, ...extra });
    for (const [l, p] of Object.entries(F.start)) {
      arena.view(Number(l), 'w').set(p.w);
      if (p.b) arena.view(Number(l), 'b').set(p.b);
    }
    t.markHostChanged();
    const cols = F.spec[0] as number,
      rows = F.batch;
    const losses: number[] = [],
      gradNorms: number[] = [];
    for (let s = 0; s < F.steps; s++) {
      const m = await t.step(F.x.slice(s * rows * cols, (s + 1) * rows * cols), { labels: F.labels.slice(s * rows, (s + 1) * rows) });
      losses.push(m.loss);
      gradNorms.push(t.gradNorms[0]!);
    }
    const predict = Array.from(await t.predict(F.xEval));
    arena.toHost({ kinds: ['w', 'b'] });
    const params = Object.fromEntries(
      Object.entries(F.after).map(([l, p]) => [
        l,
        { w: Array.from(arena.view(Number(l), 'w')), ...(p.b ? { b: Array.from(arena.view(Number(l), 'b')) } : {}) },
      ]),
    );
    return { losses, gradNorms, params, predict };
  } finally {
    arena.dispose();
  }
}

/** The largest relative error of a run against the fixture's PyTorch values: losses, norms, every parameter, predict. */
export function errorsVsTorch(r: OpsRun, F: OpsFixture = OPS_FIXTURE): { loss: number; norm: number; params: number; predict: number } {
  const rel = (a: number, b: number) => Math.abs(a - b) / Math.abs(b);
  let params = 0;
  for (const [l, p] of Object.entries(F.after)) {
    params = Math.max(params, relErr(r.params[l]!.w, p.w));
    if (p.b) params = Math.max(params, relErr(r.params[l]!.b!, p.b));
  }
  return {
    loss: Math.max(...r.losses.map((x, s) => rel(x, F.losses[s]!))),
    norm: Math.max(...r.gradNorms.map((x, s) => rel(x, F.gradNorms[s]!))),
    params,
    predict: relErr(r.predict, F.predict),
  };
}
