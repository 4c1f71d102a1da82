// A committed measurement of PyTorch's allocations (bench/torch_memory.py's JSON under
// bench/results) against the estimate: every row's stages to the byte, and
// bench/torch-memory-compare.mjs's verdict on the file. The tests of each file name the rows it
// must hold and a line of the compare's table.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import type { LayoutSpec } from '../../src/index.js';
import { estimatePytorchMemory, type PytorchEstimate, type PytorchPrecision } from '../../src/tools.js';

export interface MeasuredRow {
  network: string;
  layers: number[];
  ops?: NonNullable<LayoutSpec['ops']>;
  activations: NonNullable<LayoutSpec['activations']>;
  batch: number;
  optimizer: 'sgd' | 'adam';
  dtype: 'float32';
  precision: PytorchPrecision;
  scalerSkippedStep?: boolean;
  stages: Array<{ stage: string; allocated: number; peak: number; reserved: number }>;
}
export interface Measured {
  torch: string;
  device: string;
  rows: MeasuredRow[];
}

export const readMeasured = (file: string): Measured => JSON.parse(readFileSync(file, 'utf8')) as Measured;

// As bench/torch-memory-compare.mjs builds it.
const specOf = (r: MeasuredRow) => ({
  layers: r.layers,
  batch: r.batch,
  dtype: r.dtype,
  optimizer: r.optimizer,
  ...(r.ops ? { ops: r.ops } : {}),
  activations: r.activations,
});
export const figures = (e: PytorchEstimate) =>
  e.stages.map((s) => ({ stage: s.stage, allocated: s.allocatedBytes, peak: s.peakBytes, reserved: s.reservedBytes }));

/** The file's header and rows (`networks` x SGD and Adam x fp32 / bf16 / fp16, GradScaler taking
 *  every step), each row's stages to the byte, and the compare script at 0.00% with `lines` in
 *  its table. Call inside a describe. */
export function measuredFileTests(file: string, networks: readonly string[], lines: readonly RegExp[]): Measured {
  const measured = readMeasured(file);
  it(`the file holds ${networks.length} networks with SGD and Adam, in fp32, bf16 and fp16 (GradScaler took every step)`, () => {
    expect(measured.torch).toMatch(/^2\.11\./);
    expect(measured.device).toBe('NVIDIA H200');
    const keys = measured.rows.map((r) => `${r.network} ${r.optimizer} ${r.precision}`);
    expect(keys).toHaveLength(networks.length * 6);
    for (const net of networks) for (const o of ['sgd', 'adam']) for (const p of ['fp32', 'bf16', 'fp16']) expect(keys).toContain(`${net} ${o} ${p}`);
    expect(measured.rows.filter((r) => r.precision === 'fp16').every((r) => r.scalerSkippedStep === false)).toBe(true);
  });

  for (const r of measured.rows)
    it(`${r.network} ${r.layers.join('-')} batch ${r.batch} ${r.optimizer} ${r.precision}: every stage's allocated, peak and reserved bytes to the byte`, () => {
      expect(figures(estimatePytorchMemory(specOf(r), { precision: r.precision }))).toEqual(r.stages);
    });

  it('bench/torch-memory-compare.mjs compares every row (none refused), 0.00% apart', () => {
    const c = spawnSync(process.execPath, ['bench/torch-memory-compare.mjs', file], { encoding: 'utf8' });
    expect(c.status, c.stdout + c.stderr).toBe(0);
    expect(c.stdout).not.toContain('Not compared');
    expect(c.stdout).toContain(`${measured.rows.length} runs, largest difference 0.00%, 0 stage(s) beyond 1.0%.`);
    for (const line of lines) expect(c.stdout).toMatch(line);
  });
  return measured;
}
