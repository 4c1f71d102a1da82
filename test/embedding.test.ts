// The embedding op (layer 1: numeric columns, then one nn.Embedding per categorical column) on
// the CPU backend: 10 AdamW steps with clipping against PyTorch's own modules in float64 (the
// fixture of test/fixtures/gen_embedding.py), the plan and header it makes, the spec's and the
// validator's refusals, bad indices, the initial tables, exact resume and K models (export:
// test/export.test.ts).
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer, type LayerSpec } from '../src/index.js';
import { decodeSpec } from '../src/layout/decode.js';
import { EMBED_COL_FIELDS, EMBED_COL_SIZE, HEADER_SIZE, LAYER_FIELDS, LAYER_SIZE, OP_PARAM_FIELDS, OP_PARAM_SIZE } from '../src/layout/header.js';
import { native } from '../src/native/addon.js';
import { EMBEDDING_FIXTURE as F, errorsVsTorch, trainOpsFixture } from './support/ops-fixtures.js';
import { checkFitResume, checkStepResume, type ResumeCase } from './support/resume-checks.js';

const cpu = { backend: 'cpu' } as const;
const categorical = [
  { cardinality: 5, dim: 3 },
  { cardinality: 7, dim: 2 },
];
const spec: LayerSpec[] = [
  5,
  { op: 'embedding', numeric: 3, categorical },
  { units: 8, activation: 'relu' },
  { op: 'layernorm' },
  { units: 3, activation: 'softmax' },
];

describe(`embedding matches PyTorch ${F.torch} nn.Embedding (CPU)`, () => {
  it('float64: 10 AdamW steps with clipping, repeated and unused indices, every parameter to 1e-9', async () => {
    const e = errorsVsTorch(await trainOpsFixture('float64', cpu, {}, F), F);
    expect(e.loss, 'losses').toBeLessThan(1e-12);
    expect(e.norm, 'gradient norms').toBeLessThan(1e-12);
    expect(e.params, 'every parameter (the tables included)').toBeLessThan(1e-9);
    expect(e.predict, 'predict').toBeLessThan(1e-9);
  });

  it('float32 follows float64 within float32 rounding', async () => {
    const e = errorsVsTorch(await trainOpsFixture('float32', cpu, {}, F), F);
    expect(e.loss).toBeLessThan(1e-5);
    expect(e.params).toBeLessThan(1e-4);
  });

  it('a compact plan trains bit for bit as the full one (no clipping: a compact plan refuses it)', async () => {
    const [full, compact] = [
      await trainOpsFixture('float64', cpu, { clipGradNorm: 0 }, F),
      await trainOpsFixture('float64', cpu, { clipGradNorm: 0 }, F, true),
    ];
    expect(compact).toEqual(full);
    expect(planLayout({ layers: F.spec, batch: F.batch, optimizer: 'adamw', compact: true }).totalBytes).toBeLessThan(
      planLayout({ layers: F.spec, batch: F.batch, optimizer: 'adamw' }).totalBytes,
    );
  });
});

describe('the embedding layer', () => {
  it('plans its tables as w (with their gradient and optimizer state), no bias, numeric + dims wide', () => {
    const plan = planLayout({ layers: spec, batch: 4, optimizer: 'adamw' });
    expect(plan.spec.layers).toEqual([5, 8, 8, 8, 3]);
    expect(plan.spec.ops?.[0]).toEqual({ op: 'embedding', numeric: 3, categorical });
    for (const k of ['w', 'dw', 'mw', 'vw']) expect(plan.region(1, k)?.length, k).toBe(5 * 3 + 7 * 2);
    for (const k of ['b', 'db']) expect(plan.region(1, k)).toBeUndefined();
    expect(plan.region(1, 'z')?.length).toBe(4 * 8);
    expect(plan.region(0, 'z')?.length).toBe(4 * 5);
  });

  it('writes the column table after the op table, decodes it back, with user regions after it', () => {
    const plan = planLayout({ layers: spec, batch: 4, optimizer: 'adam', extra: [{ name: 'mine', like: 'w' }] });
    const v = new DataView(plan.header.buffer, plan.header.byteOffset);
    const table = HEADER_SIZE + 5 * LAYER_SIZE;
    expect(v.getUint32(table + OP_PARAM_SIZE + OP_PARAM_FIELDS.from, true)).toBe(3);
    expect(v.getUint32(table + OP_PARAM_SIZE + OP_PARAM_FIELDS.count, true)).toBe(2);
    const cols = table + 5 * OP_PARAM_SIZE;
    expect(v.getUint32(cols + EMBED_COL_SIZE + EMBED_COL_FIELDS.cardinality, true)).toBe(7);
    expect(v.getUint32(cols + EMBED_COL_SIZE + EMBED_COL_FIELDS.dim, true)).toBe(2);
    expect(plan.region(1, 'mine')?.length).toBe(29);
    const back = decodeSpec(plan.header);
    expect(typeof back).toBe('object');
    expect(planLayout(back as never).header).toEqual(plan.header);
    expect(planLayout(plan.spec).header).toEqual(plan.header);
  });

  it('the validator refuses a header whose embedding does not hold', () => {
    const plan = planLayout({ layers: spec, batch: 4 });
    const table = HEADER_SIZE + 5 * LAYER_SIZE,
      cols = table + 5 * OP_PARAM_SIZE;
    const why = (edit: (v: DataView) => void) => {
      const h = plan.header.slice();
      edit(new DataView(h.buffer));
      return native().validateHeader(h, plan.totalBytes);
    };
    expect(why(() => {})).toBe('');
    expect(why((v) => v.setUint32(cols + EMBED_COL_FIELDS.cardinality, 0, true))).toMatch(/column 0 has cardinality 0/);
    expect(why((v) => v.setUint32(cols + EMBED_COL_FIELDS.cardinality, 6, true))).toMatch(/layer 1 region w has count 29, its shape needs 32/);
    expect(why((v) => v.setUint32(cols + EMBED_COL_SIZE + EMBED_COL_FIELDS.dim, 3, true))).toMatch(/layer 1 \(embedding\) has 8 units, not .* \(9\)/);
    expect(why((v) => v.setUint32(table + OP_PARAM_SIZE + OP_PARAM_FIELDS.from, 2, true))).toMatch(/input layer has 5 units, not 2 numeric \+ 2/);
    expect(why((v) => v.setUint32(table + 3 * OP_PARAM_SIZE + OP_PARAM_FIELDS.count, 1, true))).toMatch(/layer 3 has a column count/);
    expect(why((v) => v.setUint32(HEADER_SIZE + 3 * LAYER_SIZE + LAYER_FIELDS.op, 5, true))).toMatch(/an embedding is layer 1/);
  });

  it('refuses what an embedding cannot be, naming the field', () => {
    const bad = (layers: unknown[], field: string) =>
      expect(() => planLayout({ layers: layers as LayerSpec[], batch: 2 })).toThrow(expect.objectContaining({ field }) as Error);
    const emb = (o: object) => ({ op: 'embedding', numeric: 3, categorical, ...o });
    bad([{ numeric: 3, categorical }, 8, 2], 'layers[0]');
    bad([5, 8, emb({}), 2], 'layers[2].op');
    bad([4, emb({}), 2], 'layers[1].numeric');
    bad([5, emb({ numeric: -1 }), 2], 'layers[1].numeric');
    bad([5, emb({ categorical: [] }), 2], 'layers[1].categorical');
    bad([4, emb({ categorical: [{ cardinality: 0, dim: 2 }] }), 2], 'layers[1].categorical[0].cardinality');
    bad([4, emb({ categorical: [{ cardinality: 2 ** 24 + 1, dim: 2 }] }), 2], 'layers[1].categorical[0].cardinality');
    bad([4, emb({ categorical: [{ cardinality: 3, dim: 1.5 }] }), 2], 'layers[1].categorical[0].dim');
    bad([4, emb({ categorical: [{ cardinality: 3, dim: 2, size: 1 }] }), 2], 'layers[1].categorical[0].size');
  });

  it('an index outside its table or not an integer gives NaN in its columns, never another row', async () => {
    using arena = Arena.create(planLayout({ layers: spec, batch: 4, dtype: 'float64' }), cpu);
    const t = new Trainer(arena, { lr: 0.01 });
    t.init(3);
    const row = (a: number, b: number) => [0.5, -1, 2, a, b];
    const out = await t.predict([...row(4, 6), ...row(5, 0), ...row(1.5, 0), ...row(-1, 0)]);
    expect(out.slice(0, 3).every(Number.isFinite)).toBe(true);
    for (let r = 1; r < 4; r++) expect(out.slice(r * 3, r * 3 + 3).every(Number.isNaN), `row ${r}`).toBe(true);
    await expect(t.step(row(7, 0), { labels: [1] })).rejects.toThrow(/category index/);
  });

  it('init draws the tables N(0, 1), as nn.Embedding', () => {
    using arena = Arena.create(planLayout({ layers: [2, { op: 'embedding', numeric: 1, categorical: [{ cardinality: 20000, dim: 10 }] }, 3], batch: 2 }), cpu);
    new Trainer(arena).init(5);
    const w = arena.view(1, 'w');
    const mean = w.reduce((a, v) => a + v, 0) / w.length;
    const sd = Math.sqrt(w.reduce((a, v) => a + (v - mean) ** 2, 0) / w.length);
    expect(Math.abs(mean)).toBeLessThan(0.01);
    expect(Math.abs(sd - 1)).toBeLessThan(0.01);
  });

  const resumeCase: ResumeCase = {
    name: 'adamw with an embedding',
    spec: {
      layers: [6, 11, 9, 9, 4],
      batch: 5,
      optimizer: 'adamw',
      samples: 23,
      activations: ['identity', 'relu', 'identity', 'softmax'],
      ops: [
        {
          op: 'embedding',
          numeric: 4,
          categorical: [
            { cardinality: 3, dim: 4 },
            { cardinality: 9, dim: 3 },
          ],
        },
        { op: 'dense' },
        { op: 'layernorm', eps: 1e-5 },
        { op: 'dense' },
      ],
    },
    trainer: { lr: 0.01, clipGradNorm: 1, weightDecay: 0.05 },
    categorical: [3, 9],
  };
  it('step(): save, load, N more steps = the straight run', () => checkStepResume(resumeCase, cpu));
  it('fit() stopped mid-epoch, resumed in place and from the checkpoint', () => checkFitResume(resumeCase, cpu));

  it('K models: each model trains as a one-model arena of it', async () => {
    const x = Float32Array.from({ length: 20 }, (_, i) => (i % 5 >= 3 ? (i * 7) % (i % 5 === 3 ? 5 : 7) : Math.sin(i)));
    const labels = [0, 2, 1, 2];
    const run = async (models: number, seed: number, m: number) => {
      using arena = Arena.create(planLayout({ layers: spec, batch: 4, optimizer: 'adam', models }), cpu);
      const t = new Trainer(arena, { lr: 0.01 });
      t.init(models === 1 ? seed : [seed + 1, seed]);
      for (let s = 0; s < 3; s++) await t.step(x, { labels });
      return Array.from(arena.view(1, 'w', m));
    };
    expect(await run(2, 4, 1)).toEqual(await run(1, 4, 0));
  });
});
