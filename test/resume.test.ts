// resume.test.ts: issue 31, exact resume on the CPU (the same checks run on each CUDA path in
// test/gpu/resume.gpu.test.ts): a checkpoint holds every option, the step count, the fit
// position and the optimizer state, so Trainer.load then N steps is N more steps of the
// original, bit for bit. Trainer is disposable and owns what it loaded.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, inspectCheckpoint, planLayout, Trainer } from '../src/index.js';
import { checkFitResume, checkPrimitivesResume, checkStepResume, RESUME_CASES } from './support/resume-checks.js';
import { codeOf } from './support/errors.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-resume-cpu-'));

describe.each(RESUME_CASES)('$name: Trainer.load then N steps = N more steps of the original (CPU)', (c) => {
  it('step()', () => checkStepResume(c, cpu));
  it('fit() stopped mid-epoch, resumed in place and from the checkpoint', () => checkFitResume(c, cpu));
  it('forward + backward, save, load, update()', () => checkPrimitivesResume(c, cpu));
});

describe('what a Trainer checkpoint holds', () => {
  const spec = { layers: [6, 9, 4], batch: 5, optimizer: 'adam' as const, samples: 23 };

  it('the options as given, the resolved hyperparameters, the steps; no data set unless asked', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena, { lr: 0.004, beta2: 0.99 });
    t.init(1);
    const d = toyData(6, 4, 23, 1, false);
    await t.fit(d, { epochs: 1 });
    const p = join(dir, 'info.nna');
    t.save(p);
    const info = inspectCheckpoint(p);
    expect(info.data).toBe(false);
    expect(info.kinds).toEqual(['b', 'w', 'mw', 'mb', 'vw', 'vb', 'stats']);
    expect(info.steps).toBe(5);
    expect(info.metadata.trainer).toEqual({
      options: { lr: 0.004, beta2: 0.99 },
      unsaved: [],
      gradients: false,
      // The resolved entries of the arena's optimizer's table (adam: no momentum), clipping included.
      hyper: { lr: 0.004, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0, decayBiases: false, clipGradNorm: 0, loss: 'cross-entropy', precision: 'fp32' },
    });
    const withData = join(dir, 'data.nna');
    t.save(withData, { data: true, metadata: { run: 'a' } });
    const i2 = inspectCheckpoint(withData);
    expect([i2.data, i2.metadata.run]).toEqual([true, 'a']);
    expect(i2.payloadBytes - info.payloadBytes).toBe(arena.plan.bytesByKind().xdata! + arena.plan.bytesByKind().ydata!);
    // Options given to load override the saved ones; the rest come from the file.
    await using r = Trainer.load(p, cpu, { lr: 0.5 });
    r.save(join(dir, 'again.nna'));
    expect(inspectCheckpoint(join(dir, 'again.nna')).metadata.trainer).toMatchObject({ options: { lr: 0.5, beta2: 0.99 }, hyper: { lr: 0.5, beta2: 0.99 } });
  });

  it('an option that was not plain data must be given again; resume needs an interrupted fit on the same data', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    // A record naming an option whose value could not be saved (as a function-valued option would be).
    const p = join(dir, 'fn.nna');
    arena.save(p, { metadata: { trainer: { options: { beta2: 0.99 }, unsaved: ['lr'], hyper: {}, gradients: false } } });
    expect(codeOf(() => Trainer.load(p, cpu))).toBe('BAD_OPTION');
    expect(() => Trainer.load(p, cpu)).toThrow(/options\.lr/);
    {
      using again = Trainer.load(p, cpu, { lr: 0.01 });
      expect(again.steps).toBe(0);
    }
    const t = new Trainer(arena, { lr: 0.01 });
    t.init(1);
    const d = toyData(6, 4, 23, 1, false);
    await expect(t.fit(d, { resume: true })).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'resume' });
    await expect(
      t.fit(d, {
        epochs: 2,
        onProgress: () => {
          throw new Error('stop');
        },
      }),
    ).rejects.toThrow('stop');
    const other = toyData(6, 4, 23, 2, false);
    await expect(t.fit(other, { resume: true })).rejects.toMatchObject({ code: 'BAD_DATA', field: 'data' });
    await expect(t.fit(d, { resume: true, seed: 9 })).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'seed' });
    const res = await t.fit(d, { resume: true });
    expect(res.steps).toBe(5); // 2 epochs of 5 batches (one report each): the first done before the stop
    await expect(t.fit(d, { resume: true })).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'resume' }); // it finished
  });

  it('Trainer disposes what it loaded (dispose, Symbol.dispose, Symbol.asyncDispose), never an arena passed in', async () => {
    using arena = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(arena);
    t.init(1);
    t.dispose();
    expect(arena.disposed).toBe(false);
    const p = join(dir, 'own.nna');
    t.save(p);
    const a = Trainer.load(p, cpu);
    a.dispose();
    expect(a.arena.disposed).toBe(true);
    let b: Trainer;
    {
      using u = Trainer.load(p, cpu);
      b = u;
    }
    expect(b.arena.disposed).toBe(true);
    let c: Trainer;
    const d = toyData(6, 4, 23, 1, false);
    {
      await using u = Trainer.load(p, cpu);
      c = u;
      void u.fit(d, { epochs: 2 }); // still queued when the block ends: asyncDispose waits for it
    }
    expect(c.arena.disposed).toBe(true);
    expect(c.steps).toBe(10);
  });
});
