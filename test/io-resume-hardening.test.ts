// io-resume-hardening.test.ts: issue 51, nothing hangs and nothing is silently wrong. A crafted
// checkpoint's fit position is range-checked (BAD_CHECKPOINT naming the field) instead of
// resuming for ever, skipping an epoch or reporting a NaN loss; metrics() after update() gives
// the backward's loss and accuracy (step()'s); toData refuses a dtype it does not write; and
// the io functions refuse null, plain objects, plans and numbers with typed errors naming the
// argument.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, inspectCheckpoint, NnArenaError, planLayout, Trainer } from '../src/index.js';
import { loadSafetensors, toData, toNpy, toOnnx, toSafetensors, type RowTable } from '../src/io.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-io-resume-'));

/** The typed error `f` throws: its class, code and field (undefined when it does not throw). */
function refusal(f: () => unknown): { name: string; code: string; field?: string; message: string } | undefined {
  try {
    f();
  } catch (e) {
    expect(e, String(e)).toBeInstanceOf(NnArenaError);
    const { name, code, field, message } = e as NnArenaError & { field?: string };
    return { name, code, field, message };
  }
  return undefined;
}

// ---- the fit position of a checkpoint --------------------------------------------------------
describe('a crafted fit position is refused, never a long run or a skipped epoch', () => {
  // 23 samples in batches of 5: 5 batches an epoch; 3 reports an epoch, a stop after the first.
  const spec = { layers: [6, 9, 4], batch: 5, optimizer: 'adam' as const, samples: 23 };
  const d = toyData(6, 4, 23, 1, false);

  /** A Trainer checkpoint of a fit stopped mid-epoch, and its trainer record. */
  async function interrupted(): Promise<{ arena: Arena; record: Record<string, unknown> & { fit: Record<string, unknown> } }> {
    const arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena, { lr: 0.01 });
    t.init(1);
    await expect(
      t.fit(d, {
        epochs: 3,
        reportsPerEpoch: 3,
        onProgress: () => {
          throw new Error('stop');
        },
      }),
    ).rejects.toThrow('stop');
    const p = join(dir, 'stopped.nna');
    t.save(p);
    const record = inspectCheckpoint(p).metadata.trainer as Record<string, unknown> & { fit: Record<string, unknown> };
    expect(record.fit).toMatchObject({ epochs: 3, epoch: 1, next: 2, count: 23, diverged: [false] });
    return { arena, record };
  }

  /** The checkpoint again, its fit position's fields replaced by `fit`. */
  function crafted(arena: Arena, record: Record<string, unknown> & { fit: Record<string, unknown> }, name: string, fit: Record<string, unknown>): string {
    const p = join(dir, `${name}.nna`);
    arena.save(p, { metadata: { trainer: { ...record, fit: { ...record.fit, ...fit } } } });
    return p;
  }

  it('on load: epochs 2^40, next 1e9, an order that is no permutation; each names its field', async () => {
    const { arena, record } = await interrupted();
    try {
      for (const [field, fit] of [
        ['epochs', { epochs: 2 ** 40 }],
        ['next', { next: 1e9 }],
        ['perm', { perm: { a: 23, c: 0 } }], // every position maps to row 0
        ['perm', { perm: { a: 1, c: 1e6 } }],
      ] as const) {
        const p = crafted(arena, record, `load-${field}`, fit);
        const e = refusal(() => Trainer.load(p, cpu));
        expect(e, `${field} ${JSON.stringify(fit)}`).toMatchObject({ name: 'ArenaError', code: 'BAD_CHECKPOINT' });
        expect(e!.message).toContain(`fit.${field}`);
      }
      // The position as saved loads and resumes to the end of the 3 epochs.
      await using r = Trainer.load(crafted(arena, record, 'as-saved', {}), cpu);
      const res = await r.fit(d, { resume: true });
      expect(res.steps).toBe(3 * 5 - 2);
      expect(Number.isFinite(res.loss)).toBe(true);
    } finally {
      arena.dispose();
    }
  });

  it('on resume: 100,000 diverged flags on one model, a diverged one model, next past the epoch, count past the samples', async () => {
    const { arena, record } = await interrupted();
    try {
      for (const [field, fit] of [
        ['diverged', { diverged: Array<boolean>(100_000).fill(true) }],
        ['diverged', { diverged: [true] }],
        ['next', { next: 6 }], // the epoch has 5 batches: the rest of it would be skipped
        ['count', { count: 1000, perm: { a: 1, c: 0 } }],
      ] as const) {
        await using r = Trainer.load(crafted(arena, record, `resume-${field}`, fit), cpu);
        const steps = r.steps;
        const e = await r.fit(d, { resume: true }).then(
          () => undefined,
          (x: unknown) => x as NnArenaError,
        );
        expect(e, `${field} ${JSON.stringify(fit).slice(0, 60)}`).toBeInstanceOf(NnArenaError);
        expect(e).toMatchObject({ name: 'ArenaError', code: 'BAD_CHECKPOINT' });
        expect(e!.message).toContain(field);
        expect(r.steps).toBe(steps); // nothing ran
      }
    } finally {
      arena.dispose();
    }
  });
});

// ---- metrics() after the primitives ----------------------------------------------------------
describe('metrics() after forward / backward / update', () => {
  for (const target of ['labels', 'y'] as const) {
    it(`is the backward's loss and accuracy, which step() reports on the same weights (${target})`, async () => {
      const spec =
        target === 'labels'
          ? { layers: [6, 8, 4], batch: 8, optimizer: 'adam' as const }
          : { layers: [6, 8, 4], batch: 8, optimizer: 'momentum' as const, activations: ['tanh', 'identity'] as const };
      using a = Arena.create(planLayout(spec as never), cpu);
      using b = Arena.create(planLayout(spec as never), cpu);
      const [t, s] = [new Trainer(a, target === 'y' ? { loss: 'mse' } : {}), new Trainer(b, target === 'y' ? { loss: 'mse' } : {})];
      t.init(3);
      s.init(3);
      const data = toyData(6, 4, 16, 2, target === 'y');
      for (let i = 0; i < 2; i++) {
        const x = data.x.subarray(i * 48, i * 48 + 48);
        const tg = target === 'labels' ? { labels: data.labels!.subarray(i * 8, i * 8 + 8) } : { y: data.y!.subarray(i * 32, i * 32 + 32) };
        const stepped = await s.step(x, tg);
        await t.forward(x);
        await t.backward(tg);
        expect(await t.metrics(), `step ${i}: after backward`).toEqual(stepped);
        await t.update();
        const m = await t.metrics();
        expect(m, `step ${i}: after update`).toEqual(stepped);
        expect(Number.isFinite(m.loss) && Number.isFinite(m.accuracy)).toBe(true);
      }
      // The parameters, the optimizer state and the stats region: the same bytes as step()'s.
      const state = (tr: Trainer, arena: Arena) => {
        tr.syncToHost();
        return Buffer.concat(
          arena.plan.regions
            .filter((r) => ['w', 'b', 'mw', 'mb', 'vw', 'vb', 'stats'].includes(r.kind))
            .map((r) => Buffer.from(arena.bytes(r.offset, r.bytes))),
        );
      };
      expect(state(t, a).equals(state(s, b))).toBe(true);
    });
  }

  it("a backward({ dOutput }) and its update() leave the last built-in loss's figures in place", async () => {
    using arena = Arena.create(planLayout({ layers: [6, 8, 4], batch: 8 }), cpu);
    const t = new Trainer(arena);
    t.init(5);
    const { x, labels } = toyData(6, 4, 8, 3, false);
    await t.forward(x);
    await t.backward({ labels: labels! });
    const m = await t.metrics();
    await t.update();
    await t.forward(x);
    await t.backward({ dOutput: new Float32Array(32).fill(0.01) });
    await t.update();
    expect(await t.metrics()).toEqual(m);
    expect(Number.isFinite(m.loss)).toBe(true);
  });
});

// ---- toData ----------------------------------------------------------------------------------
describe('toData refuses what it cannot do', () => {
  const table: RowTable = { columns: ['a', 'b', 'c'], rows: 2, data: Float32Array.of(1, 2, 0, 3, 4, 1) };

  it('a dtype other than float32 / float64: OptionError BAD_OPTION naming dtype', () => {
    expect(refusal(() => toData(table, { labels: 'c', dtype: 'int8' as never }))).toMatchObject({ name: 'OptionError', code: 'BAD_OPTION', field: 'dtype' });
    expect(toData(table, { labels: 'c', dtype: 'float64' }).x).toBeInstanceOf(Float64Array);
  });

  it('a null table, columns that are no array, labels among the inputs: typed, naming the argument', () => {
    expect(refusal(() => toData(null as never, { labels: 'c' }))).toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'table' });
    expect(refusal(() => toData({ ...table, columns: 'abc' as never }, { labels: 'c' }))).toMatchObject({
      name: 'DataError',
      code: 'BAD_DATA',
      field: 'table.columns',
    });
    expect(refusal(() => toData(table, { labels: 'c', x: ['a', 'c'] }))).toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'x[1]' });
    expect(refusal(() => toData(table, { labels: 'c', x: 'a' as never }))).toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'x' });
    // More rows than the data holds would read NaN for the missing ones.
    expect(refusal(() => toData({ ...table, rows: 3 }, { labels: 'c' }))).toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'table.data' });
    expect(toData(table, { labels: 'c', x: ['b', 'a'] })).toMatchObject({ x: Float32Array.of(2, 1, 4, 3), labels: Float64Array.of(0, 1), inputs: 2 });
  });
});

// ---- untyped errors --------------------------------------------------------------------------
describe('io arguments of the wrong kind: typed errors naming the argument', () => {
  it('toNpy(undefined | null), toNpy(array, 4)', () => {
    expect(refusal(() => toNpy(undefined as never))).toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'data' });
    expect(refusal(() => toNpy(null as never))).toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'data' });
    expect(refusal(() => toNpy(new Float32Array(4), 4 as never))).toMatchObject({ name: 'DataError', code: 'BAD_DATA', field: 'shape' });
    expect(toNpy(new Float32Array(4), [2, 2]).length).toBe(128 + 16);
  });

  it('toSafetensors, toOnnx, loadSafetensors given null, {}, a plan or a number', () => {
    const plan = planLayout({ layers: [3, 4, 2], batch: 2 });
    using arena = Arena.create(plan, cpu);
    const bytes = toSafetensors(arena);
    for (const v of [null, {}, plan, 5]) {
      for (const [name, f] of [
        ['toSafetensors', () => toSafetensors(v as never)],
        ['toOnnx', () => toOnnx(v as never)],
        ['loadSafetensors', () => loadSafetensors(v as never, bytes)],
      ] as const) {
        const e = refusal(f);
        expect(e, `${name}(${v === plan ? 'plan' : JSON.stringify(v)})`).toMatchObject({ name: 'OptionError', code: 'BAD_OPTION', field: 'arena' });
        expect(e!.message.length).toBeLessThan(200); // an object is named by its kind, not spelled out
      }
    }
    loadSafetensors(arena, bytes); // the arena itself is fine
  });
});

describe('issue 51: options that were taken silently', () => {
  it('lossScale: [] is refused, and learningRate() takes only a step and a model of this arena', () => {
    using arena = Arena.create(planLayout({ layers: [4, 3, 2], batch: 2 }), { backend: 'cpu' });
    expect(() => new Trainer(arena, { precision: 'fp16', lossScale: [] as never })).toThrow(
      expect.objectContaining({ code: 'BAD_OPTION', field: 'lossScale' }),
    );
    const t = new Trainer(arena, { lr: 0.1, schedule: { type: 'cosine', total: 10 } });
    expect(t.learningRate(0)).toBeCloseTo(0.1, 12);
    expect(t.learningRate()).toBe(t.learningRate(0));
    for (const [args, field] of [
      [[-1], 'step'],
      [['2'], 'step'],
      [[1.5], 'step'],
      [[0, 1], 'model'],
      [[0, -1], 'model'],
    ] as const) {
      expect(() => t.learningRate(...(args as unknown as [number, number]))).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field }));
    }
  });
});
