// resume-checks.ts: exact resume (issue 31), shared by the CPU suite (test/resume.test.ts) and
// the CUDA suite (test/gpu/resume.gpu.test.ts). Each check trains an original and a copy that
// goes through save + Trainer.load part way, and compares every byte that training reads.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { Arena, planLayout, Trainer, type ArenaOptions, type LayoutSpec, type TrainerOptions } from '../../src/index.js';
import { toyData } from './train-checks.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-arena-resume-'));
let files = 0;
const file = () => join(dir, `r${files++}.nna`);

export interface ResumeCase {
  name: string;
  spec: LayoutSpec;
  trainer: TrainerOptions;
  /** The cardinalities of x's last columns where they are category indices (an embedding). */
  categorical?: readonly number[];
}

/** Non-default hyperparameters for every optimizer: a resume that fell back to a default
 *  would differ. */
export const RESUME_CASES: ResumeCase[] = [
  { name: 'sgd', spec: { layers: [6, 9, 4], batch: 5, optimizer: 'sgd', samples: 23 }, trainer: { lr: 0.07 } },
  { name: 'momentum', spec: { layers: [6, 9, 4], batch: 5, optimizer: 'momentum', samples: 23 }, trainer: { lr: 0.03, momentum: 0.7 } },
  { name: 'adam', spec: { layers: [6, 9, 4], batch: 5, optimizer: 'adam', samples: 23 }, trainer: { lr: 0.004, beta1: 0.8, beta2: 0.99, eps: 1e-6 } },
  {
    name: 'adam float64 mse',
    spec: { layers: [5, 7, 3], batch: 4, optimizer: 'adam', dtype: 'float64', samples: 17, activations: ['tanh', 'identity'] },
    trainer: { lr: 0.01, beta1: 0.85, loss: 'mse' },
  },
];

const KINDS = ['w', 'b', 'mw', 'mb', 'vw', 'vb', 'stats'] as const;

/** Every byte of the regions training reads (brought back from the device first). */
function state(t: Trainer): Buffer {
  t.syncToHost();
  const a = t.arena;
  return Buffer.concat(a.plan.regions.filter((r) => (KINDS as readonly string[]).includes(r.kind)).map((r) => Buffer.from(a.bytes(r.offset, r.bytes))));
}

function dataFor(c: ResumeCase) {
  const { layers, samples = 0, activations } = c.spec;
  const mse = (activations?.at(-1) ?? 'softmax') !== 'softmax';
  const d = toyData(layers[0]!, layers.at(-1)!, samples, 5, mse);
  const cards = c.categorical ?? [];
  const n = layers[0]!;
  for (let r = 0; r < samples; r++)
    cards.forEach((card, j) => {
      const i = r * n + n - cards.length + j;
      d.x[i] = Math.floor(Math.abs(d.x[i]!) * 1000) % card;
    });
  return d;
}

const batchOf = (d: ReturnType<typeof dataFor>, c: ResumeCase, i: number) => {
  const B = c.spec.batch,
    n = c.spec.layers[0]!,
    m = c.spec.layers.at(-1)!;
  const rows = (i * B) % (c.spec.samples! - B);
  return [
    d.x.subarray(rows * n, (rows + B) * n),
    d.labels ? { labels: d.labels.subarray(rows, rows + B) } : { y: d.y!.subarray(rows * m, (rows + B) * m) },
  ] as const;
};

/** step() k times, save, then N more steps on the original and on Trainer.load's copy. */
export async function checkStepResume(c: ResumeCase, options: ArenaOptions, k = 3, n = 4): Promise<void> {
  using arena = Arena.create(planLayout(c.spec), options);
  const t = new Trainer(arena, c.trainer);
  t.init(11);
  const d = dataFor(c);
  for (let i = 0; i < k; i++) await t.step(...batchOf(d, c, i));
  const p = file();
  t.save(p);
  await using r = Trainer.load(p, options);
  expect(r.steps).toBe(k);
  expect(state(r)).toEqual(state(t));
  for (let i = k; i < k + n; i++) {
    const [a, b] = [await t.step(...batchOf(d, c, i)), await r.step(...batchOf(d, c, i))];
    expect(b, `${c.name}: metrics of step ${i}`).toEqual(a);
  }
  expect(r.steps).toBe(t.steps);
  expect(state(r).equals(state(t)), `${c.name}: state after ${n} more steps`).toBe(true);
}

/** fit() stopped mid-epoch (onProgress throws after `stopAfter` reports), saved, loaded and
 *  resumed equals the same fit() run through; also resumed in place without a save. */
export async function checkFitResume(c: ResumeCase, options: ArenaOptions, stopAfter = 5): Promise<void> {
  const d = dataFor(c);
  const fit = { epochs: 3, seed: 4, reportsPerEpoch: 3 };
  const run = async (stop: boolean) => {
    const arena = Arena.create(planLayout(c.spec), options);
    const t = new Trainer(arena, c.trainer);
    t.init(2);
    let reports = 0;
    const progress: number[] = [];
    try {
      const res = await t.fit(d, {
        ...fit,
        onProgress: (q) => {
          progress.push(q.loss);
          if (stop && ++reports === stopAfter) throw new Error('stop');
        },
      });
      return { t, arena, res, progress };
    } catch (e) {
      expect((e as Error).message).toBe('stop');
      return { t, arena, res: undefined, progress };
    }
  };
  const whole = await run(false);
  const cut = await run(true);
  try {
    expect(cut.progress).toEqual(whole.progress.slice(0, stopAfter));
    const p = file();
    cut.t.save(p);
    // Resumed in place and resumed from the checkpoint: both finish as the whole run did.
    const inPlace = await cut.t.fit(d, { resume: true, onProgress: (q) => cut.progress.push(q.loss) });
    expect(cut.progress).toEqual(whole.progress);
    expect(inPlace.loss).toBe(whole.res!.loss);
    expect(state(cut.t).equals(state(whole.t)), `${c.name}: resumed in place`).toBe(true);
    await using r = Trainer.load(p, options);
    const later: number[] = [];
    const res = await r.fit(d, { resume: true, onProgress: (q) => later.push(q.loss) });
    expect(later).toEqual(whole.progress.slice(stopAfter));
    expect([res.loss, res.accuracy, r.steps]).toEqual([whole.res!.loss, whole.res!.accuracy, whole.t.steps]);
    expect(res.path).toBe(whole.res!.path);
    expect(state(r).equals(state(whole.t)), `${c.name}: resumed from the checkpoint`).toBe(true);
  } finally {
    whole.arena.dispose();
    cut.arena.dispose();
  }
}

/** forward + backward, save (the gradients wait for update()), load, update: as on the original. */
export async function checkPrimitivesResume(c: ResumeCase, options: ArenaOptions): Promise<void> {
  using arena = Arena.create(planLayout(c.spec), options);
  const t = new Trainer(arena, c.trainer);
  t.init(3);
  const d = dataFor(c);
  const [x, target] = batchOf(d, c, 1);
  await t.step(x, target);
  await t.forward(x);
  await t.backward(target);
  const p = file();
  t.save(p);
  await using r = Trainer.load(p, options);
  await t.update();
  await r.update();
  expect(state(r).equals(state(t)), `${c.name}: update after load`).toBe(true);
}
