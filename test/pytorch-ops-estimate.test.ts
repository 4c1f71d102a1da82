// The PyTorch estimate with ops (layernorm, rmsnorm, dropout, residual, embedding: docs/ops.md's
// NnArena module) against PyTorch 2.11 on an H200 (bench/torch_memory.py --only
// layernorm,rmsnorm,dropout,residual,embedding,ops), and the layers it refuses.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { LayoutError, type LayerSpec, type LayoutSpec } from '../src/index.js';
import { estimatePytorchMemory, TORCH_STAGES, type PytorchEstimate } from '../src/tools.js';

const FILE = 'bench/results/torch-memory-ops-nvidia-h200.json';
interface Row {
  network: string;
  layers: number[];
  ops: NonNullable<LayoutSpec['ops']>;
  activations: NonNullable<LayoutSpec['activations']>;
  batch: number;
  optimizer: 'sgd' | 'adam';
  dtype: 'float32';
  stages: Array<{ stage: string; allocated: number; peak: number; reserved: number }>;
}
const measured = JSON.parse(readFileSync(FILE, 'utf8')) as { torch: string; device: string; rows: Row[] };
// As bench/torch-memory-compare.mjs builds it.
const specOf = (r: Row) => ({ layers: r.layers, batch: r.batch, dtype: r.dtype, optimizer: r.optimizer, ops: r.ops, activations: r.activations });
const figures = (e: PytorchEstimate) => e.stages.map((s) => ({ stage: s.stage, allocated: s.allocatedBytes, peak: s.peakBytes, reserved: s.reservedBytes }));

describe('estimatePytorchMemory with ops, against PyTorch 2.11 on an H200', () => {
  it('the file holds the six networks with SGD and Adam, fp32', () => {
    expect(measured.torch).toMatch(/^2\.11\./);
    expect(measured.device).toBe('NVIDIA H200');
    const keys = measured.rows.map((r) => `${r.network} ${r.optimizer}`);
    for (const net of ['layernorm', 'rmsnorm', 'dropout', 'residual', 'embedding', 'ops'])
      for (const o of ['sgd', 'adam']) expect(keys).toContain(`${net} ${o}`);
  });

  for (const r of measured.rows)
    it(`${r.network} ${r.layers.join('-')} batch ${r.batch} ${r.optimizer}: every stage's allocated, peak and reserved bytes to the byte`, () => {
      expect(figures(estimatePytorchMemory(specOf(r)))).toEqual(r.stages);
    });

  it('bench/torch-memory-compare.mjs compares every row (none refused), 0.00% apart', () => {
    const c = spawnSync(process.execPath, ['bench/torch-memory-compare.mjs', FILE], { encoding: 'utf8' });
    expect(c.status, c.stdout + c.stderr).toBe(0);
    expect(c.stdout).not.toContain('Not compared');
    expect(c.stdout).toContain(`${measured.rows.length} runs, largest difference 0.00%, 0 stage(s) beyond 1.0%.`);
    expect(c.stdout).toMatch(/\| ops 66-88-256-256-256-256-256-256-256-2 b512 \| adam \| float32 \| step \| 2,894,336 \| 2,894,336 \| \+0\.00% \|/);
  });
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
  const NET: LayoutSpec<LayerSpec> = { layers: [16, 32, { op: 'layernorm' }, { op: 'dropout', p: 0.1 }, 4], batch: 8 };

  it('ops under autocast (bf16, fp16): measured in fp32 only', () => {
    refused(NET, { precision: 'bf16' }, 'layers[2]', /layernorm layer in plain steps only .*autocast \(bf16\)/);
    refused(NET, { precision: 'fp16' }, 'layers[2]', /autocast \(fp16\)/);
    for (const precision of ['bf16', 'fp16'] as const)
      expect(estimatePytorchMemory({ layers: [16, 32, 4], batch: 8 }, { precision }).precision).toBe(precision);
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
