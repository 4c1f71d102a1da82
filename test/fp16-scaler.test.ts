// Dynamic loss scaling (precision 'fp16', csrc/train/loss_scale.h) against PyTorch's own
// torch.amp.GradScaler: test/fixtures/scaler-torch.json (test/fixtures/gen_scaler.py) holds, for
// each case below, GradScaler's get_scale() after every step, whether the step changed the
// parameter and the running count of skipped steps, from real scale / backward / step / update
// calls whose gradients are infinite exactly on the steps where nn-arena's own run overflows.
// Here each case trains a seeded fp16 Trainer on the CPU backend one step() at a time and checks
// (a) that its overflow pattern is still the one the fixture was made from (else: regenerate),
// (b) its lossScale after every step equals GradScaler's exactly, and its skippedSteps and
// skipped-or-applied steps equal PyTorch's. NN_ARENA_PRINT_SCALER_PATTERN=1 prints the cases'
// patterns as gen_scaler.py's CASES list.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Arena, Trainer, type LossScaleOptions } from '../src/index.js';
import { withArena } from './support/half-checks.js';
import { toyData } from './support/train-checks.js';

/** Rows of a learnable 20-input, 4-class set: the class is the largest of the first 4 inputs
 *  (as test/fp16-cpu.test.ts's). */
function classes(n: number, seed: number) {
  const d = toyData(20, 4, n, seed, false) as { x: Float64Array; labels: Uint8Array };
  d.labels = Uint8Array.from({ length: n }, (_, i) => [0, 1, 2, 3].reduce((m, j) => (d.x[i * 20 + j]! > d.x[i * 20 + m]! ? j : m), 0));
  return { x: Float32Array.from(d.x), labels: d.labels };
}

interface Setup {
  name: string;
  what: string;
  lossScale: Required<LossScaleOptions>;
  steps: number;
  /** Rows of step s's batch (at most 20): fewer rows, larger per-row errors (the mean's 1/rows). */
  rows: (s: number) => number;
}

const SETUPS: Setup[] = [
  {
    name: 'default-factors',
    what: 'x2 / x0.5 every 3 good steps from 2^24: four overflows in a row, then growth and backoff in turn',
    lossScale: { init: 2 ** 24, growthFactor: 2, backoffFactor: 0.5, growthInterval: 3 },
    steps: 30,
    rows: () => 20,
  },
  {
    name: 'growth4-backoff0.25',
    what: 'x4 / x0.25 every 3 good steps from 2^30: five overflows in a row, 2-row batches overflowing mid-run',
    lossScale: { init: 2 ** 30, growthFactor: 4, backoffFactor: 0.25, growthInterval: 3 },
    steps: 30,
    rows: (s) => ([9, 14, 15, 22].includes(s) ? 2 : 20),
  },
  {
    name: 'mid-run-overflows',
    what: 'x2 / x0.5 every 4 good steps from 2^18: batches of 1-3 rows overflow 1-3 good steps into a run',
    lossScale: { init: 2 ** 18, growthFactor: 2, backoffFactor: 0.5, growthInterval: 4 },
    steps: 36,
    rows: (s) => ([5, 6, 13, 19, 20, 27, 33].includes(s) ? 1 + (s % 3) : 20),
  },
  {
    name: 'float32-rounding',
    what: "x1.5 / x0.3 every 2 good steps from 2^24 + 3: the scale is a float32 (2^24 + 4), each move rounded to float32 as GradScaler's tensor",
    lossScale: { init: 2 ** 24 + 3, growthFactor: 1.5, backoffFactor: 0.3, growthInterval: 2 },
    steps: 30,
    rows: (s) => ([11, 17, 23].includes(s) ? 1 : 20),
  },
];

interface Run {
  overflow: boolean[];
  scale: number[];
  applied: boolean[];
  skipped: number[];
}

const params = (a: Arena) => [1, 2].flatMap((l) => [Float32Array.from(a.view(l, 'w')), Float32Array.from(a.view(l, 'b'))]);
const same = (a: Float32Array[], b: Float32Array[]) => a.every((v, i) => Buffer.compare(Buffer.from(v.buffer), Buffer.from(b[i]!.buffer)) === 0);

/** nn-arena's run of a setup: [20, 16, 4] tanh / softmax, seeded weights and batches. */
function train(c: Setup): Promise<Run> {
  return withArena([20, 16, 4], 20, ['tanh', 'softmax'], async (arena) => {
    const data = classes(20 * c.steps, 11);
    const t = new Trainer(arena, { lr: 0.1, precision: 'fp16', lossScale: c.lossScale });
    t.init(4);
    const run: Run = { overflow: [], scale: [], applied: [], skipped: [] };
    for (let s = 0; s < c.steps; s++) {
      const rows = c.rows(s),
        before = params(arena),
        skipped = t.skippedSteps;
      await t.step(data.x.subarray(s * 400, s * 400 + rows * 20), { labels: data.labels.subarray(s * 20, s * 20 + rows) });
      t.syncToHost();
      run.overflow.push(t.skippedSteps > skipped);
      run.scale.push(t.lossScale!);
      run.applied.push(!same(params(arena), before));
      run.skipped.push(t.skippedSteps);
    }
    return run;
  });
}

/** 'X' for a step whose scaled gradients overflowed (skipped), '.' for one applied: gen_scaler.py's form. */
const pattern = (overflow: boolean[]) => overflow.map((o) => (o ? 'X' : '.')).join('');

interface TorchCase extends Run {
  name: string;
  lossScale: Required<LossScaleOptions>;
}
interface ScalerFixture {
  torch: string;
  device: string;
  cases: TorchCase[];
}
const FIXTURE = join(__dirname, 'fixtures', 'scaler-torch.json');
const fixture: ScalerFixture | undefined = existsSync(FIXTURE) ? JSON.parse(readFileSync(FIXTURE, 'utf8')) : undefined;
const REGENERATE =
  'NN_ARENA_PRINT_SCALER_PATTERN=1 npx vitest run test/fp16-scaler.test.ts prints the patterns: paste them into CASES in test/fixtures/gen_scaler.py and run python3 test/fixtures/gen_scaler.py (torch >= 2.3)';
if (!fixture) console.warn(`test/fp16-scaler.test.ts: SKIPPED, ${FIXTURE} is absent; python3 test/fixtures/gen_scaler.py (torch >= 2.3) writes it`);

describe.skipIf(!fixture)(
  fixture
    ? `the loss scale moves as torch.amp.GradScaler's (torch ${fixture.torch}, ${fixture.device}), fp16 on the CPU backend`
    : 'the loss scale against torch.amp.GradScaler: skipped, test/fixtures/scaler-torch.json is absent',
  () => {
    const torchCase = (name: string) => fixture!.cases.find((t) => t.name === name);

    it('the fixture holds every case of this file, with its settings and one record a step', () => {
      expect(fixture!.cases.map((t) => t.name)).toEqual(SETUPS.map((c) => c.name));
      for (const c of SETUPS) {
        const t = torchCase(c.name)!;
        expect(t.lossScale, `${c.name}: the settings changed here: ${REGENERATE}`).toEqual(c.lossScale);
        for (const k of ['overflow', 'scale', 'applied', 'skipped'] as const) expect(t[k].length, `${c.name} ${k}`).toBe(c.steps);
      }
    });

    it.each(SETUPS.map((c) => [c.name, c.what, c] as const))(
      "%s (%s): the overflow pattern is the fixture's, the scale after every step equals GradScaler's",
      async (_n, _w, c) => {
        const want = torchCase(c.name)!;
        const got = await train(c);
        expect(pattern(got.overflow), `${c.name}: nn-arena no longer overflows on the steps the fixture was made from: ${REGENERATE}`).toBe(
          pattern(want.overflow),
        );
        expect(got.scale, `${c.name}: lossScale after each step`).toEqual(want.scale);
        expect(got.skipped, `${c.name}: skippedSteps after each step`).toEqual(want.skipped);
        expect(got.applied, `${c.name}: steps that changed the parameters`).toEqual(want.applied);
      },
    );

    it('the cases cover overflows in a row, growth, overflows with the growth tracker part way (reset), and other factors than 2 / 0.5', () => {
      // From PyTorch's records: the good steps since its scale last changed, when a step overflows.
      const trackersAtOverflow = fixture!.cases.flatMap((t) => {
        let good = 0,
          scale = t.lossScale.init;
        return t.overflow.flatMap((o, s) => {
          const at = o ? [good] : [];
          good = t.scale[s] !== scale ? 0 : good + (o ? 0 : 1);
          scale = t.scale[s]!;
          return at;
        });
      });
      expect(fixture!.cases.some((t) => /XXX/.test(pattern(t.overflow)))).toBe(true);
      expect(fixture!.cases.every((t) => t.scale.some((v, s) => v > (s ? t.scale[s - 1]! : t.lossScale.init)))).toBe(true);
      expect(trackersAtOverflow.filter((g) => g > 0).length).toBeGreaterThanOrEqual(3);
      expect(fixture!.cases.some((t) => t.lossScale.growthFactor !== 2 && t.lossScale.backoffFactor !== 0.5)).toBe(true);
    });
  },
);

if (process.env.NN_ARENA_PRINT_SCALER_PATTERN === '1') {
  it('prints the overflow patterns (CASES of test/fixtures/gen_scaler.py)', async () => {
    const lines: string[] = [];
    for (const c of SETUPS) {
      const l = c.lossScale;
      lines.push(
        `    {"name": "${c.name}", "lossScale": {"init": ${l.init}, "growthFactor": ${l.growthFactor}, "backoffFactor": ${l.backoffFactor}, "growthInterval": ${l.growthInterval}},\n     "overflow": "${pattern((await train(c)).overflow)}"},`,
      );
    }
    console.log(`CASES = [\n${lines.join('\n')}\n]`);
  });
}
