// bench/micro/stage_sim.cc predicts a staged run's timeline on the CPU from the same residency
// plan the GPU executes (csrc/budget/residency.cc). Built here with g++ so it cannot drift from the
// planner's API unnoticed; what it moves must be what the plan, replayed by the native module,
// moves. Skipped where there is no g++.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { minDeviceBudget, planLayout } from '../src/index.js';
import { testAddon } from '../src/internal.js';

const hasGxx = (() => {
  try {
    execFileSync('g++', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const root = join(import.meta.dirname, '..');

describe.skipIf(!hasGxx)('stage_sim (bench/micro): the staged timeline simulator', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nna-sim-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('builds, and moves exactly the bytes the replayed plan moves, run after run', () => {
    const sim = join(dir, 'sim');
    execFileSync(
      'g++',
      [
        '-O1',
        '-std=c++17',
        `-I${join(root, 'csrc')}`,
        join(root, 'bench/micro/stage_sim.cc'),
        join(root, 'csrc/train/phases.cc'),
        join(root, 'csrc/budget/residency.cc'),
        '-o',
        sim,
      ],
      { stdio: 'pipe' },
    );
    const spec = { layers: [300, 512, 256, 10], batch: 64, samples: 256, optimizer: 'adam' as const };
    const plan = planLayout(spec);
    const header = join(dir, 'net.hdr');
    writeFileSync(header, plan.header);
    const budget = minDeviceBudget(plan, 'staged').bytes;
    const out = execFileSync(sim, [header, String(budget), '3', '4'], { encoding: 'utf8' });
    const runs = [...out.matchAll(/^run (\d+): (\d+) us per step .*; (\d+) B in, (\d+) B out in the run\)$/gm)];
    expect(runs.length).toBe(3);
    const compute = Number(/compute alone (\d+) us per step/.exec(out)![1]);
    for (const r of runs) expect(Number(r[2])).toBeGreaterThanOrEqual(compute); // copies only ever add waiting
    const replay = testAddon().replayResidency(
      plan.header,
      'staged',
      budget,
      Array.from({ length: 3 }, () => ({ op: 0, loss: 0, resident: true, samples: 256, firstBatch: 0, numBatches: 4, permA: 1, permC: 0 })),
    );
    expect(replay.error).toBe('');
    expect(runs.reduce((a, r) => a + Number(r[3]), 0)).toBe(replay.counters.fetchedBytes);
    expect(runs.reduce((a, r) => a + Number(r[4]), 0)).toBe(replay.counters.writtenBackBytes);
    expect(replay.counters.fetchedBytes).toBeGreaterThan(0);
  });
});
