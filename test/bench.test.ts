// The benchmark's own arithmetic and plumbing (its figures are measured by `npm run bench`,
// never asserted here): arena sizes, FLOP counts, a tiny real run of each baseline.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { native } from '../src/native.js';
import { describeMachine } from '../bench/machine.js';
import { writeResults } from '../bench/report.js';
import { flopsPerStep } from '../bench/steps.js';
import { benchTransfers, transferPlans } from '../bench/transfers.js';

describe('bench plumbing', () => {
  it('sized arenas come within one sample of the size asked for', () => {
    const plans = transferPlans([16, 256]);
    expect(plans[0]![0]).toMatch(/^S /);
    for (const [i, mib] of [[1, 16], [2, 256]] as const) {
      const total = plans[i]![1].totalBytes;
      expect(Math.abs(total - mib * 2 ** 20)).toBeLessThan(4096);
    }
  });

  it('counts 6 x batch x sum(in x out) FLOPs per step', () => {
    expect(flopsPerStep([784, 128, 10], 100)).toBe(6 * 100 * (784 * 128 + 128 * 10));
    expect(flopsPerStep([4096, 4096, 4096, 4096], 2048)).toBe(6 * 2048 * 3 * 4096 * 4096);
  });

  it('the fragmented baseline makes one copy per buffer', () => {
    const cb = new (native().CopyBench)(false, [100, 200, 300], true);
    expect(cb.run('toDevice')).toBe(3);
    expect(cb.run('toHost')).toBe(3);
    cb.dispose();
    expect(() => cb.run('toHost')).toThrow(/disposed/);
  });

  it('a quick transfer run writes results and a markdown table', async () => {
    const rows = await benchTransfers('cpu', [], true, () => {});
    expect(rows.map((r) => r.method)).toEqual([
      'raw copy, pinned', 'arena, 1 transfer, pinned', 'fragmented, 24 buffers',
      'raw copy, pinned', 'arena, 1 transfer, pinned', 'fragmented, 24 buffers',
    ]);
    expect(rows[1]!.transfers).toBe(1);
    expect(rows.every((r) => r.micros > 0 && r.gbps > 0)).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-bench-'));
    const file = writeResults(dir, { machine: describeMachine('test-machine'), date: 'now', quick: true, command: 'test', parts: ['transfers'], transfers: rows, steps: [], memory: [] });
    expect(JSON.parse(readFileSync(file, 'utf8')).transfers).toHaveLength(6);
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toMatch(/\| S 784-128-10 adam \| 2,058,752 \| toDevice \| arena, 1 transfer, pinned \| 1 \|/);
  });
});
