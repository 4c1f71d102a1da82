// The `precision` option off the GPU: it is checked when the Trainer is made (a typed
// OptionError naming `precision`), the CPU backend refuses the TF32 modes natively too (a run
// that bypasses the Trainer), 'fp32' is today's behaviour, and 'bf16' the CPU emulates
// (test/bf16-cpu.test.ts). The GPU side: test/gpu/precision.gpu.test.ts.
import { describe, expect, it } from 'vitest';
import { Arena, OptionError, planLayout, Trainer, type LayoutSpec } from '../src/index.js';
import { runArena } from '../src/arena/arena.js';
import { call, native, OPS, PRECISIONS } from '../src/native/addon.js';
import { toyData } from './support/train-checks.js';

const spec = (dtype: 'float32' | 'float64' = 'float32'): LayoutSpec => ({ layers: [6, 8, 3], batch: 4, dtype, activations: ['tanh', 'softmax'] });

function withArena<R>(dtype: 'float32' | 'float64', f: (a: Arena) => R): R {
  const arena = Arena.create(planLayout(spec(dtype)), { backend: 'cpu' });
  try {
    return f(arena);
  } finally {
    arena.dispose();
  }
}

describe('Trainer precision option', () => {
  it("defaults to 'fp32'; 'fp32' given explicitly trains bit-identically", async () => {
    const { x, labels } = toyData(6, 3, 4, 1, false);
    const weights = [];
    for (const options of [{}, { precision: 'fp32' as const }]) {
      const arena = Arena.create(planLayout(spec()), { backend: 'cpu' });
      try {
        const t = new Trainer(arena, options);
        expect(t.precision).toBe('fp32');
        t.init(4);
        const start = Float32Array.from(arena.view(1, 'w'));
        await t.step(x, { labels: labels! });
        await t.step(x, { labels: labels! });
        t.syncToHost();
        weights.push(Float32Array.from(arena.view(1, 'w')));
        expect(weights.at(-1)).not.toEqual(start);
      } finally {
        arena.dispose();
      }
    }
    expect(weights[0]).toEqual(weights[1]);
  });

  it.each([['TF32'], ['fp8'], [1], [null], [{}], ['']])('refuses %j with BAD_OPTION naming precision', (bad) => {
    withArena('float32', (a) => {
      let err: unknown;
      try {
        new Trainer(a, { precision: bad as never });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(OptionError);
      expect(err).toMatchObject({ code: 'BAD_OPTION', field: 'precision', value: bad });
      expect((err as Error).message).toContain("'tf32x3', 'bf16'");
    });
  });

  it.each([['tf32'], ['tf32x3']])('%s on the CPU backend is a typed error (the CPU computes in fp32 and emulates only bf16)', (mode) => {
    withArena('float32', (a) => {
      expect(() => new Trainer(a, { precision: mode as 'tf32' })).toThrow(OptionError);
      expect(() => new Trainer(a, { precision: mode as 'tf32' })).toThrow(
        "needs the CUDA backend (a GPU with TF32 tensor cores); the CPU backend computes in fp32 (and emulates 'bf16' and 'fp16')",
      );
    });
  });

  it("'bf16' on the CPU backend is accepted (emulated)", () => {
    withArena('float32', (a) => {
      expect(new Trainer(a, { precision: 'bf16' }).precision).toBe('bf16');
    });
  });

  it('a float64 arena refuses the TF32 modes (they apply to float32 products)', () => {
    withArena('float64', (a) => {
      expect(() => new Trainer(a, { precision: 'tf32x3' })).toThrow(
        expect.objectContaining({ code: 'BAD_OPTION', field: 'precision', message: expect.stringContaining('float32') }),
      );
      expect(() => new Trainer(a, { precision: 'bf16' })).toThrow(
        expect.objectContaining({ code: 'BAD_OPTION', field: 'precision', message: expect.stringContaining('float32') }),
      );
      expect(new Trainer(a, { precision: 'fp32' }).precision).toBe('fp32');
    });
  });
});

describe('precision in the run contract (native checks)', () => {
  it('what a precision needs of its target is one native rule (checkTarget): the CPU, then a workspace under a budget', () => {
    const header = planLayout(spec()).header;
    const check = (precision: (typeof PRECISIONS)[keyof typeof PRECISIONS], target: { cuda: boolean; budgeted: boolean }) => {
      try {
        call(() => native().checkRun(header, { op: OPS.train, rows: 1, loss: 0, precision }, target));
        return undefined;
      } catch (e) {
        return e;
      }
    };
    expect(check(PRECISIONS.tf32, { cuda: false, budgeted: false })).toMatchObject({
      code: 'BAD_OPTION',
      field: 'precision',
      message: expect.stringContaining('needs the CUDA backend (a GPU with TF32 tensor cores)'),
    });
    expect(check(PRECISIONS.bf16, { cuda: false, budgeted: false })).toBeUndefined(); // emulated
    expect(check(PRECISIONS.tf32x3, { cuda: true, budgeted: true })).toMatchObject({
      code: 'BAD_OPTION',
      field: 'precision',
      message: expect.stringContaining('needs a device workspace beside the arena'),
    });
    expect(check(PRECISIONS.bf16, { cuda: true, budgeted: true })).toMatchObject({
      code: 'BAD_OPTION',
      field: 'precision',
      message: expect.stringContaining('needs a device workspace beside the arena'),
    });
    // tf32 takes no workspace, so a budget allows it; fp32 runs anywhere.
    expect(check(PRECISIONS.tf32, { cuda: true, budgeted: true })).toBeUndefined();
    expect(check(PRECISIONS.fp32, { cuda: false, budgeted: true })).toBeUndefined();
  });

  it('the CPU backend refuses a TF32 run natively, before touching the arena', async () => {
    const arena = Arena.create(planLayout(spec()), { backend: 'cpu' });
    try {
      arena.view(1, 'w').fill(0.5);
      const before = Float32Array.from(arena.view(2, 'w').fill(0.5));
      arena.view(0, 'z').fill(1); // one row that trains: input ones, class 0
      arena.view(2, 'y').set([1, 0, 0]);
      arena.toDevice();
      for (const precision of [PRECISIONS.tf32, PRECISIONS.tf32x3]) {
        const run = runArena(arena, { op: OPS.train, rows: 1, loss: 0, precision });
        await expect(run).rejects.toBeInstanceOf(OptionError);
        await expect(runArena(arena, { op: OPS.train, rows: 1, loss: 0, precision })).rejects.toMatchObject({
          code: 'BAD_OPTION',
          field: 'precision',
          message: expect.stringContaining('CUDA backend'),
        });
      }
      arena.toHost();
      expect(arena.view(2, 'w')).toEqual(before);
      await expect(runArena(arena, { op: OPS.train, rows: 1, loss: 0, precision: PRECISIONS.fp32 })).resolves.toBe('cpu');
      arena.toHost();
      expect(arena.view(2, 'w')).not.toEqual(before); // the fp32 run did train
    } finally {
      arena.dispose();
    }
  });

  it('an unknown precision code is BAD_ARGUMENT; a float64 arena with a TF32 code is BAD_OPTION', async () => {
    const f32 = Arena.create(planLayout(spec()), { backend: 'cpu' });
    const f64 = Arena.create(planLayout(spec('float64')), { backend: 'cpu' });
    try {
      await expect(runArena(f32, { op: OPS.eval, rows: 1, loss: 0, precision: 9 as never })).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringContaining('precision 9'),
      });
      await expect(runArena(f64, { op: OPS.eval, rows: 1, loss: 0, precision: PRECISIONS.tf32 })).rejects.toMatchObject({
        code: 'BAD_OPTION',
        field: 'precision',
        message: expect.stringContaining('float64'),
      });
    } finally {
      f32.dispose();
      f64.dispose();
    }
  });
});
