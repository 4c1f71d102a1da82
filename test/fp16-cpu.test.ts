// fp16-cpu.test.ts: precision 'fp16' on the CPU backend, emulated (csrc/cpu/gemm_driver.h
// roundPanel), with dynamic loss scaling (csrc/train/loss_scale.h, PyTorch's GradScaler rule): the
// products read fp16 roundings of their operands (range included: beyond 65504 an operand is
// infinite) and sum in fp32; the loss's gradient is scaled, a step whose scaled gradients
// overflow is skipped with the scale backed off, and the scale grows after enough good steps.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Arena, OptionError, planLayout, Trainer } from '../src/index.js';
import { runArena } from '../src/arena/arena.js';
import { call, native, OPS, PRECISIONS } from '../src/native/addon.js';
import { checkResumeWithScaler, checkScaleMoves, injectedOverflow } from './support/fp16-checks.js';
import { checkHalfProducts, fp16, passThrough, withArena } from './support/half-checks.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-arena-fp16-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("precision 'fp16' on the CPU backend (emulated)", () => {
  it('an operand is rounded to fp16 before the product: ties to even, 65504 the largest, subnormals from 2^-24', () =>
    withArena([1, 1], 10, ['identity'], async (arena) => {
      const t = passThrough(arena, 'fp16');
      const x = [1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11), 65504, 65519.99, 65520, -70000, 2 ** -25, 3 * 2 ** -25, 2 ** -24];
      const want = [1, 1 + 2 ** -9, -1, 65504, 65504, Infinity, -Infinity, 0, 2 ** -23, 2 ** -24];
      expect(x.map(fp16)).toEqual(want); // the test's own rounding, by arithmetic
      expect(Array.from(await t.forward(Float32Array.from(x)))).toEqual(want.map(Math.fround));
    }));

  it('4,096 values from 2^-30 to 2^17, both signs: the rounding the products read is the arithmetic one', () =>
    withArena([1, 1], 4096, ['identity'], async (arena) => {
      const t = passThrough(arena, 'fp16');
      let s = 12345;
      const rnd = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
      const x = Float32Array.from({ length: 4096 }, (_, i) => (i % 2 ? -1 : 1) * (1 + rnd()) * 2 ** Math.floor(-30 + rnd() * 47));
      const got = Array.from(await t.forward(x)),
        want = Array.from(x, fp16);
      expect(got).toEqual(want.map((v) => Math.fround(v) + 0)); // + the bias 0: a -0 comes out +0
      expect(got.filter((v) => !Number.isFinite(v)).length).toBeGreaterThan(0); // some past 65504
      expect(got.filter((v) => v !== 0 && Math.abs(v) < 2 ** -14).length).toBeGreaterThan(0); // some subnormal
    }));

  it('forward, error and weight-gradient products read rounded operands (the scaled errors) and sum in fp32', () => checkHalfProducts('cpu', 'fp16'));

  it('the scale: halved with each step whose scaled gradients overflow (skipped: the weights stay), doubled after growthInterval good steps', () =>
    checkScaleMoves('cpu'));

  it('recovers from an injected overflow: the step is skipped, then training goes on near fp32', async () => {
    // (The fp32 run takes the injected step as an ordinary one.)
    const [a, b] = [await injectedOverflow('fp32', 'cpu'), await injectedOverflow('fp16', 'cpu')];
    expect(b.accuracy).toBeGreaterThan(0.85);
    expect(Math.abs(b.loss - a.loss)).toBeLessThan(0.1 * a.loss + 0.01);
  });

  it('exact resume: the loss scale, its growth tracker and the skipped steps are in the checkpoint', () => checkResumeWithScaler('cpu'));

  it('nn-arena train --precision fp16 trains MNIST near fp32; its --report charts the loss scale, one point per report', () => {
    const file = join(dir, 'fp16.html');
    const r = spawnSync(process.execPath, ['dist/cli.js', 'train', '--backend', 'cpu', '--precision', 'fp16', '--epochs', '2', '--report', file, '--json'], {
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { accuracy: number };
    expect(out.accuracy).toBeGreaterThan(0.9);
    const html = readFileSync(file, 'utf8');
    const chart = html.slice(html.indexOf('id="loss-scale-chart"'));
    expect(html).toContain('loss scale (fp16)');
    expect((chart.slice(0, chart.indexOf('</svg>')).match(/class="c-pt"/g) ?? []).length).toBe(8); // 4 reports an epoch
  }, 60_000);

  it('typed refusals: lossScale without fp16, bad settings, the step in parts, a device budget, compact plans, K models, float64', async () => {
    await withArena([4, 3], 2, ['softmax'], async (arena) => {
      const bad = (o: object, code: string, field: string) => {
        let err: unknown;
        try {
          new Trainer(arena, o);
        } catch (e) {
          err = e;
        }
        expect(err, JSON.stringify(o)).toBeInstanceOf(OptionError);
        expect(err).toMatchObject({ code, field });
      };
      bad({ lossScale: { init: 8 } }, 'BAD_OPTION', 'lossScale');
      bad({ precision: 'bf16', lossScale: {} }, 'BAD_OPTION', 'lossScale');
      bad({ precision: 'fp16', lossScale: { init: 0 } }, 'BAD_OPTION', 'lossScale.init');
      bad({ precision: 'fp16', lossScale: { init: Infinity } }, 'BAD_OPTION', 'lossScale.init');
      bad({ precision: 'fp16', lossScale: { growthFactor: 0.5 } }, 'BAD_OPTION', 'lossScale.growthFactor');
      bad({ precision: 'fp16', lossScale: { backoffFactor: 1.5 } }, 'BAD_OPTION', 'lossScale.backoffFactor');
      bad({ precision: 'fp16', lossScale: { growthInterval: 2.5 } }, 'BAD_OPTION', 'lossScale.growthInterval');
      bad({ precision: 'fp16', lossScale: { inti: 8 } }, 'UNKNOWN_OPTION', 'lossScale.inti');
      bad({ precision: 'fp16', lossScale: 8 }, 'BAD_OPTION', 'lossScale');
      const t = new Trainer(arena, { precision: 'fp16' });
      t.init(1);
      const x = Float32Array.from([1, 2, 3, 4, 4, 3, 2, 1]),
        labels = [0, 2];
      const parts = { code: 'NOT_SUPPORTED', message: expect.stringContaining("precision 'fp16' scales the loss inside step() and fit()") };
      await expect(t.gradients(x, { labels })).rejects.toMatchObject(parts);
      await t.forward(x); // forward runs (inference) are fine
      await expect(t.backward({ labels })).rejects.toMatchObject(parts);
      await expect(t.step(x, { labels })).resolves.toBeDefined();
      expect(new Trainer(arena).lossScale).toBeUndefined();
    });
    const header = planLayout({ layers: [4, 3], batch: 2 }).header;
    const check = (target: { cuda: boolean; budgeted: boolean }) => {
      try {
        call(() => native().checkRun(header, { op: OPS.train, rows: 1, loss: 0, precision: PRECISIONS.fp16, lossScale: 65536 }, target));
        return undefined;
      } catch (e) {
        return e;
      }
    };
    expect(check({ cuda: false, budgeted: false })).toBeUndefined();
    expect(check({ cuda: true, budgeted: false })).toBeUndefined(); // CUDA: test/gpu/fp16.gpu.test.ts
    // Its fp16 copies are a workspace beside the arena, which a device budget does not allow for.
    expect(check({ cuda: true, budgeted: true })).toMatchObject({ code: 'BAD_OPTION', field: 'precision', message: expect.stringContaining('deviceBudget') });
    // A compact arena (an SGD one has no dw; dw and db share bytes with later phases) cannot
    // hold the step's gradients until they are known finite (this was a SIGSEGV).
    for (const optimizer of ['sgd', 'adam'] as const) {
      const compact = Arena.create(planLayout({ layers: [12, 16, 3], batch: 8, samples: 40, compact: true, optimizer }), { backend: 'cpu' });
      try {
        expect(() => new Trainer(compact, { precision: 'fp16' })).toThrow(
          expect.objectContaining({ code: 'NOT_SUPPORTED', message: expect.stringContaining('plan it without compact') }),
        );
        await expect(runArena(compact, { op: OPS.train, rows: 1, loss: 0, precision: PRECISIONS.fp16, lossScale: 65536 })).rejects.toMatchObject({
          code: 'NOT_SUPPORTED',
        });
      } finally {
        compact.dispose();
      }
    }
    // K models: one loss scale per run (its state is one model's): 'fp16' trains one model.
    const k = Arena.create(planLayout({ layers: [4, 3], batch: 2, models: 2 }), { backend: 'cpu' });
    try {
      await expect(runArena(k, { op: OPS.train, rows: 1, loss: 0, precision: PRECISIONS.fp16, lossScale: 65536 })).rejects.toMatchObject({
        code: 'NOT_SUPPORTED',
        message: expect.stringContaining("precision 'fp16' trains one model"),
      });
    } finally {
      k.dispose();
    }
    const f64 = Arena.create(planLayout({ layers: [4, 3], batch: 2, dtype: 'float64' }), { backend: 'cpu' });
    try {
      expect(() => new Trainer(f64, { precision: 'fp16' })).toThrow(expect.objectContaining({ code: 'BAD_OPTION', field: 'precision' }));
    } finally {
      f64.dispose();
    }
  });
});
