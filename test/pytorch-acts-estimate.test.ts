// The PyTorch estimate for dense networks with each hidden activation against PyTorch 2.11 on an
// H200 (bench/torch_memory.py --only act-sigmoid,...,act-softplus --precisions fp32,bf16,fp16), and
// what each activation's node holds (src/report/torch-activations.ts).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { LayoutSpec } from '../src/index.js';
import { estimatePytorchMemory, type PytorchEstimate, type PytorchPrecision } from '../src/tools.js';
import { TORCH_ACTIVATIONS } from '../src/report/torch-activations.js';

const FILE = 'bench/results/torch-memory-acts-nvidia-h200.json';
const ACTS = ['sigmoid', 'tanh', 'gelu', 'gelu-tanh', 'silu', 'leaky-relu', 'softplus'] as const;
interface Row {
  network: string;
  layers: number[];
  activations: NonNullable<LayoutSpec['activations']>;
  batch: number;
  optimizer: 'sgd' | 'adam';
  dtype: 'float32';
  precision: PytorchPrecision;
  scalerSkippedStep?: boolean;
  stages: Array<{ stage: string; allocated: number; peak: number; reserved: number }>;
}
const measured = JSON.parse(readFileSync(FILE, 'utf8')) as { torch: string; device: string; rows: Row[] };
// As bench/torch-memory-compare.mjs builds it.
const specOf = (r: Row) => ({ layers: r.layers, batch: r.batch, dtype: r.dtype, optimizer: r.optimizer, activations: r.activations });
const figures = (e: PytorchEstimate) => e.stages.map((s) => ({ stage: s.stage, allocated: s.allocatedBytes, peak: s.peakBytes, reserved: s.reservedBytes }));

describe('estimatePytorchMemory with each hidden activation, against PyTorch 2.11 on an H200', () => {
  it('the file holds the seven activations with SGD and Adam, in fp32, bf16 and fp16 (GradScaler took every step)', () => {
    expect(measured.torch).toMatch(/^2\.11\./);
    expect(measured.device).toBe('NVIDIA H200');
    const keys = measured.rows.map((r) => `${r.network} ${r.optimizer} ${r.precision}`);
    expect(keys).toHaveLength(42);
    for (const a of ACTS) for (const o of ['sgd', 'adam']) for (const p of ['fp32', 'bf16', 'fp16']) expect(keys).toContain(`act-${a} ${o} ${p}`);
    for (const r of measured.rows) expect(r.activations).toEqual([r.network.slice(4), r.network.slice(4), 'softmax']);
    expect(measured.rows.filter((r) => r.precision === 'fp16').every((r) => r.scalerSkippedStep === false)).toBe(true);
  });

  for (const r of measured.rows)
    it(`${r.network} ${r.layers.join('-')} batch ${r.batch} ${r.optimizer} ${r.precision}: every stage's allocated, peak and reserved bytes to the byte`, () => {
      expect(figures(estimatePytorchMemory(specOf(r), { precision: r.precision }))).toEqual(r.stages);
    });

  it('bench/torch-memory-compare.mjs compares every row (none refused), 0.00% apart', () => {
    const c = spawnSync(process.execPath, ['bench/torch-memory-compare.mjs', FILE], { encoding: 'utf8' });
    expect(c.status, c.stdout + c.stderr).toBe(0);
    expect(c.stdout).not.toContain('Not compared');
    expect(c.stdout).toContain(`${measured.rows.length} runs, largest difference 0.00%, 0 stage(s) beyond 1.0%.`);
    expect(c.stdout).toMatch(/\| act-softplus 64-128-128-10 b100 \| sgd \| float32 bf16 \| forward \| 353,280 \| 353,280 \| \+0\.00% \| 404,480 \| 404,480 \|/);
  });
});

describe('estimatePytorchMemory: what each activation saves', () => {
  const B = 4;
  const spec = (act: (typeof ACTS)[number]) => ({ layers: [8, 16, 16, 4], batch: B, activations: [act, act, 'softmax' as const] });
  const stage = (e: PytorchEstimate, name: string) => e.stages.find((s) => s.stage === name)!;
  const names = (list: Array<{ name: string }>) => list.map((t) => t.name);

  it('one saving its result lets the Linear output go in forward; one saving its input keeps it until its node runs', () => {
    for (const act of ACTS) {
      const e = estimatePytorchMemory(spec(act));
      const freed = names(stage(e, 'forward').freed);
      if (TORCH_ACTIVATIONS[act].saves === 'result') expect(freed, act).toEqual(['linear1 output', 'linear2 output']);
      else expect(freed, act).toEqual([]);
      // backward: the node lets go of its incoming gradient (x_1's), then of what it saved
      const back = names(stage(e, 'backward').freed);
      const saved = TORCH_ACTIVATIONS[act].saves === 'result' ? `${act}1 output` : 'linear1 output';
      expect(back[back.indexOf('grad of layer 1 output') + 1], act).toBe(saved);
    }
    expect(ACTS.filter((a) => TORCH_ACTIVATIONS[a].saves === 'input')).toEqual(['gelu', 'gelu-tanh', 'silu', 'leaky-relu', 'softplus']);
  });

  it('autocast runs softplus in float32 on a cast of the Linear output (its node saves the cast); the others in bf16 / fp16', () => {
    for (const act of ACTS) {
      const fwd = Object.fromEntries(stage(estimatePytorchMemory(spec(act), { precision: 'bf16' }), 'forward').allocated.map((t) => [t.name, t.bytes]));
      expect(fwd[`${act}1 output`], act).toBe(B * 16 * (act === 'softplus' ? 4 : 2));
    }
    const e = estimatePytorchMemory(spec('softplus'), { precision: 'fp16' });
    const fwd = stage(e, 'forward');
    expect(names(fwd.allocated).slice(3, 6)).toEqual(['linear1 output', 'linear1 output float32', 'softplus1 output']);
    // the fp16 Linear output goes once softplus has run, the float32 output once the next Linear
    // has read its fp16 cast
    expect(names(fwd.freed)).toEqual(['linear1 output', 'softplus1 output', 'linear2 output', 'softplus2 output']);
    expect(names(fwd.allocated)).toContain('layer 1 output fp16');
    // backward: softplus's float32 gradient, then the cast's node turns it to fp16 for AddmmBackward
    const back = stage(e, 'backward').allocated.filter((t) => t.name.startsWith('grad of linear2 output'));
    expect(back.map((t) => [t.name, t.bytes])).toEqual([
      ['grad of linear2 output float32', B * 16 * 4],
      ['grad of linear2 output', B * 16 * 2],
    ]);
  });
});
