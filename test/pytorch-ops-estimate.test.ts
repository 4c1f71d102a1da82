// The PyTorch estimate with ops (layernorm, rmsnorm, dropout, residual, embedding: docs/ops.md's
// NnArena module) against PyTorch 2.11 on an H200 (bench/torch_memory.py --only
// layernorm,rmsnorm,dropout,residual,mixed-residual,embedding,ops --precisions fp32,bf16,fp16), and
// the layers it refuses.
import { describe, expect, it } from 'vitest';
import { LayoutError, type LayerSpec, type LayoutSpec } from '../src/index.js';
import { estimatePytorchMemory, TORCH_STAGES, type PytorchEstimate } from '../src/tools.js';
import { figures, measuredFileTests } from './support/torch-memory-file.js';

describe('estimatePytorchMemory with ops, against PyTorch 2.11 on an H200', () => {
  measuredFileTests(
    'bench/results/torch-memory-ops-nvidia-h200.json',
    ['layernorm', 'rmsnorm', 'dropout', 'residual', 'mixed-residual', 'embedding', 'ops'],
    [
      /\| ops 66-88-256-256-256-256-256-256-256-2 b512 \| adam \| float32 \| step \| 2,894,336 \| 2,894,336 \| \+0\.00% \|/,
      /\| ops 66-88-256-256-256-256-256-256-256-2 b512 \| adam \| float32 fp16 \| step \| 2,893,312 \| 2,893,312 \| \+0\.00% \|/,
    ],
  );
});

describe('estimatePytorchMemory with ops: what each op holds', () => {
  const stage = (e: PytorchEstimate, name: string) => e.stages.find((s) => s.stage === name)!;
  const names = (list: Array<{ name: string }>) => list.map((t) => t.name);

  it('keeps every layer output in NnArena.outs until forward returns: an unsaved one is freed then', () => {
    // Linear 1's output is the relu's input (a temporary of the expression); layer 2 (identity)
    // is read only by the residual's sum, which saves nothing: it goes with outs, at the end.
    const e = estimatePytorchMemory({ layers: [8, 16, { units: 16 }, { op: 'residual', from: 1 }, 4], batch: 2 });
    const fwd = stage(e, 'forward');
    expect(names(fwd.freed)).toEqual(['linear1 output', 'linear2 output']);
    expect(names(fwd.allocated).at(-1)).toBe('linear4 output');
    expect(fwd.peakBytes - fwd.allocatedBytes).toBe(512);
  });

  it('dropout with p = 0 returns its input: no tensor, no node, the figures of the network without it', () => {
    const withIt = estimatePytorchMemory({ layers: [32, 64, { op: 'dropout', p: 0 }, 10], batch: 16, optimizer: 'adam' });
    const without = estimatePytorchMemory({ layers: [32, 64, 10], batch: 16, optimizer: 'adam' });
    expect(figures(withIt)).toEqual(figures(without));
    expect(withIt.stages.flatMap((s) => names(s.allocated)).some((n) => n.startsWith('dropout'))).toBe(false);
  });

  it("a residual's gradient is handed on without a copy and the later one is added in place", () => {
    const e = estimatePytorchMemory({ layers: [8, 16, 16, { op: 'residual', from: 1 }, 4], batch: 2 });
    const back = stage(e, 'backward');
    expect(names(back.allocated).filter((n) => n.includes('(sum)'))).toEqual([]);
    // x + x through a dropout with p = 0: both operands are one tensor, so the engine adds out of place
    const twice = estimatePytorchMemory({ layers: [8, 16, { op: 'dropout', p: 0 }, { op: 'residual', from: 1 }, 4], batch: 2 });
    expect(names(stage(twice, 'backward').allocated)).toContain('grad of layer 1 output (sum)');
  });

  it('a layer on x itself: no gradient of x, and a dropout there keeps no mask', () => {
    const e = estimatePytorchMemory({ layers: [8, { op: 'dropout', p: 0.5 }, { op: 'layernorm' }, 4], batch: 2 });
    const fwd = stage(e, 'forward');
    expect(names(fwd.freed)).toContain('dropout1 mask (bool)');
    expect(names(stage(e, 'backward').allocated).filter((n) => n.startsWith('grad of layer'))).toEqual(['grad of layer 2 output']);
  });

  it("an embedding's backward copies strided index columns and gradient slices, not contiguous ones", () => {
    const one = (numeric: number, dims: number[]) =>
      names(
        stage(
          estimatePytorchMemory({
            layers: [numeric + dims.length, { op: 'embedding', numeric, categorical: dims.map((dim) => ({ cardinality: 5, dim })) }, 4],
            batch: 3,
          }),
          'backward',
        ).allocated,
      ).filter((n) => n.endsWith('.contiguous()'));
    expect(one(2, [3, 4])).toEqual([
      'idx[:, 1].contiguous()',
      'grad of tables.1 rows .contiguous()',
      'idx[:, 0].contiguous()',
      'grad of tables.0 rows .contiguous()',
    ]);
    expect(one(0, [3])).toEqual([]);
  });

  it('float64 doubles the activations, statistics and parameters; the mask and indices keep their bytes', () => {
    const spec: LayoutSpec<LayerSpec> = {
      layers: [
        3,
        {
          op: 'embedding',
          numeric: 1,
          categorical: [
            { cardinality: 4, dim: 2 },
            { cardinality: 9, dim: 3 },
          ],
        },
        64,
        { op: 'dropout', p: 0.2 },
        { op: 'layernorm' },
        4,
      ],
      batch: 64,
    };
    const bytes = (dtype: 'float32' | 'float64') =>
      Object.fromEntries(estimatePytorchMemory({ ...spec, dtype }).stages.flatMap((s) => s.allocated.map((t) => [t.name, t.bytes])));
    const [f32, f64] = [bytes('float32'), bytes('float64')];
    expect(f64['dropout3 mask (bool)']).toBe(f32['dropout3 mask (bool)']);
    expect(f64['idx = x[:, numeric:].long()']).toBe(64 * 2 * 8);
    expect(f64['embedding1 output (cat)']).toBe(2 * f32['embedding1 output (cat)']!);
    expect(f64['layernorm4 mean']).toBe(64 * 8); // the accumulate type of float64 is float64
    expect(f64['embedding1.tables.1.weight']).toBe(9 * 3 * 8);
  });
});

describe('estimatePytorchMemory with ops under autocast: what each op makes of its input', () => {
  const stage = (e: PytorchEstimate, name: string) => e.stages.find((s) => s.stage === name)!;
  const made = (e: PytorchEstimate, name: string) => Object.fromEntries(stage(e, name).allocated.map((t) => [t.name, t.bytes]));
  const B = 4;

  it('layernorm computes in float32 on a cast of its bf16 input; the next Linear reads a bf16 cast of its float32 output', () => {
    const e = estimatePytorchMemory({ layers: [8, 16, { op: 'layernorm' }, 4], batch: B }, { precision: 'bf16' });
    const fwd = made(e, 'forward');
    expect(fwd['layer 1 output float32']).toBe(B * 16 * 4);
    expect(fwd['layernorm2 output']).toBe(B * 16 * 4);
    expect(fwd['layernorm2 mean']).toBe(B * 4);
    expect(fwd['layer 2 output bf16']).toBe(B * 16 * 2);
    // backward: each cast's node gives the gradient back in its input's dtype
    const back = stage(e, 'backward').allocated.filter((t) => /^grad of layer [12]|^layernorm/.test(t.name));
    expect(back.map((t) => [t.name, t.bytes])).toEqual([
      ['grad of layer 2 output', B * 16 * 2], // Linear 3's, of the cast it read
      ['grad of layer 2 output float32', B * 16 * 4], // the cast's node
      ['grad of layer 1 output', B * 16 * 4], // layernorm's, of the float32 cast it read
      ['layernorm2.weight.grad', 16 * 4],
      ['layernorm2.bias.grad', 16 * 4],
      ['grad of layer 1 output bf16', B * 16 * 2], // the cast's node
    ]);
  });

  it('rmsnorm on a bf16 input runs op by op (no fused rstd), its output bf16; on a float32 input it is fused', () => {
    const composite = estimatePytorchMemory({ layers: [8, 16, { op: 'rmsnorm' }, 4], batch: B }, { precision: 'fp16' });
    const fwd = stage(composite, 'forward');
    expect(fwd.allocated.map((t) => t.name).filter((n) => n.startsWith('rmsnorm2') || n === 'layer 1 output float32')).toEqual([
      'layer 1 output float32',
      'rmsnorm2 pow(u, 2)',
      'rmsnorm2 mean',
      'rmsnorm2 rsqrt',
      'rmsnorm2 u * rsqrt',
      'rmsnorm2 (u * rsqrt) * weight',
      'rmsnorm2 output',
    ]);
    expect(made(composite, 'forward')['rmsnorm2 output']).toBe(B * 16 * 2);
    expect(fwd.freed.map((t) => t.name)).toEqual(['linear1 output', 'rmsnorm2 mean', 'rmsnorm2 pow(u, 2)', 'rmsnorm2 (u * rsqrt) * weight']);
    const fused = made(estimatePytorchMemory({ layers: [8, 16, { op: 'layernorm' }, { op: 'rmsnorm' }, 4], batch: B }, { precision: 'fp16' }), 'forward');
    expect(fused['rmsnorm3 rstd']).toBe(B * 4);
    expect(fused['rmsnorm3 output']).toBe(B * 16 * 4);
  });

  it("dropout keeps its input's dtype; an embedding's rows and its cat are float32", () => {
    const categorical = [7, 8].map((dim, j) => ({ cardinality: 5 + 4 * j, dim })); // 5 x 7 and 9 x 8
    const e = estimatePytorchMemory(
      { layers: [3, { op: 'embedding', numeric: 1, categorical }, 16, { op: 'dropout', p: 0.5 }, 4], batch: B },
      { precision: 'bf16' },
    );
    const fwd = made(e, 'forward');
    expect(fwd['tables.1(idx[:, 1])']).toBe(B * 8 * 4);
    expect(fwd['embedding1 output (cat)']).toBe(B * 16 * 4);
    expect(fwd['layer 1 output bf16']).toBe(B * 16 * 2);
    expect(fwd['dropout3 output']).toBe(B * 16 * 2);
    expect(fwd['dropout3 mask (bool)']).toBe(B * 16);
    expect(made(e, 'backward')['embedding1.tables.1.weight.grad']).toBe(9 * 8 * 4);
  });

  it('a residual adding a bf16 output to a float32 one: a float32 sum; the engine casts the gradient for the 16-bit operand', () => {
    // layer 3 = layernorm2's output (float32) + linear1's (bf16), as bench's mixed-residual
    const e = estimatePytorchMemory({ layers: [8, 16, { op: 'layernorm' }, { op: 'residual', from: 1 }, 4], batch: B }, { precision: 'bf16' });
    expect(made(e, 'forward')['residual3 output']).toBe(B * 16 * 4);
    const back = stage(e, 'backward').allocated.filter((t) => /^grad of layer [123]/.test(t.name));
    expect(back.map((t) => [t.name, t.bytes])).toEqual([
      ['grad of layer 3 output', B * 16 * 2], // Linear 4's, of the bf16 cast it read
      ['grad of layer 3 output float32', B * 16 * 4], // the cast's node: the sum's gradient
      ['grad of layer 1 output bf16', B * 16 * 2], // AddBackward's for linear1, cast to its dtype
      ['grad of layer 1 output', B * 16 * 4], // layernorm's, of the float32 cast it read
      ['grad of layer 1 output bf16', B * 16 * 2], // that cast's node, added in place into the first
    ]);
    expect(stage(e, 'backward').allocated.some((t) => t.name === 'grad of layer 1 output (sum)')).toBe(false);
    // the 16-bit operand first (x_{l-1}), or one operand x itself (no gradient): the same cast
    const first = estimatePytorchMemory({ layers: [8, 16, { op: 'layernorm' }, 16, { op: 'residual', from: 2 }, 4], batch: B }, { precision: 'fp16' });
    expect(made(first, 'backward')['grad of layer 3 output fp16']).toBe(B * 16 * 2);
    const fromX = estimatePytorchMemory({ layers: [8, 8, { op: 'residual', from: 0 }, 4], batch: B }, { precision: 'bf16' });
    expect(made(fromX, 'forward')['residual2 output']).toBe(B * 8 * 4);
    expect(made(fromX, 'backward')['grad of layer 1 output bf16']).toBe(B * 8 * 2);
  });
});

describe('estimatePytorchMemory refuses the layers it does not model, naming them', () => {
  const refused = (spec: LayoutSpec<LayerSpec>, options: object, field: string, text: RegExp) => {
    try {
      estimatePytorchMemory(spec, options);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(LayoutError);
      expect((e as LayoutError).code).toBe('BAD_LAYERS');
      expect((e as LayoutError).field).toBe(field);
      expect((e as Error).message).toMatch(text);
    }
  };

  it("under autocast, an rmsnorm on a 16-bit input above 1020 rows or 130560 units (its composite path's sums may split across blocks)", () => {
    const rms = (batch: number, width = 8): LayoutSpec<LayerSpec> => ({ layers: [4, width, { op: 'rmsnorm' }, 2], batch });
    refused(rms(1021), { precision: 'fp16' }, 'layers[2]', /rmsnorm on a 2-byte input runs op by op, and above 1020 rows \(batch 1021\)/);
    refused(rms(2, 130561), { precision: 'bf16' }, 'layers[2]', /130560 units \(130561\)/);
    expect(estimatePytorchMemory(rms(1020), { precision: 'bf16' }).stages).toHaveLength(TORCH_STAGES.length);
    expect(estimatePytorchMemory(rms(1021)).stages).toHaveLength(TORCH_STAGES.length); // fp32: the fused kernel
    // on a float32 input (a layernorm's output) rms_norm is fused under autocast too
    expect(estimatePytorchMemory({ layers: [4, 8, { op: 'layernorm' }, { op: 'rmsnorm' }, 2], batch: 1021 }, { precision: 'bf16' }).precision).toBe('bf16');
  });

  it('alpha-dropout (unmeasured)', () => {
    refused({ layers: [16, 32, { op: 'alpha-dropout', p: 0.1 }, 4], batch: 8 }, {}, 'layers[2]', /nn\.AlphaDropout/);
  });

  it("an embedding above 3072 indices a column (its backward's sort temporaries depend on the values)", () => {
    const emb = (batch: number): LayoutSpec<LayerSpec> => ({
      layers: [3, { op: 'embedding', numeric: 2, categorical: [{ cardinality: 7, dim: 2 }] }, 4],
      batch,
    });
    refused(emb(3073), {}, 'layers[1]', /above 3072 indices/);
    expect(estimatePytorchMemory(emb(3072)).stages).toHaveLength(TORCH_STAGES.length);
  });

  it("a norm above 65536 rows (its gain gradient's partial blocks depend on the GPU's SM count)", () => {
    refused({ layers: [4, 8, { op: 'rmsnorm' }, 2], batch: 65537 }, {}, 'layers[2]', /above 65536 rows .*SM count/);
    expect(estimatePytorchMemory({ layers: [4, 8, { op: 'rmsnorm' }, 2], batch: 65536 }).stages).toHaveLength(TORCH_STAGES.length);
  });
});
