// Optimizer options read from the native tables: refusals before any work (typed, naming the
// field), the refused combinations of docs/optimizers.md, clipping through fit's progress and
// through the step in parts, and the CLI's flags.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer, type TrainerOptions } from '../src/index.js';
import { optimizers, schedules } from '../src/tools.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;
const spec = { layers: [6, 8, 3], batch: 10, samples: 40 };

/** The refusal's code and what it names: the field (OptionError), or the option in the
 *  message (ArenaError NOT_SUPPORTED, which has no field). */
function refusal(optimizer: string, o: TrainerOptions, compact = false): { code: string; field: string } {
  using arena = Arena.create(planLayout({ ...spec, optimizer, compact }), cpu);
  try {
    new Trainer(arena, o);
  } catch (e) {
    const { code, field, message } = e as { code: string; field?: string; message: string };
    return { code, field: field ?? (message.includes('clipping') && message.includes('compact') ? 'clipGradNorm' : message) };
  }
  return { code: 'none', field: '' };
}

describe('optimizer options from the native tables', () => {
  it('the tables name every optimizer and schedule, and docs/optimizers.md shows each', () => {
    const doc = readFileSync(join(__dirname, '..', 'docs', 'optimizers.md'), 'utf8');
    expect(optimizers().map((o) => o.name)).toEqual(['sgd', 'momentum', 'adam', 'adamw']);
    for (const o of optimizers()) expect(doc).toContain(`| \`${o.name}\` |`);
    for (const s of schedules()) expect(doc).toContain(`| \`${s.name}\` |`);
    expect(
      optimizers()
        .find((o) => o.name === 'adamw')!
        .hypers.find((h) => h.name === 'weightDecay')!.default,
    ).toBe(0.01);
  });

  it.each([
    ['sgd', { nesterov: true }, 'BAD_OPTION', 'nesterov'],
    ['adam', { momentum: 0.9 }, 'BAD_OPTION', 'momentum'],
    ['adamw', { weightDecay: -0.1 }, 'BAD_OPTION', 'weightDecay'],
    ['momentum', { nesterov: 1 as never }, 'BAD_OPTION', 'nesterov'],
    ['adamw', { clipGradNorm: -1 }, 'BAD_OPTION', 'clipGradNorm'],
    ['adamw', { schedule: { type: 'linear' } }, 'BAD_OPTION', 'schedule.type'],
    ['adamw', { schedule: { type: 'cosine', total: 10, gamma: 2 } }, 'BAD_OPTION', 'schedule.gamma'],
    ['adamw', { schedule: { type: 'cosine', total: 10, warmup: 10 } }, 'BAD_OPTION', 'schedule.warmup'],
    ['adamw', { schedule: { type: 'step', stepSize: 1.5 } }, 'BAD_OPTION', 'schedule.stepSize'],
    ['adamw', { schedule: { type: 'one-cycle', total: 3, pctStart: 0.3 } }, 'BAD_OPTION', 'schedule.pctStart'],
    ['adam', { clipGradNorm: 1 }, 'NOT_SUPPORTED', 'clipGradNorm', true],
    ['sgd', { clipGradNorm: 1 }, 'NOT_SUPPORTED', 'clipGradNorm', true],
  ] as Array<[string, object, string, string, boolean?]>)('%s with %j: %s naming %s', (optimizer, o, code, field, compact) => {
    expect(refusal(optimizer, o as TrainerOptions, compact === true)).toEqual({ code, field });
  });

  it('a run past a one-cycle schedule is refused, as PyTorch refuses it', async () => {
    using arena = Arena.create(planLayout({ ...spec, optimizer: 'adam' }), cpu);
    const t = new Trainer(arena, { schedule: { type: 'one-cycle', total: 8 } });
    t.init(1);
    const d = toyData(6, 3, 40, 2, false);
    await t.fit({ x: d.x, labels: d.labels! }, { epochs: 2 }); // 8 steps: the whole cycle
    expect(t.learningRate(7)).toBeCloseTo(0.001 / 25 / 1e4, 15);
    await expect(t.fit({ x: d.x, labels: d.labels! }, { epochs: 1 })).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'schedule.total' });
  });

  it("fit reports each step's norm and the learning rate; the step in parts clips as step() does (bits)", async () => {
    const d = toyData(6, 3, 40, 3, false);
    const o: TrainerOptions = { lr: 0.01, weightDecay: 0.05, clipGradNorm: 0.25, schedule: { type: 'cosine', total: 12, warmup: 4 } };
    const reports: Array<{ lr: number; gradNorms?: number[] }> = [];
    using a = Arena.create(planLayout({ ...spec, optimizer: 'adamw' }), cpu);
    const t = new Trainer(a, o);
    t.init(4);
    await t.fit({ x: d.x, labels: d.labels! }, { epochs: 2, shuffle: false, reportsPerEpoch: 2, onProgress: (p) => reports.push(p) });
    expect(reports.map((r) => r.gradNorms!.length)).toEqual([2, 2, 2, 2]);
    expect(reports.map((r) => r.lr)).toEqual([1, 3, 5, 7].map((s) => t.learningRate(s)));
    const norms = reports.flatMap((r) => r.gradNorms!);
    // The same steps one at a time, and as forward / backward / update: the same norms and bits.
    for (const way of ['step', 'parts'] as const) {
      using b = Arena.create(planLayout({ ...spec, optimizer: 'adamw' }), cpu);
      const u = new Trainer(b, o);
      u.init(4);
      const seen: number[] = [];
      for (let s = 0; s < 8; s++) {
        const first = (s % 4) * 10;
        const x = d.x.subarray(first * 6, (first + 10) * 6),
          labels = d.labels!.subarray(first, first + 10);
        if (way === 'step') await u.step(x, { labels });
        else {
          await u.forward(x);
          await u.backward({ labels });
          await u.update();
        }
        seen.push(...u.gradNorms);
      }
      expect(seen).toEqual(norms);
      a.toHost();
      b.toHost();
      expect(Buffer.from(b.view(1, 'w').buffer, b.view(1, 'w').byteOffset, b.view(1, 'w').byteLength)).toEqual(
        Buffer.from(a.view(1, 'w').buffer, a.view(1, 'w').byteOffset, a.view(1, 'w').byteLength),
      );
    }
    expect(Math.max(...norms)).toBeGreaterThan(0.25); // the clip did act
  });
});

describe('CLI optimizer flags, checked before any work', () => {
  const cli = (...args: string[]) => spawnSync(process.execPath, ['dist/cli.js', 'train', '--backend', 'cpu', ...args], { encoding: 'utf8' });
  it.each([
    [['--optimizer', 'adamw', '--clip', '-1'], /BAD_OPTION.*clipGradNorm|clipGradNorm/],
    [['--optimizer', 'adam', '--nesterov'], /nesterov/],
    [['--optimizer', 'adamw', '--schedule', 'cosine', '--warmup', '100000'], /schedule\.warmup/],
    [['--optimizer', 'lion'], /lion/],
    [['--optimizer', 'adamw', '--warmup', '100'], /--warmup: applies to --schedule cosine, not 'constant'/],
    [['--schedule', 'cosine', '--gamma', '0.5'], /--gamma: applies to --schedule step, not 'cosine'/],
    [['--schedule', 'cosine', '--warmup', 'x'], /--warmup: 'x' is not a number/],
  ])('%j', (args, message) => {
    const r = cli(...args);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe(''); // nothing trained or printed
  });
});
