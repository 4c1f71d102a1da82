// Report and helper functions under bad input (issue 27): typed errors naming the field, never a
// raw TypeError; a 200k-point report; two transfer recorders on one arena; validation gaps.
import { describe, expect, it } from 'vitest';
import { Arena, NnArenaError, planLayout, selectRanges, Trainer } from '../src/index.js';
import {
  arenaBytesByStage,
  arenaSpans,
  bf16CopyBytes,
  estimatePytorchMemory,
  loadMnist,
  machineInfo,
  planToSVG,
  recordTransfers,
  trainingReportHtml,
  type TrainingReport,
} from '../src/tools.js';

const cpu = { backend: 'cpu' } as const;
const plan = planLayout({ layers: [4, 8, 3], batch: 2, samples: 4 });
const NOT_PLANS = [null, undefined, 5, 'plan', {}, [], { regions: 5 }, { header: new Uint8Array(8) }];

/** The nn-arena error f throws: its class name, code and field. */
function typed(f: () => unknown): { name: string; code: string; field?: string } {
  try {
    f();
  } catch (e) {
    expect(e, String(e)).toBeInstanceOf(NnArenaError);
    const err = e as NnArenaError & { field?: string };
    return { name: err.name, code: err.code, field: err.field };
  }
  throw new Error('did not throw');
}

function report(over: Partial<TrainingReport> = {}): TrainingReport {
  return {
    plan,
    settings: { lr: 0.1 },
    machine: machineInfo(),
    backend: 'cpu',
    path: 'cpu',
    progress: [],
    test: null,
    train: { loss: 1, accuracy: 0.5, seconds: 1, samplesPerSecond: 4 },
    seconds: 1,
    transfers: [],
    createdAt: new Date(0),
    ...over,
  };
}

describe('functions that take a plan: LayoutError BAD_PLAN', () => {
  const fns = { planToSVG, arenaSpans, arenaBytesByStage, bf16CopyBytes, selectRanges, 'Arena.create': (p: never) => Arena.create(p, cpu) } as Record<
    string,
    (p: never) => unknown
  >;
  for (const [name, f] of Object.entries(fns)) {
    it(name, () => {
      for (const p of NOT_PLANS)
        expect(
          typed(() => f(p as never)),
          `${name}(${String(p)})`,
        ).toMatchObject({ name: 'LayoutError', code: 'BAD_PLAN', field: 'plan' });
    });
  }
});

describe('options and reports', () => {
  it('planToSVG, estimatePytorchMemory and loadMnist refuse options that are not objects', () => {
    for (const o of [null, 5, 'x']) {
      expect(typed(() => planToSVG(plan, o as never))).toMatchObject({ code: 'BAD_OPTION', field: 'options' });
      expect(typed(() => estimatePytorchMemory(plan.spec, o as never))).toMatchObject({ code: 'BAD_OPTION', field: 'options' });
      expect(typed(() => loadMnist(o as never))).toMatchObject({ code: 'BAD_OPTION', field: 'options' });
    }
    for (const s of NOT_PLANS) expect(['LayoutError', 'OptionError']).toContain(typed(() => estimatePytorchMemory(s as never)).name);
  });

  it('trainingReportHtml names the bad field of a report', () => {
    expect(typed(() => trainingReportHtml(null as never))).toMatchObject({ code: 'BAD_OPTION', field: 'report' });
    expect(typed(() => trainingReportHtml(report({ plan: {} as never })))).toMatchObject({ code: 'BAD_PLAN', field: 'report.plan' });
    expect(typed(() => trainingReportHtml(report({ progress: 5 as never })))).toMatchObject({ field: 'report.progress' });
    expect(typed(() => trainingReportHtml(report({ progress: [null as never] })))).toMatchObject({ field: 'report.progress[0]' });
    expect(typed(() => trainingReportHtml(report({ progress: [{ epoch: 1, batch: 1, batches: 1, step: 1, loss: '1' as never, accuracy: 1 }] })))).toMatchObject(
      { field: 'report.progress[0].loss' },
    );
    expect(typed(() => trainingReportHtml(report({ transfers: undefined as never })))).toMatchObject({ field: 'report.transfers' });
    expect(typed(() => trainingReportHtml(report({ machine: null as never })))).toMatchObject({ field: 'report.machine' });
    expect(typed(() => trainingReportHtml(report({ createdAt: 'today' as never })))).toMatchObject({ field: 'report.createdAt' });
  });

  it('a report of 200,000 progress points renders (no stack overflow)', () => {
    const progress = Array.from({ length: 200_000 }, (_, i) => ({
      epoch: 1 + Math.floor(i / 1000),
      batch: (i % 1000) + 1,
      batches: 1000,
      step: i + 1,
      loss: 1 / (1 + i),
      accuracy: i / 200_000,
    }));
    const html = trainingReportHtml(report({ progress }));
    expect(html).toContain('data-points="200000"');
  });

  it('recordTransfers refuses what is not an arena; two recorders on one arena each see every transfer', () => {
    for (const a of [null, undefined, 5, {}, plan]) expect(typed(() => recordTransfers(a as never))).toMatchObject({ code: 'BAD_OPTION', field: 'arena' });
    using arena = Arena.create(plan, cpu);
    const r1 = recordTransfers(arena),
      r2 = recordTransfers(arena);
    arena.toDevice();
    r1.stop();
    arena.toHost({ kinds: ['w'] });
    const bytes = (r: ReturnType<typeof recordTransfers>, dir: string) =>
      r
        .byPurpose()
        .filter((x) => x.direction === dir && x.purpose !== 'header')
        .reduce((a, x) => a + x.bytes, 0);
    expect(bytes(r1, 'to device')).toBe(plan.totalBytes);
    expect(bytes(r1, 'to host')).toBe(0); // stopped
    expect(bytes(r2, 'to device')).toBe(plan.totalBytes);
    expect(bytes(r2, 'to host')).toBe(selectRanges(plan, { kinds: ['w'] }).reduce((a, r) => a + r.bytes, 0)); // still recording
    r2.stop();
  });
});

describe('validation gaps', () => {
  it("view: a model index that is not a number is refused, also after the model's view was made", () => {
    using arena = Arena.create(planLayout({ layers: [4, 8, 3], batch: 2, models: 2 }), cpu);
    arena.view(1, 'w', 0);
    for (const m of ['0', '1', 0.5, -1, 2, null])
      expect(
        typed(() => arena.view(1, 'w', m as never)),
        String(m),
      ).toMatchObject({ code: 'BAD_OPTION', field: 'model' });
  });

  it('Arena.create: memory null is refused, not taken as the default', () => {
    expect(typed(() => Arena.create(plan, { backend: 'cpu', memory: null as never }))).toMatchObject({ code: 'BAD_OPTION', field: 'memory' });
  });

  it('compileKernel: a kernel signature with holes is refused before anything else', () => {
    using arena = Arena.create(plan, cpu);
    // eslint-disable-next-line no-sparse-arrays
    const holes = ['u32', , 'f32'] as never;
    expect(typed(() => arena.compileKernel('extern "C" __global__ void k(char* base) {}', 'k', holes))).toMatchObject({ code: 'BAD_OPTION', field: 'params' });
  });

  it('a Trainer still trains after these refusals (nothing left half-done)', async () => {
    using arena = Arena.create(plan, cpu);
    const t = new Trainer(arena, { lr: 0.1 });
    t.init(1);
    await expect(t.step(new Float32Array(8).fill(0.5), { labels: [0, 1] })).resolves.toBeDefined();
  });
});
