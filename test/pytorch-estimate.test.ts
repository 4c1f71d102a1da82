// The PyTorch estimate (caching allocator model) against measured figures, and its allocator rules.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LayoutError, planLayout } from '../src/index.js';
import { estimatePytorchMemory, arenaBytesByStage } from '../src/tools.js';
import { CachingAllocatorModel, roundSize } from '../src/report/caching-allocator.js';

// Source document 002 (seed): torch.cuda.memory_allocated() after each line of the first training
// step of a 784-10 MNIST MLP (one nn.Linear), batch 100, float32, PyTorch 1.13.1 on an A30.
const SEED = {
  layers: [784, 10],
  batch: 100,
  sgd: { model: 32_256, inputs: 347_136, forward: 351_232, loss: 356_352, backward: 384_000 },
  adamStep: 448_512,
};
// Issue 18: PyTorch's measured peak for one S step (784-128-10, batch 100, SGD) on the H100.
const S_PEAK_H100 = 1_186_304;

const after = (e: ReturnType<typeof estimatePytorchMemory>) => Object.fromEntries(e.stages.map((s) => [s.stage, s.allocatedBytes]));

describe('estimatePytorchMemory', () => {
  it("reproduces the seed's per-stage memory_allocated for 784-10, batch 100, SGD and Adam", () => {
    const sgd = estimatePytorchMemory({ layers: SEED.layers, batch: SEED.batch, optimizer: 'sgd' });
    expect(after(sgd)).toEqual({ ...SEED.sgd, step: SEED.sgd.backward });
    const adam = estimatePytorchMemory({ layers: SEED.layers, batch: SEED.batch }, { optimizer: 'adam' });
    expect(adam.optimizer).toBe('adam');
    expect(after(adam)).toEqual({ ...SEED.sgd, step: SEED.adamStep });
  });

  it("reproduces the S step's measured peak (backward, with the root gradient and the ReLU gradient alive)", () => {
    const e = estimatePytorchMemory({ layers: [784, 128, 10], batch: 100, optimizer: 'sgd' });
    expect(e.peakBytes).toBe(S_PEAK_H100);
    expect(e.peakStage).toBe('backward');
  });

  it('adds one parameter-sized block set per momentum buffer, two for Adam (plus sqrt temporaries at the peak)', () => {
    const spec = { layers: [784, 300, 100, 10], batch: 64 };
    const paramBlocks = [784 * 300, 300, 300 * 100, 100, 100 * 10, 10].reduce((a, n) => a + roundSize(4 * n), 0);
    const sgd = estimatePytorchMemory({ ...spec, optimizer: 'sgd' });
    const mom = estimatePytorchMemory({ ...spec, optimizer: 'momentum' });
    const adam = estimatePytorchMemory({ ...spec, optimizer: 'adam' });
    expect(after(sgd).model).toBe(paramBlocks);
    const sgdStep = after(sgd).step!;
    expect(after(mom).step! - sgdStep).toBe(paramBlocks);
    expect(after(adam).step! - sgdStep).toBe(2 * paramBlocks);
    expect(adam.stages.at(-1)!.peakBytes - after(adam).step!).toBe(paramBlocks);
    // Everything but the step is the same for all three.
    expect(after(mom).backward).toBe(after(sgd).backward);
  });

  it('frees what autograd frees: after backward, only parameters, inputs, output, loss and gradients remain', () => {
    for (const act of ['relu', 'tanh', 'identity'] as const) {
      const e = estimatePytorchMemory({ layers: [50, 40, 30, 5], batch: 8, activations: [act, act, 'softmax'] });
      const params = [50 * 40, 40, 40 * 30, 30, 30 * 5, 5].reduce((a, n) => a + roundSize(4 * n), 0);
      const expected = 2 * params + roundSize(8 * 50 * 4) + roundSize(8 * 8) + roundSize(8 * 5 * 4) + 512;
      expect(after(e).backward, act).toBe(expected);
    }
  });

  it('doubles element bytes for float64 (labels stay int64)', () => {
    const e = estimatePytorchMemory({ layers: [784, 10], batch: 100, dtype: 'float64' });
    expect(after(e).model).toBe(roundSize(7840 * 8) + roundSize(80));
    expect(after(e).inputs! - after(e).model!).toBe(roundSize(100 * 784 * 8) + roundSize(800));
  });

  it('refuses an output layer without softmax, naming the field', () => {
    try {
      estimatePytorchMemory({ layers: [4, 3, 2], batch: 2, activations: ['relu', 'sigmoid'] });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(LayoutError);
      expect((e as LayoutError).code).toBe('BAD_ACTIVATIONS');
      expect((e as LayoutError).field).toBe('activations[1]');
    }
    expect(() => estimatePytorchMemory({ layers: [4, 2], batch: 2 }, { optimizer: 'lamb' as never })).toThrow(LayoutError);
  });
});

describe('caching allocator model', () => {
  it('rounds to 512 bytes and hands out a whole cached block when the rest is too small to split', () => {
    const a = new CachingAllocatorModel();
    const x = a.malloc(1);
    expect(a.allocated).toBe(512);
    expect(a.reserved).toBe(2 << 20); // one small segment
    a.free(x);
    expect(a.allocated).toBe(0);
    // 11 MiB: a 12 MiB segment; the 1 MiB left is not split off (large pool splits only > 1 MiB).
    const big = a.malloc(11 << 20);
    expect(a.allocated).toBe(12 << 20);
    a.free(big);
    // A 5 MiB request reuses the cached 12 MiB block, splitting it (7 MiB left).
    a.malloc(5 << 20);
    expect(a.allocated).toBe(5 << 20);
    expect(a.reserved).toBe((2 << 20) + (12 << 20));
    // 1.5 MiB comes out of the 7 MiB left; 8 MiB then needs a fresh 20 MiB segment (under 10 MiB).
    a.malloc(1.5 * (1 << 20));
    expect(a.reserved).toBe((2 << 20) + (12 << 20));
    a.malloc(8 << 20);
    expect(a.reserved).toBe((2 << 20) + (12 << 20) + (20 << 20));
    expect(a.allocated).toBe((5 << 20) + 1.5 * (1 << 20) + (8 << 20));
    expect(a.peak).toBe(a.allocated);
  });

  it('merges freed neighbours so a segment can serve one large request again', () => {
    const a = new CachingAllocatorModel();
    const blocks = [0, 1, 2, 3].map(() => a.malloc(512 * 1024)); // 4 x 512 KiB fill one 2 MiB segment
    expect(a.reserved).toBe(2 << 20);
    blocks.forEach((b) => a.free(b));
    a.malloc(1 << 20); // fits in the merged segment: no new one
    expect(a.reserved).toBe(2 << 20);
  });
});

describe('arenaBytesByStage and plan --vs-pytorch', () => {
  it('assigns every region to one stage; with the header and padding they sum to the arena', () => {
    const plan = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'adam', samples: 1000 });
    const { stages, headerAndPadding } = arenaBytesByStage(plan);
    const k = plan.bytesByKind();
    expect(stages.reduce((a, s) => a + s.bytes, 0) + headerAndPadding).toBe(plan.totalBytes);
    expect(headerAndPadding).toBe(k.header + k.padding);
    const by = Object.fromEntries(stages.map((s) => [s.stage, s.bytes]));
    expect(by.model).toBe(k.w + k.b);
    expect(by.backward).toBe(k.d + k.db + k.dw);
    expect(by.step).toBe(k.mw + k.mb + k.vw + k.vb);
    expect(by.inputs! + by.forward!).toBe(k.z + k.y + k.xdata + k.ydata);
    expect(by.inputs).toBe(plan.region(0, 'z')!.bytes + k.y + k.xdata + k.ydata);
  });

  it('prints both sides per stage and both peaks', () => {
    const r = spawnSync(process.execPath, ['dist/cli.js', 'plan', '--layers', '784,128,10', '--batch', '100', '--vs-pytorch'], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^backward\s+loss\.backward\(\)\s+1,134,592\s+1,186,304\s+2,097,152\s+\|\s+d, db, dw\s+462,280$/m);
    expect(r.stdout).toContain('peak: PyTorch 1,186,304 B');
    expect(r.stdout).toContain('nn-arena 1,244,160 B');
    const j = JSON.parse(
      spawnSync(process.execPath, ['dist/cli.js', 'plan', '--layers', '784,10', '--vs-pytorch', '--json', '--optimizer', 'adam'], { encoding: 'utf8' }).stdout,
    );
    expect(j.vsPytorch.pytorch.stages.at(-1).allocatedBytes).toBe(SEED.adamStep);
    expect(j.vsPytorch.arena.totalBytes).toBe(j.totalBytes);
  });
});

describe('bench/torch-memory-compare.mjs', () => {
  const md = join(mkdtempSync(join(tmpdir(), 'nna-cmp-')), 'table.md');
  const compare = (file: string) => spawnSync(process.execPath, ['bench/torch-memory-compare.mjs', file, '--md', md], { encoding: 'utf8' });

  it("agrees with seed002's measurements (in torch_memory.py's JSON shape) and writes the table", () => {
    const r = compare('test/fixtures/seed002-memory.json');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\| seed 784-10 b100 \| adam \| float32 \| step \| 448,512 \| 448,512 \| \+0\.00% \|/);
    expect(r.stdout).toContain('2 runs, largest difference 0.00%, 0 stage(s) beyond 1.0%.');
    expect(readFileSync(md, 'utf8')).toContain(r.stdout.trim());
  });

  it('fails and marks a stage that is off by more than 1%', () => {
    const j = JSON.parse(readFileSync('test/fixtures/seed002-memory.json', 'utf8'));
    j.rows[0].stages[4].allocated = Math.round(384_000 * 1.02);
    const file = join(mkdtempSync(join(tmpdir(), 'nna-cmp-')), 'm.json');
    writeFileSync(file, JSON.stringify(j));
    const r = compare(file);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/\| backward \| 391,680 \| 384,000 \| -1\.96% ✗ \|/);
    expect(r.stdout).toContain('1 stage(s) beyond 1.0%');
  });
});
