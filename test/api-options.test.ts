// api-options.test.ts: fit(data, { signal }), Symbol.asyncDispose, and option objects checked
// for unknown keys (the nearest valid name in the message).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, DataParallel, OptionError, planLayout, Trainer } from '../src/index.js';
import { ABORT_RUN_STEPS } from '../src/train/fit.js';
import { nearestName } from '../src/core/known-keys.js';

const cpu = { backend: 'cpu' } as const;
const spec = { layers: [4, 8, 3], batch: 4, samples: 400, optimizer: 'adam' } as const;

function data(n: number) {
  const x = new Float32Array(n * 4),
    labels = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    labels[i] = i % 3;
    for (let j = 0; j < 4; j++) x[i * 4 + j] = Math.sin(i * 7 + j * 3) + (j === labels[i] ? 1 : 0);
  }
  return { x, labels };
}

/** Caught error (sync or async). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tests read whatever fields the error carries
async function caught(f: () => unknown): Promise<any> {
  try {
    await f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

describe('fit(data, { signal })', () => {
  it('a signal that never fires changes nothing: the same weights, steps and metrics, bit for bit', async () => {
    const d = data(400); // 100 batches: with a signal, runs of at most ABORT_RUN_STEPS
    expect(100).toBeGreaterThan(ABORT_RUN_STEPS);
    const run = async (signal?: AbortSignal) => {
      const a = Arena.create(planLayout(spec), cpu);
      const t = new Trainer(a, { lr: 0.01 });
      t.init(5);
      const seen: number[] = [];
      const r = await t.fit(d, { epochs: 2, seed: 3, reportsPerEpoch: 2, onProgress: (p) => seen.push(p.loss), ...(signal ? { signal } : {}) });
      const w = [...a.view(1, 'w'), ...a.view(2, 'w'), ...a.view(2, 'b')];
      a.dispose();
      return { w, seen, loss: r.loss, steps: t.steps };
    };
    const plain = await run();
    const withSignal = await run(new AbortController().signal);
    expect(withSignal).toEqual(plain);
    expect(plain.steps).toBe(200);
  });

  it('aborting stops between runs: ABORTED (an AbortError), whole steps counted, weights back on the host, the arena usable', async () => {
    const a = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(a, { lr: 0.01 });
    t.init(5);
    const ac = new AbortController();
    const reason = new Error('user stop');
    const e = await caught(() =>
      t.fit(data(400), {
        epochs: 3,
        reportsPerEpoch: 4,
        onProgress: (p) => {
          if (p.epoch === 2 && p.batch === 50) ac.abort(reason);
        },
        signal: ac.signal,
      }),
    );
    expect(e).toBeInstanceOf(ArenaError);
    expect(e).toMatchObject({ code: 'ABORTED', name: 'AbortError', cause: reason });
    expect(t.steps).toBe(150); // 1.5 epochs of 100 batches
    // The host holds the device's weights: a download changes nothing.
    const host = [...a.view(1, 'w')];
    t.syncToHost();
    expect([...a.view(1, 'w')]).toEqual(host);
    // Nothing left queued; training goes on.
    await a.synchronize();
    const r = await t.fit(data(400), { epochs: 1 });
    expect(Number.isFinite(r.loss)).toBe(true);
    expect(t.steps).toBe(250);
    a.dispose();
  });

  it('an already aborted signal rejects before anything runs; a non-signal is an OptionError', async () => {
    const a = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(a);
    t.init(1);
    const before = a.stats.toDeviceTransfers;
    const e = await caught(() => t.fit(data(8), { epochs: 1, signal: AbortSignal.abort() }));
    expect(e).toMatchObject({ code: 'ABORTED', name: 'AbortError' });
    expect(t.steps).toBe(0);
    expect(a.stats.toDeviceTransfers).toBe(before); // the data never went up
    const bad = await caught(() => t.fit(data(8), { epochs: 1, signal: { aborted: false } as never }));
    expect(bad).toBeInstanceOf(OptionError);
    expect(bad).toMatchObject({ code: 'BAD_OPTION', field: 'signal' });
    a.dispose();
  });
});

describe('Symbol.asyncDispose', () => {
  it('Arena: waits for the runs queued, then frees both sides', async () => {
    const a = Arena.create(planLayout(spec), cpu);
    const t = new Trainer(a);
    t.init(1);
    const fit = t.fit(data(400), { epochs: 2 });
    await a[Symbol.asyncDispose]();
    expect(a.disposed).toBe(true);
    await expect(fit).resolves.toMatchObject({ steps: 200 }); // it ran to the end first
    expect(a.stats.hostFrees).toBe(1);
    await a[Symbol.asyncDispose](); // again: nothing
    expect(a.stats.hostFrees).toBe(1);
  });

  it('DataParallel: every replica', async () => {
    const g = DataParallel.create(planLayout(spec), { devices: [0], backend: 'cpu' });
    await g[Symbol.asyncDispose]();
    expect(g.disposed).toBe(true);
    expect(g.replicas.every((r) => r.disposed)).toBe(true);
  });
});

describe('unknown option keys', () => {
  const plan = planLayout({ layers: [2, 2], batch: 1 });
  const dir = mkdtempSync(join(tmpdir(), 'nn-arena-keys-'));

  it.each([
    ['planLayout', () => planLayout({ layers: [2, 2], batch: 1, optimiser: 'adam' } as never), 'optimiser', 'optimizer'],
    ['planLayout extra', () => planLayout({ layers: [2, 2], batch: 1, extra: [{ name: 'e', like: 'w', layer: [1] }] } as never), 'extra[0].layer', 'layers'],
    ['Arena.create', () => Arena.create(plan, { backnd: 'cpu' } as never), 'backnd', 'backend'],
    [
      'Trainer',
      () => {
        const a = Arena.create(plan, cpu);
        try {
          new Trainer(a, { learningRate: 0.1 } as never);
        } finally {
          a.dispose();
        }
      },
      'learningRate',
      'lr',
    ],
    [
      'Trainer',
      () => {
        const a = Arena.create(plan, cpu);
        try {
          new Trainer(a, { mometum: 0.5 } as never);
        } finally {
          a.dispose();
        }
      },
      'mometum',
      'momentum',
    ],
    [
      'fit',
      async () => {
        const a = Arena.create(plan, cpu);
        try {
          await new Trainer(a).fit({ x: [1, 2], labels: [0] }, { epochs: 1, epoch: 2 } as never);
        } finally {
          a.dispose();
        }
      },
      'epoch',
      'epochs',
    ],
    [
      'save',
      () => {
        const a = Arena.create(plan, cpu);
        try {
          a.save(join(dir, 'a.nna'), { kind: ['w'] } as never);
        } finally {
          a.dispose();
        }
      },
      'kind',
      'kinds',
    ],
    ['Arena.load', () => Arena.load(join(dir, 'none.nna'), { pined: true } as never), 'pined', 'pinned'],
    [
      'predict',
      async () => {
        const a = Arena.create(plan, cpu);
        try {
          await new Trainer(a).predict([1, 2], { modle: 0 } as never);
        } finally {
          a.dispose();
        }
      },
      'modle',
      'model',
    ],
    ['DataParallel.create', () => DataParallel.create(plan, { devices: [0], backend: 'cpu', device: 0 } as never), 'device', 'devices'],
  ])('%s: %s', async (what, f, field, near) => {
    const e = await caught(f);
    expect(e).toBeInstanceOf(OptionError);
    expect(e).toMatchObject({ code: 'UNKNOWN_OPTION', field });
    expect(e.message).toContain(`did you mean '${near}'?`);
  });

  it('names no near name when there is none, and lists the valid ones', async () => {
    const e = await caught(() => Arena.create(plan, { colour: 'blue' } as never));
    expect(e).toMatchObject({ code: 'UNKNOWN_OPTION', field: 'colour', value: 'colour' });
    expect(e.message).not.toContain('did you mean');
    expect(e.message).toContain('backend, memory, device, pinned, deviceBudget, residency');
  });

  it('nearestName: edits, transpositions, case, initials', () => {
    const v = ['lr', 'momentum', 'beta1', 'beta2', 'eps', 'loss', 'precision'];
    expect(nearestName('learning_rate', v)).toBe('lr');
    expect(nearestName('Momentum', v)).toBe('momentum');
    expect(nearestName('presicion', v)).toBe('precision');
    expect(nearestName('weightDecay', v)).toBeUndefined();
  });
});

describe('clipping with a device budget: refused by checkTarget, its one home (issue 50)', () => {
  it('a run that clips on a budgeted target is BAD_OPTION naming clipGradNorm; without the budget, or without clipping, it passes', async () => {
    const { call, native } = await import('../src/native/addon.js');
    const header = planLayout({ layers: [4, 3, 2], batch: 2 }).header;
    const run = { op: 0 as const, rows: 1, lr: 0.1, clipGradNorm: 1 };
    let err: unknown;
    try {
      call(() => native().checkRun(header, run, { cuda: true, budgeted: true }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OptionError);
    expect(err).toMatchObject({ code: 'BAD_OPTION', field: 'clipGradNorm' });
    expect(() => native().checkRun(header, run, { cuda: true, budgeted: false })).not.toThrow();
    expect(() => native().checkRun(header, { ...run, clipGradNorm: 0 }, { cuda: true, budgeted: true })).not.toThrow();
  });
});
