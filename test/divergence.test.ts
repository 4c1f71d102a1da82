// Divergence (issue 27): non-finite weights or loss are DIVERGED on every training path, also when
// the loss stays finite (a ReLU network whose weights are NaN outputs zeros).
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer } from '../src/index.js';
import { BLOWUP, BLOWUP_LR, blowUp, nonFinite } from './support/divergence-checks.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;

describe('non-finite weights are DIVERGED', () => {
  for (const how of ['fit', 'step', 'primitives'] as const) {
    it(`${how}: never resolves with non-finite weights (seeds 1-3: NaN weights with a finite loss on the old main)`, async () => {
      for (const seed of [1, 2, 3]) {
        const r = await blowUp(cpu, seed, how);
        expect(r.nonFinite, `seed ${seed}: the run did blow up`).toBe(true);
        expect(r.outcome, `seed ${seed}: loss ${r.loss}`).toBe('DIVERGED');
      }
    });
  }

  it("a streamed fit (each window's run queued behind the one training) is DIVERGED too, with the steps that ran counted", async () => {
    for (const seed of [1, 2, 3]) {
      using arena = Arena.create(planLayout(BLOWUP), cpu);
      const t = new Trainer(arena, { lr: BLOWUP_LR });
      t.init(seed);
      const data = toyData(8, 4, 64, seed, true);
      const batches = () => Array.from({ length: 4 }, () => ({ x: data.x, y: data.y! })); // 256 rows: 4 windows of the plan's 64
      let code = 'resolved';
      try {
        await t.fit(batches, { epochs: 2, seed, shuffle: false });
      } catch (e) {
        code = (e as { code?: string }).code ?? String(e);
      }
      expect(code, `seed ${seed}`).toBe('DIVERGED');
      // Whole windows of 4 steps: the one that diverged, and the one queued behind it if the next
      // window was staged before the diverged run ended (a race: a run that failed waits for no
      // window), which then ran and counts.
      expect([4, 8], `seed ${seed}: ${t.steps} steps`).toContain(t.steps);
    }
  });

  it('a resident fit with nothing watching between runs (each run queued behind the one training) ends where one with onProgress does: the run queued behind the diverged one does nothing', async () => {
    for (const seed of [1, 2, 3]) {
      const ends = [];
      for (const watched of [true, false]) {
        using arena = Arena.create(planLayout(BLOWUP), cpu);
        const t = new Trainer(arena, { lr: BLOWUP_LR });
        t.init(seed);
        const data = toyData(8, 4, 64, seed, true);
        let message = 'resolved';
        try {
          await t.fit({ x: data.x, y: data.y! }, { epochs: 3, seed, reportsPerEpoch: 4, ...(watched ? { onProgress: () => undefined } : {}) });
        } catch (e) {
          message = `${(e as { code?: string }).code}: ${(e as Error).message}`;
        }
        arena.toHost(); // the device's stats and weights, as the last run left them
        ends.push({
          message,
          steps: t.steps,
          stats: Array.from(arena.view(3, 'stats')),
          w: Buffer.from(Float32Array.from(arena.view(2, 'w')).buffer).toString('hex'),
        });
      }
      expect(ends[0]!.message, `seed ${seed}`).toMatch(/^DIVERGED/);
      expect(ends[1]).toEqual(ends[0]); // same step named, same steps counted, same stats rows, same bits
    }
  });

  it('K models: the model whose weights blew up is diverged (NaN loss), the others train on', async () => {
    using arena = Arena.create(planLayout({ ...BLOWUP, models: 3 }), cpu);
    const t = new Trainer(arena, { lr: [0.01, BLOWUP_LR, 0.02] });
    t.init(1);
    const data = toyData(8, 4, 64, 1, true);
    const r = await t.fit({ x: data.x, y: data.y! }, { epochs: 5, seed: 1 });
    expect(r.diverged).toEqual([false, true, false]);
    expect(Number.isNaN(r.losses![1])).toBe(true);
    expect(Number.isFinite(r.losses![0]) && Number.isFinite(r.losses![2])).toBe(true);
    expect([0, 1, 2].map((m) => nonFinite(arena, m))).toEqual([false, true, false]);
  });

  it('a finite step is not DIVERGED (the check reads the weights, not their size)', async () => {
    using arena = Arena.create(planLayout(BLOWUP), cpu);
    const t = new Trainer(arena, { lr: 1e-3 });
    t.init(1);
    arena.view(1, 'w').fill(1e6); // large but finite: still a step
    t.markHostChanged();
    const data = toyData(8, 4, 16, 1, true);
    await expect(t.step(data.x, { y: data.y! })).resolves.toBeDefined();
  });
});
