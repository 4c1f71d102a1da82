// The benchmark's own arithmetic and plumbing (its figures are measured by `npm run bench`,
// never asserted here): arena sizes, FLOP counts, a tiny real run of each baseline.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { native } from '../src/native/addon.js';
import { describeMachine } from '../bench/machine.js';
import { writeResults } from '../bench/report.js';
import { flopsPerStep } from '../bench/steps.js';
import { benchTransfers, transferPlans } from '../bench/transfers.js';
import { benchUm, linkBytes, UM_SPEC } from '../bench/um.js';
import { planLayout } from '../src/index.js';
import { testAddon } from '../src/internal.js';

describe('bench plumbing', () => {
  it('sized arenas come within one sample of the size asked for', () => {
    const plans = transferPlans([16, 256]);
    expect(plans[0]![0]).toMatch(/^S /);
    for (const [i, mib] of [
      [1, 16],
      [2, 256],
    ] as const) {
      const total = plans[i]![1].totalBytes;
      expect(Math.abs(total - mib * 2 ** 20)).toBeLessThan(4096);
    }
  });

  it('counts 6 x batch x sum(in x out) FLOPs per step', () => {
    expect(flopsPerStep([784, 128, 10], 100)).toBe(6 * 100 * (784 * 128 + 128 * 10));
    expect(flopsPerStep([4096, 4096, 4096, 4096], 2048)).toBe(6 * 2048 * 3 * 4096 * 4096);
  });

  it('the fragmented baseline makes one copy per buffer', () => {
    const cb = new (testAddon().CopyBench)(false, [100, 200, 300], true);
    expect(cb.run('toDevice')).toBe(3);
    expect(cb.run('toHost')).toBe(3);
    cb.dispose();
    expect(() => cb.run('toHost')).toThrow(/disposed/);
  });

  it('a quick transfer run writes results and a markdown table', async () => {
    const rows = await benchTransfers('cpu', [], true, () => {});
    expect(rows.map((r) => r.method)).toEqual([
      'raw copy, pinned',
      'arena, 1 transfer, pinned',
      'fragmented, 24 buffers',
      'raw copy, pinned',
      'arena, 1 transfer, pinned',
      'fragmented, 24 buffers',
    ]);
    expect(rows[1]!.transfers).toBe(1);
    expect(rows.every((r) => r.micros > 0 && r.gbps > 0)).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-bench-'));
    const file = writeResults(dir, {
      machine: describeMachine('test-machine'),
      date: 'now',
      quick: true,
      command: 'test',
      parts: ['transfers'],
      transfers: rows,
      steps: [],
      memory: [],
    });
    expect(JSON.parse(readFileSync(file, 'utf8')).transfers).toHaveLength(6);
    // One row per arena and direction, a column per method (GB/s).
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toMatch(/\| S 784-128-10 adam \| toDevice \| [\d.]+ \| [\d.]+ \| [\d.]+ \(24 buffers\) \|/);
  });

  it('the link bound of the device-budget rows: weights and activations that cannot stay, and the batch', () => {
    const plan = planLayout(UM_SPEC);
    const MiB = 2 ** 20,
      budget = Math.floor(plan.totalBytes / 4);
    const room = budget - plan.headerBytes;
    const w = 6 * (64 * MiB + 16384),
      z = 32 * MiB;
    // In: the weights that do not fit beside z[0], y before the forward pass; the weights and
    // z[0..5] that do not fit beside z[6], y, d[6], stats after the output; the batch's rows.
    expect(linkBytes(plan, budget)).toEqual({
      toDevice: w - (room - 2 * z) + (w + 6 * z - (room - 3 * z - 32)) + 2048 * 8192 * 4,
      toHost: w - (room - 2 * z),
    });
    // With room for everything, only the batch crosses.
    expect(linkBytes(plan, plan.totalBytes * 2)).toEqual({ toDevice: 2048 * 8192 * 4, toHost: 0 });
  });

  it('the device-budget part is skipped without a CUDA device, and renders its table when measured', async () => {
    if (native().cudaInfo().devices === 0) expect(await benchUm(true, () => {})).toBeNull();
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-bench-'));
    const row = (mode: string, us: number) => ({
      mode,
      variant: '',
      steps: 20,
      microsPerStep: us,
      peakDeviceBytes: 1e8,
      scheduledPeakBytes: 9e7,
      toDevicePerStep: 7e8,
      toHostPerStep: 6e8,
      timing: null,
    });
    const link = {
      bytes: 1,
      copyToDevice: 50,
      copyToHost: 50,
      prefetchToDevice: 40,
      prefetchToHost: 13,
      prefetchToHost4: 30,
      prefetchRetainedBytes: 0,
      discardToHost: 100,
      discardToDevice: 100,
      discardOnly: 200,
      discardFreedBytes: 0,
      discard: '',
    };
    writeResults(dir, {
      machine: describeMachine('test-machine'),
      date: 'now',
      quick: true,
      command: 'test',
      parts: ['um'],
      transfers: [],
      steps: [],
      memory: [],
      um: {
        network: 'L 6x4096',
        layers: UM_SPEC.layers as number[],
        batch: 2048,
        samples: 4096,
        optimizer: 'sgd',
        arenaBytes: 1.4e9,
        budget: 3.5e8,
        layerRangeBytes: 2e8,
        link,
        mustCross: { toDevice: 5e8, toHost: 1e8 },
        bounds: { residentMicros: 40000, linkMicrosCopy: 10000, linkMicrosPrefetch: 12000, largerMicros: 40000 },
        rows: [row('resident', 40000), row('scheduler', 60000), row('staged', 45000)],
        ratios: { schedulerToLargerBound: 1.5, schedulerToStaged: 60000 / 45000 },
        targets: { schedulerToLargerBound: 1.25, schedulerToStaged: 1.1 },
      },
    });
    const md = readFileSync(join(dir, 'README.md'), 'utf8');
    expect(md).toContain('### Device budget: L 6x4096');
    expect(md).toMatch(/\| scheduler \| — \| 20 \| 60\.00 \| 1\.500 \| 100\.0 \| 90\.0 \| 700\.0 \/ 600\.0 \|/);
    expect(md).toContain('Scheduler / larger bound: 1.500 (**missed**)');
  });
});
