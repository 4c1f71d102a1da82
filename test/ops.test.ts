// The ops of the layer table (layernorm, rmsnorm, dropout, residual) on the CPU backend: every
// parameter after 10 AdamW steps with clipping against PyTorch's own modules in float64 (the
// fixtures of test/fixtures/gen_ops.py), the spec's checks and the header's round trip, and
// dropout's mask (its rate, its dependence on the seed and step only, predict without it).
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer, type LayerSpec } from '../src/index.js';
import { decodeSpec } from '../src/layout/decode.js';
import { HEADER_FIELDS, HEADER_SIZE, LAYER_FIELDS, LAYER_SIZE, OP_PARAM_FIELDS, OP_PARAM_SIZE } from '../src/layout/header.js';
import { native, OPS, PRECISIONS } from '../src/native/addon.js';
import { ALPHA_DROPOUT_FIXTURE, errorsVsTorch, OPS_FIXTURE, trainOpsFixture } from './support/ops-fixtures.js';
import { checkFitResume, checkStepResume, type ResumeCase } from './support/resume-checks.js';

const F = OPS_FIXTURE;
const cpu = { backend: 'cpu' } as const;

describe(`ops match PyTorch ${F.torch} (CPU, float64)`, () => {
  it('10 AdamW steps with clipping through layernorm, dropout, residual and rmsnorm', async () => {
    const e = errorsVsTorch(await trainOpsFixture('float64', cpu));
    expect(e.loss, 'losses').toBeLessThan(1e-12);
    expect(e.norm, 'gradient norms').toBeLessThan(1e-12);
    expect(e.params, 'every parameter').toBeLessThan(1e-9);
    expect(e.predict, 'predict (eval mode: no dropout)').toBeLessThan(1e-9);
  });

  it('float32 follows float64 within float32 rounding', async () => {
    const e = errorsVsTorch(await trainOpsFixture('float32', cpu));
    expect(e.loss).toBeLessThan(1e-4);
    expect(e.params).toBeLessThan(1e-3);
  });

  it(`alpha-dropout: 10 AdamW steps with clipping against nn.AlphaDropout's arithmetic (PyTorch ${ALPHA_DROPOUT_FIXTURE.torch}), eval mode the identity`, async () => {
    const e = errorsVsTorch(await trainOpsFixture('float64', cpu, {}, ALPHA_DROPOUT_FIXTURE), ALPHA_DROPOUT_FIXTURE);
    expect(e.loss, 'losses').toBeLessThan(1e-12);
    expect(e.norm, 'gradient norms').toBeLessThan(1e-12);
    expect(e.params, 'every parameter').toBeLessThan(1e-9);
    expect(e.predict, 'predict (eval mode: no dropout)').toBeLessThan(1e-9);
  });
});

describe('ops in the layer table', () => {
  const spec = [
    4,
    { units: 6, activation: 'relu' },
    { op: 'layernorm' },
    { op: 'dropout', p: 0.5 },
    { units: 6 },
    { op: 'residual', from: 1 },
    { op: 'rmsnorm' },
    { units: 2, activation: 'softmax' },
  ] as LayerSpec[];

  it('plans the regions each op has: a norm its gain (and bias), dropout and residual none', () => {
    const plan = planLayout({ layers: spec, batch: 3, optimizer: 'adam' });
    expect(plan.spec.layers).toEqual([4, 6, 6, 6, 6, 6, 6, 2]);
    expect(plan.spec.activations).toEqual(['relu', 'identity', 'identity', 'identity', 'identity', 'identity', 'softmax']);
    expect(plan.spec.ops?.map((o) => o.op)).toEqual(['dense', 'layernorm', 'dropout', 'dense', 'residual', 'rmsnorm', 'dense']);
    expect(plan.region(2, 'w')?.length).toBe(6);
    expect(plan.region(2, 'b')?.length).toBe(6);
    expect(plan.region(2, 'vw')?.length).toBe(6);
    expect(plan.region(6, 'w')?.length).toBe(6);
    expect(plan.region(6, 'b')).toBeUndefined();
    for (const l of [3, 5]) for (const k of ['w', 'b', 'dw', 'mw']) expect(plan.region(l, k)).toBeUndefined();
    expect(plan.region(3, 'z')?.length).toBe(18);
    expect(plan.region(5, 'd')?.length).toBe(18);
    // eps defaults: nn.LayerNorm's 1e-5, nn.RMSNorm's machine epsilon of the dtype
    expect(plan.spec.ops?.[1]).toEqual({ op: 'layernorm', eps: 1e-5 });
    expect(plan.spec.ops?.[5]).toEqual({ op: 'rmsnorm', eps: 2 ** -23 });
    expect(planLayout({ layers: spec, batch: 3, dtype: 'float64' }).spec.ops?.[5]).toEqual({ op: 'rmsnorm', eps: 2 ** -52 });
  });

  it('writes version 3 with an op table, decodes it back, and keeps version 2 for dense networks', () => {
    const plan = planLayout({ layers: spec, batch: 3, optimizer: 'adam', extra: [{ name: 'mine', like: 'z' }] });
    const version = (h: Uint8Array) => new DataView(h.buffer, h.byteOffset).getUint32(4, true);
    expect(version(plan.header)).toBe(3);
    expect(version(planLayout({ layers: [4, 6, 2], batch: 3 }).header)).toBe(2);
    const back = decodeSpec(plan.header);
    expect(typeof back).toBe('object');
    expect(planLayout(back as never).header).toEqual(plan.header);
    // the normalized form (numeric layers, activations, ops) is a spec again
    expect(planLayout(plan.spec).header).toEqual(plan.header);
  });

  it("alpha-dropout goes by the table's param column: no regions, its p checked by the spec and the validator, the step in parts refused", async () => {
    const layers = [4, { units: 6, activation: 'tanh' }, { op: 'alpha-dropout', p: 0.2 }, { units: 2, activation: 'softmax' }] as LayerSpec[];
    const plan = planLayout({ layers, batch: 3 });
    for (const k of ['w', 'b', 'dw', 'mw']) expect(plan.region(2, k)).toBeUndefined();
    expect(plan.spec.ops?.[1]).toEqual({ op: 'alpha-dropout', p: 0.2 });
    expect(planLayout(decodeSpec(plan.header) as never).header).toEqual(plan.header);
    expect(() => planLayout({ layers: [4, 6, { op: 'alpha-dropout', p: 1 }, 2], batch: 3 })).toThrow(
      expect.objectContaining({ field: 'layers[2].p' }) as Error,
    );
    const h = plan.header.slice();
    new DataView(h.buffer).setFloat64(HEADER_SIZE + 4 * LAYER_SIZE + 2 * OP_PARAM_SIZE + OP_PARAM_FIELDS.value, 1.5, true);
    expect(native().validateHeader(h, plan.totalBytes)).toMatch(/layer 2 \(alpha-dropout\) has p 1.5/);
    using arena = Arena.create(plan, cpu);
    const t = new Trainer(arena, {});
    t.init(1);
    await t.forward(new Float32Array(12));
    await expect(t.backward({ labels: [0, 1, 0] })).rejects.toMatchObject({
      code: 'NOT_SUPPORTED',
      message: expect.stringContaining('alpha-dropout') as string,
    });
  });

  it('the validator refuses a header whose ops do not hold', () => {
    const plan = planLayout({ layers: spec, batch: 3 });
    const table = HEADER_SIZE + plan.spec.layers.length * LAYER_SIZE;
    const why = (edit: (v: DataView) => void) => {
      const h = plan.header.slice();
      edit(new DataView(h.buffer));
      return native().validateHeader(h, plan.totalBytes);
    };
    expect(why(() => {})).toBe('');
    expect(why((v) => v.setUint32(HEADER_FIELDS.version, 2, true))).toMatch(/version-2 header with ops/);
    expect(why((v) => v.setFloat64(table + 3 * OP_PARAM_SIZE + OP_PARAM_FIELDS.value, 1.5, true))).toMatch(/layer 3 \(dropout\) has p 1.5/);
    expect(why((v) => v.setUint32(table + 5 * OP_PARAM_SIZE + OP_PARAM_FIELDS.from, 4, true))).toMatch(/layer 5 \(residual\) adds layer 4/);
    expect(why((v) => v.setFloat64(table + 2 * OP_PARAM_SIZE + OP_PARAM_FIELDS.value, -1, true))).toMatch(/layer 2 \(layernorm\) has eps/);
    expect(why((v) => v.setUint32(HEADER_SIZE + 4 * LAYER_SIZE + LAYER_FIELDS.op, 9, true))).toMatch(/layer 4 has unknown op 9/);
    expect(why((v) => v.setUint32(HEADER_SIZE + 7 * LAYER_SIZE + LAYER_FIELDS.op, 3, true))).toMatch(/output layer are dense/);
    expect(why((v) => v.setBigUint64(HEADER_FIELDS.ops_offset, 0n, true))).toMatch(/ops_offset 0/);
  });

  it('refuses what the ops cannot be, naming the field', () => {
    const bad = (layers: unknown[], field: string) =>
      expect(() => planLayout({ layers: layers as LayerSpec[], batch: 2 })).toThrow(expect.objectContaining({ field }) as Error);
    bad([{ units: 4 }, 6, 2], 'layers[0]');
    bad([4, 6, { op: 'layernorm' }], 'layers[2].op');
    bad([4, 6, { op: 'dropout', p: 1 }, 2], 'layers[2].p');
    bad([4, 6, { op: 'dropout' }, 2], 'layers[2].p');
    bad([4, 6, { op: 'layernorm', eps: 0 }, 2], 'layers[2].eps');
    bad([4, 6, { op: 'residual', from: 1 }, 2], 'layers[2].from');
    bad([4, 6, 5, { op: 'residual', from: 1 }, 2], 'layers[3].from');
    bad([4, 6, { op: 'swish' }, 2], 'layers[2].op');
    bad([4, 6, { op: 'layernorm', p: 0.1 }, 2], 'layers[2].p');
    expect(() => planLayout({ layers: spec, batch: 2, activations: ['relu'] } as never)).toThrow(expect.objectContaining({ field: 'activations' }) as Error);
  });

  it('dropout keeps 1 - p of the units, by the seed and the step only; predict drops nothing', async () => {
    const p = 0.3,
      n = 1000,
      rows = 1000,
      inputs = 8;
    const layers: LayerSpec[] = [inputs, { units: n, activation: 'identity' }, { op: 'dropout', p }, { units: 1, activation: 'identity' }];
    const x = new Float32Array(rows * inputs).map((_, i) => ((i * 7919) % 13) - 6.5);
    const y = new Float32Array(rows);
    // a step, then which of the 10^6 units the dropout layer kept (checking the kept ones' scale)
    const step = async (t: Trainer<'float32'>, arena: Arena<'float32'>) => {
      await t.step(x, { y });
      arena.toHost({ kinds: ['z'] });
      const z1 = arena.view(1, 'z'),
        z2 = arena.view(2, 'z');
      const mask = new Uint8Array(z1.length);
      let worst = 0;
      for (let i = 0; i < z1.length; i++) {
        if (z2[i] === 0) continue;
        mask[i] = 1;
        worst = Math.max(worst, Math.abs(z2[i]! - z1[i]! / (1 - p)) / Math.abs(z1[i]!));
      }
      expect(worst).toBeLessThan(1e-6);
      return mask;
    };
    const rate = (m: Uint8Array) => 1 - m.reduce((a, v) => a + v, 0) / m.length;
    const same = (a: Uint8Array, b: Uint8Array) => a.every((v, i) => v === b[i]);
    const make = () => {
      const arena = Arena.create(planLayout({ layers, batch: rows, optimizer: 'sgd' }), cpu);
      const t = new Trainer(arena, { lr: 1e-12, loss: 'mse', dropoutSeed: 7 });
      t.init(1);
      return { arena, t };
    };
    const one = make(),
      two = make();
    try {
      const a = await step(one.t, one.arena);
      expect(Math.abs(rate(a) - p) / p).toBeLessThan(0.01); // 10^6 units: within 1% of p
      const b = await step(one.t, one.arena); // the next step: another mask
      expect(same(a, b)).toBe(false);
      expect(same(await step(two.t, two.arena), a)).toBe(true); // the same seed and step elsewhere: the same mask
      await one.t.predict(x.subarray(0, inputs));
      one.arena.toHost({ kinds: ['z'] });
      expect(Array.from(one.arena.view(2, 'z').subarray(0, n))).toEqual(Array.from(one.arena.view(1, 'z').subarray(0, n)));
    } finally {
      one.arena.dispose();
      two.arena.dispose();
    }
  });

  it('refuses the step in parts with dropout, with a typed error; every CUDA run takes the ops', async () => {
    const arena = Arena.create(planLayout({ layers: spec, batch: 3 }), cpu);
    try {
      const t = new Trainer(arena, { loss: 'cross-entropy' });
      t.init(1);
      await t.forward(new Float32Array(12));
      await expect(t.backward({ labels: [0, 1, 0] })).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
      // what a Trainer on a CUDA arena asks at construction (check.cc checkTarget): every
      // precision, K models, a data-parallel group and a device budget run there
      const header = arena.plan.header;
      for (const precision of [PRECISIONS.tf32, PRECISIONS.bf16])
        native().checkRun(header, { op: OPS.train, rows: 3, precision }, { cuda: true, budgeted: false });
      native().checkRun(header, { op: OPS.train, rows: 3 }, { cuda: true, budgeted: true });
      native().checkGroup(header);
      native().checkRun(planLayout({ layers: spec, batch: 3, models: 2 }).header, { op: OPS.train, rows: 3 }, { cuda: true, budgeted: false });
    } finally {
      arena.dispose();
    }
  });
});

describe('ops with the rest of the CPU backend', () => {
  const resumeCase: ResumeCase = {
    name: 'adamw with every op',
    spec: {
      layers: [6, 9, 9, 9, 9, 9, 4],
      batch: 5,
      optimizer: 'adamw',
      samples: 23,
      activations: ['relu', 'identity', 'identity', 'identity', 'identity', 'softmax'],
      ops: [
        { op: 'dense' },
        { op: 'layernorm', eps: 1e-5 },
        { op: 'dropout', p: 0.2 },
        { op: 'residual', from: 1 },
        { op: 'rmsnorm', eps: 1e-6 },
        { op: 'dense' },
      ],
    },
    trainer: { lr: 0.01, dropoutSeed: 3, clipGradNorm: 1 },
  };
  it('step(): save, load, N more steps = the straight run (dropout included)', () => checkStepResume(resumeCase, cpu));
  it('fit() stopped mid-epoch, resumed in place and from the checkpoint', () => checkFitResume(resumeCase, cpu));

  it('K models: each model trains as a one-model arena of it', async () => {
    const spec = {
      layers: [4, { units: 6, activation: 'gelu' }, { op: 'rmsnorm' }, { op: 'dropout', p: 0.3 }, { units: 3, activation: 'softmax' }] as LayerSpec[],
      batch: 4,
      optimizer: 'adam' as const,
    };
    const x = Float32Array.from({ length: 16 }, (_, i) => Math.sin(i));
    const labels = [0, 2, 1, 2];
    const run = async (models: number, seed: number, m: number) => {
      using arena = Arena.create(planLayout({ ...spec, models }), cpu);
      const t = new Trainer(arena, { lr: 0.01, dropoutSeed: 9 });
      t.init(models === 1 ? seed : [seed + 1, seed].slice(0, models));
      for (let s = 0; s < 3; s++) await t.step(x, { labels });
      arena.toHost({ kinds: ['w'] });
      return [1, 2, 4].flatMap((l) => Array.from(arena.view(l, 'w', m)));
    };
    expect(await run(2, 5, 1)).toEqual(await run(1, 5, 0));
  });
});
