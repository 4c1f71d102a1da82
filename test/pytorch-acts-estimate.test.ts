// The PyTorch estimate for dense networks with each hidden activation against PyTorch 2.11 on an
// H200 (bench/torch_memory.py --only act-sigmoid,...,act-softplus --precisions fp32,bf16,fp16), and
// what each activation's node holds (src/report/torch-activations.ts).
import { describe, expect, it } from 'vitest';
import { estimatePytorchMemory, type PytorchEstimate } from '../src/tools.js';
import { TORCH_ACTIVATIONS } from '../src/report/torch-activations.js';
import { measuredFileTests } from './support/torch-memory-file.js';

const ACTS = ['sigmoid', 'tanh', 'gelu', 'gelu-tanh', 'silu', 'leaky-relu', 'softplus'] as const;

describe('estimatePytorchMemory with each hidden activation, against PyTorch 2.11 on an H200', () => {
  const measured = measuredFileTests(
    'bench/results/torch-memory-acts-nvidia-h200.json',
    ACTS.map((a) => `act-${a}`),
    [/\| act-softplus 64-128-128-10 b100 \| sgd \| float32 bf16 \| forward \| 353,280 \| 353,280 \| \+0\.00% \| 404,480 \| 404,480 \|/],
  );
  it('each row records its activation in both hidden layers', () => {
    for (const r of measured.rows) expect(r.activations).toEqual([r.network.slice(4), r.network.slice(4), 'softmax']);
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
