// The PyTorch estimate under AMP (autocast bf16 / fp16, GradScaler) and its arena side: bf16's
// copies beside the arena. Checked structurally here; against PyTorch by test/fixtures/amp-memory.json
// (bench/torch_memory.py --precisions bf16,fp16 on a GPU) once that file is committed.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OptionError, planLayout } from '../src/index.js';
import { bf16CopyBytes, estimatePytorchMemory, TORCH_STAGES, type PytorchEstimate } from '../src/tools.js';
import { roundSize } from '../src/report/caching-allocator.js';

const SPEC = { layers: [50, 40, 30, 5], batch: 8, activations: ['relu', 'relu', 'softmax'] as const, optimizer: 'adam' as const };
const after = (e: PytorchEstimate) => Object.fromEntries(e.stages.map((s) => [s.stage, s.allocatedBytes]));
const stage = (e: PytorchEstimate, name: string) => e.stages.find((s) => s.stage === name)!;
const names = (list: Array<{ name: string }>) => list.map((t) => t.name);
const blocks = (...counts: number[]) => counts.reduce((a, n) => a + roundSize(n), 0);
const PARAMS = [
  [40, 50],
  [30, 40],
  [5, 30],
] as const; // [units, fan-in] per layer

describe('estimatePytorchMemory with AMP', () => {
  const fp32 = estimatePytorchMemory(SPEC);
  const bf16 = estimatePytorchMemory(SPEC, { precision: 'bf16' });
  const fp16 = estimatePytorchMemory(SPEC, { precision: 'fp16' });

  it('fp32 is the default, unchanged', () => {
    expect(estimatePytorchMemory(SPEC, { precision: 'fp32' })).toEqual(fp32);
    expect(fp32.precision).toBe('fp32');
    expect(bf16.precision).toBe('bf16');
  });

  it("casts each Linear's weight and bias in forward (kept by the cache) and x (not cached); activations in bf16", () => {
    const fwd = stage(bf16, 'forward');
    const casts = fwd.allocated.filter((t) => t.name.endsWith(' bf16')).map((t) => [t.name, t.bytes]);
    expect(casts).toEqual([
      ['linear1.bias bf16', 80],
      ['linear1.weight bf16', 4000],
      ['x bf16', 800],
      ['linear2.bias bf16', 60],
      ['linear2.weight bf16', 2400],
      ['linear3.bias bf16', 10],
      ['linear3.weight bf16', 300],
    ]);
    expect(fwd.allocated.find((t) => t.name === 'relu1 output')!.bytes).toBe(8 * 40 * 2);
    expect(fwd.allocated.find((t) => t.name === 'linear3 output')!.bytes).toBe(8 * 5 * 2);
    // Everything fp32 holds after forward, at half the bytes for the activations, plus the casts.
    const castBytes = blocks(50 * 8 * 2, ...PARAMS.flatMap(([u, f]) => [u * 2, u * f * 2]));
    expect(after(bf16).forward! - after(bf16).inputs!).toBe(castBytes + blocks(8 * 40 * 2, 8 * 30 * 2, 8 * 5 * 2));
    expect(after(fp32).forward! - after(fp32).inputs!).toBe(blocks(8 * 40 * 4, 8 * 30 * 4, 8 * 5 * 4));
  });

  it('frees the casts nothing saved when autocast exits, the others in backward; nll_loss works on a float32 copy', () => {
    const loss = stage(bf16, 'loss');
    expect(names(loss.freed).sort()).toEqual(['linear1.bias bf16', 'linear1.weight bf16', 'linear2.bias bf16', 'linear3.bias bf16'].sort());
    expect(loss.allocated.map((t) => [t.name, t.bytes])).toEqual([
      ['log_softmax output', 8 * 5 * 2],
      ['log_softmax output float32', 8 * 5 * 4],
      ['loss', 4],
      ['nll_loss total_weight', 4],
    ]);
    const back = stage(bf16, 'backward');
    expect(names(back.freed)).toEqual(expect.arrayContaining(['linear2.weight bf16', 'linear3.weight bf16', 'x bf16', 'log_softmax output float32']));
    for (const st of bf16.stages.slice(TORCH_STAGES.indexOf('backward')))
      expect(names(st.allocated).filter((n) => / bf16$/.test(n) && !n.startsWith('grad of'))).toEqual([]);
  });

  it('leaves float32 gradients after backward: what remains is what fp32 keeps, less half the output', () => {
    const grads = stage(bf16, 'backward').allocated.filter((t) => t.name.endsWith('.grad'));
    expect(grads.map((t) => [t.name, t.bytes])).toEqual(
      [3, 2, 1].flatMap((l) => {
        const [u, f] = PARAMS[l - 1]!;
        return [
          [`linear${l}.weight.grad`, u * f * 4],
          [`linear${l}.bias.grad`, u * 4],
        ];
      }),
    );
    // The low-precision gradients of the casts are gone too.
    expect(after(fp32).backward! - after(bf16).backward!).toBe(roundSize(8 * 5 * 4) - roundSize(8 * 5 * 2));
    expect(after(bf16).step! - after(bf16).backward!).toBe(after(fp32).step! - after(fp32).backward!);
    expect(names(stage(bf16, 'step').allocated).some((n) => /GradScaler|found_inf|inv_scale/.test(n))).toBe(false);
  });

  it("fp16 is bf16's step plus GradScaler: scale and growth tracker kept from backward on, unscale_'s tensors gone after the step", () => {
    for (const s of ['model', 'inputs', 'forward', 'loss'] as const) expect(after(fp16)[s]).toBe(after(bf16)[s]);
    expect(names(stage(fp16, 'backward').allocated).slice(0, 3)).toEqual(['GradScaler scale', 'GradScaler growth_tracker (int32)', 'scaled loss']);
    expect(names(stage(fp16, 'backward').freed)).toContain('scaled loss');
    expect(after(fp16).backward! - after(bf16).backward!).toBe(2 * 512);
    const step = stage(fp16, 'step');
    expect(names(step.allocated)).toEqual(expect.arrayContaining(['inv_scale', 'found_inf', 'found_inf (per-device copy)', 'inv_scale (per-device copy)']));
    expect(names(step.freed)).toEqual(expect.arrayContaining(['inv_scale', 'found_inf', 'found_inf (per-device copy)', 'inv_scale (per-device copy)']));
    expect(after(fp16).step! - after(bf16).step!).toBe(2 * 512);
    expect(step.peakBytes).toBeGreaterThanOrEqual(stage(bf16, 'step').peakBytes + 2 * 512);
  });

  it('refuses a bad precision, float64 under autocast and unknown option keys, naming the field', () => {
    const refuse = (spec: object, options: object, field: string, code: string, text?: RegExp) => {
      try {
        estimatePytorchMemory(spec as typeof SPEC, options as never);
        expect.unreachable();
      } catch (e) {
        expect(e).toBeInstanceOf(OptionError);
        expect((e as OptionError).code).toBe(code);
        expect((e as OptionError).field).toBe(field);
        if (text) expect((e as Error).message).toMatch(text);
      }
    };
    refuse(SPEC, { precision: 'bf61' }, 'precision', 'BAD_OPTION', /must be one of fp32, bf16, fp16; did you mean 'bf16'\?/);
    refuse(SPEC, { precision: 16 }, 'precision', 'BAD_OPTION');
    refuse({ ...SPEC, dtype: 'float64' }, { precision: 'fp16' }, 'precision', 'BAD_OPTION', /needs dtype float32/);
    refuse(SPEC, { precison: 'bf16' }, 'precison', 'UNKNOWN_OPTION', /did you mean 'precision'/);
    expect(estimatePytorchMemory({ ...SPEC, dtype: 'float64' }, { precision: 'fp32' }).precision).toBe('fp32');
  });
});

describe('bf16CopyBytes (the native rule HalfCopies allocates by, csrc/train/half_copies.h)', () => {
  it("counts z[0..L-1], then each layer's w and its own d, each rounded up to 64 elements, 2 bytes each", () => {
    // 784-128-10, batch 100: z 78,400 + 12,800; w[1] 100,352, d[1] 12,800; w[2] 1,280, d[2] 1,000 -> 1,024.
    expect(bf16CopyBytes(planLayout({ layers: [784, 128, 10], batch: 100 }))).toBe(2 * (78_400 + 12_800 + 100_352 + 12_800 + 1_280 + 1_024));
    // 3-5-2, batch 3: z 9, 15; w 15, 10; d 15, 6: six operands of 64 elements.
    expect(bf16CopyBytes(planLayout({ layers: [3, 5, 2], batch: 3 }))).toBe(6 * 64 * 2);
    // a layer's d is its own (not two buffers of the largest d): 4-64-64-2, batch 2 has three d copies
    expect(bf16CopyBytes(planLayout({ layers: [4, 64, 64, 2], batch: 2 }))).toBe(2 * (64 + 128 + 128 + 256 + 128 + 4096 + 128 + 128 + 64));
  });

  it('K models: a copy per model of each region the models each keep; z[0] (the shared inputs) once', () => {
    const one = planLayout({ layers: [784, 128, 10], batch: 100 });
    const four = planLayout({ layers: [784, 128, 10], batch: 100, models: 4 });
    expect(bf16CopyBytes(four)).toBe(2 * (78_400 + 4 * (12_800 + 100_352 + 12_800 + 1_280 + 1_024)));
    expect(bf16CopyBytes(four) - 2 * 78_400).toBe(4 * (bf16CopyBytes(one) - 2 * 78_400));
  });
});

describe('plan --vs-pytorch --precision', () => {
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, ['dist/cli.js', 'plan', '--layers', '784,128,10', '--batch', '100', '--vs-pytorch', ...args], { encoding: 'utf8' });

  it('bf16: the AMP stages, and the bf16 copies as their own row counted in the arena side', () => {
    const r = cli('--precision', 'bf16');
    expect(r.status, r.stderr).toBe(0);
    const est = estimatePytorchMemory({ layers: [784, 128, 10], batch: 100 }, { precision: 'bf16' });
    expect(r.stdout).toContain('autocast(bfloat16) forward and loss');
    expect(r.stdout).toMatch(/^\s+\|\s+bf16 copies beside the arena\s+413,312$/m);
    expect(r.stdout).toContain(`peak: PyTorch ${est.peakBytes.toLocaleString('en-US')} B`);
    expect(r.stdout).toContain('1,244,160 B (arena) + 413,312 B (bf16 copies) = 1,657,472 B');
    const j = JSON.parse(cli('--precision', 'bf16', '--json').stdout).vsPytorch;
    expect(j.precision).toBe('bf16');
    expect(j.pytorch.precision).toBe('bf16');
    expect(j.pytorch.peakBytes).toBe(est.peakBytes);
    expect(j.arena.bf16CopyBytes).toBe(413_312);
  });

  it("fp16: PyTorch with GradScaler, nn-arena with its fp16 copies (the size of bf16's); fp32 has no copies row", () => {
    const r = cli('--precision', 'fp16', '--optimizer', 'adam');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^backward\s+scaler\.scale\(loss\)\.backward\(\)/m);
    expect(r.stdout).toContain('the products read fp16 copies of z, w and d');
    expect(r.stdout).toMatch(/fp16 copies beside the arena\s+413,312/);
    expect(r.stdout).not.toContain('bf16 copies');
    const j = JSON.parse(cli('--precision', 'fp16', '--json').stdout).vsPytorch;
    expect(j.precision).toBe('fp16');
    expect(j.arena.bf16CopyBytes).toBeUndefined();
    expect(j.arena.fp16CopyBytes).toBe(413_312);
    expect(JSON.parse(cli('--json').stdout).vsPytorch.precision).toBe('fp32');
    expect(cli().stdout).not.toContain('bf16 copies');
  });
});

describe('bench/torch-memory-compare.mjs with AMP rows', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nna-amp-'));
  const compare = (file: string) => spawnSync(process.execPath, ['bench/torch-memory-compare.mjs', file], { encoding: 'utf8' });
  /** A file in torch_memory.py's shape whose figures are the estimate's (or changed by `edit`). */
  const measured = (edit: (rows: Array<Record<string, unknown>>) => void = () => {}) => {
    const rows = (['bf16', 'fp16'] as const).map((precision) => {
      const e = estimatePytorchMemory({ layers: [784, 128, 10], batch: 100, optimizer: 'adam' }, { precision });
      return {
        network: 'S',
        layers: [784, 128, 10],
        batch: 100,
        optimizer: 'adam',
        dtype: 'float32',
        precision,
        leftoverAfter: 0,
        ...(precision === 'fp16' ? { scalerSkippedStep: false } : {}),
        stages: e.stages.map((s) => ({ stage: s.stage, allocated: s.allocatedBytes, peak: s.peakBytes, reserved: s.reservedBytes })),
      };
    });
    edit(rows);
    const file = join(dir, `m${Math.random()}.json`);
    writeFileSync(file, JSON.stringify({ torch: 'test', cuda: '-', device: '-', date: '-', workspaceBytes: 0, rows }));
    return file;
  };

  it('compares each row against the estimate of its precision', () => {
    const r = compare(measured());
    expect(r.status, r.stdout).toBe(0);
    expect(r.stdout).toMatch(/\| S 784-128-10 b100 \| adam \| float32 bf16 \| forward \|/);
    expect(r.stdout).toMatch(/\| S 784-128-10 b100 \| adam \| float32 fp16 \| backward \|/);
    // fp32's figures under a bf16 row are caught (autocast's casts, half-size activations).
    const fp32 = estimatePytorchMemory({ layers: [784, 128, 10], batch: 100, optimizer: 'adam' }).stages;
    const wrong = compare(
      measured((rows) => {
        rows[0]!.stages = fp32.map((s) => ({ stage: s.stage, allocated: s.allocatedBytes, peak: s.peakBytes }));
      }),
    );
    expect(wrong.status).toBe(1);
    expect(wrong.stdout).toMatch(/\| float32 bf16 \| forward \| 777,728 \| 1,111,552 \| \+42\.92% ✗/);
  });

  it('fails a row whose step GradScaler skipped', () => {
    const r = compare(
      measured((rows) => {
        rows[1]!.scalerSkippedStep = true;
      }),
    );
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('GradScaler skipped the optimizer step');
  });

  const FIXTURE = 'test/fixtures/amp-memory.json';
  it.skipIf(!existsSync(FIXTURE))("agrees with PyTorch's measured AMP steps (amp-memory.json) within 1% per stage", () => {
    const j = JSON.parse(readFileSync(FIXTURE, 'utf8'));
    const keys = new Set(j.rows.map((r: { network: string; optimizer: string; precision: string }) => `${r.network} ${r.optimizer} ${r.precision}`));
    for (const net of ['seed', 'S', 'M'])
      for (const o of ['sgd', 'adam']) for (const p of ['bf16', 'fp16']) expect(keys, `${net} ${o} ${p}`).toContain(`${net} ${o} ${p}`);
    const r = compare(FIXTURE);
    expect(r.status, r.stdout).toBe(0);
    expect(r.stdout).toContain(`${j.rows.length} runs, largest difference`);
  });
});
