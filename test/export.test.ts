// export.test.ts: models out (issue 31). ONNX Runtime (onnxruntime-node, a dev dependency) runs
// the exported ONNX graph and gives predict()'s outputs; safetensors round-trips nn-arena ->
// file -> nn-arena bit for bit; the file's names and shapes are PyTorch nn.Sequential's; bad
// files and mismatched tensors are typed errors (PyTorch itself: bench/export_check.py).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { Arena, DataError, planLayout, Trainer, type Activation, type Dtype } from '../src/index.js';
import { loadSafetensors, readSafetensors, saveOnnx, saveSafetensors, toOnnx, toSafetensors } from '../src/io.js';
import { codeOf } from './support/errors.js';
import { toyData } from './support/train-checks.js';

// A view's own bytes (a view slices the arena's one host buffer: view.buffer is all of it).
const bytesOf = (v: ArrayBufferView) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-export-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A trained network (a few steps, so biases are not zero) and inputs of `count` rows. */
async function trained(layers: number[], activations: Activation[], dtype: Dtype = 'float32', count = 37, leakyReluSlope?: number) {
  const arena = Arena.create(
    planLayout({ layers, batch: 8, activations, dtype, optimizer: 'adam', samples: 64, ...(leakyReluSlope === undefined ? {} : { leakyReluSlope }) }),
    cpu,
  );
  const t = new Trainer(arena, { lr: 0.01 });
  t.init(3);
  const mse = activations[activations.length - 1] !== 'softmax';
  const data = toyData(layers[0]!, layers[layers.length - 1]!, 64, 5, mse);
  await t.fit(data, { epochs: 2, seed: 1 });
  const x = toyData(layers[0]!, layers[layers.length - 1]!, count, 9, true).x;
  return { arena, t, x };
}

async function runOnnx(bytes: Uint8Array, x: Float32Array | Float64Array, inputs: number): Promise<Float32Array | Float64Array> {
  const session = await ort.InferenceSession.create(bytes);
  const input = new ort.Tensor(x instanceof Float64Array ? 'float64' : 'float32', x, [x.length / inputs, inputs]);
  const out = await session.run({ input });
  return out.output!.data as Float32Array | Float64Array;
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

describe('ONNX export, run by onnxruntime-node', () => {
  const cases: Array<{ layers: number[]; activations: Activation[]; slope?: number }> = [
    { layers: [6, 16, 5], activations: ['relu', 'softmax'] },
    { layers: [5, 12, 9, 3], activations: ['tanh', 'sigmoid', 'identity'] },
    { layers: [4, 7, 6, 2], activations: ['identity', 'relu', 'tanh'] },
    { layers: [3, 5, 4], activations: ['relu', 'sigmoid'] },
    // the round-3 activations: Gelu (opset 20, erf and tanh forms), x * Sigmoid(x), LeakyRelu, Softplus
    { layers: [6, 16, 9, 5], activations: ['gelu', 'silu', 'softmax'] },
    { layers: [5, 12, 9, 3], activations: ['gelu-tanh', 'softplus', 'identity'] },
    { layers: [4, 10, 3], activations: ['leaky-relu', 'softmax'], slope: 0.2 },
  ];
  for (const c of cases) {
    it(`${c.layers.join('-')} ${c.activations.join(',')}: ONNX Runtime gives predict()'s outputs within 1e-6 (float32)`, async () => {
      const { arena, t, x } = await trained(c.layers, c.activations, 'float32', 37, c.slope);
      try {
        const ours = await t.predict(x);
        const theirs = await runOnnx(toOnnx(arena), Float32Array.from(x), c.layers[0]!);
        expect(theirs).toBeInstanceOf(Float32Array);
        expect(maxDiff(ours, theirs)).toBeLessThan(1e-6);
      } finally {
        arena.dispose();
      }
    });
  }

  it('float64: within 1e-12; saveOnnx writes the same bytes as toOnnx', async () => {
    const { arena, t, x } = await trained([5, 9, 4], ['tanh', 'softmax'], 'float64');
    try {
      const ours = await t.predict(x);
      const bytes = toOnnx(arena);
      const theirs = await runOnnx(bytes, Float64Array.from(x), 5);
      expect(maxDiff(ours, theirs)).toBeLessThan(1e-12);
      const path = join(dir, 'm.onnx');
      expect(saveOnnx(arena, path)).toBe(bytes.length);
      expect(Buffer.compare(readFileSync(path), bytes)).toBe(0);
    } finally {
      arena.dispose();
    }
  });

  it('K models: model m exports model m', async () => {
    const arena = Arena.create(planLayout({ layers: [4, 6, 3], batch: 4, models: 3, samples: 16 }), cpu);
    try {
      const t = new Trainer(arena, { lr: 0.1 });
      t.init(1);
      await t.fit(toyData(4, 3, 16, 2, false), { epochs: 1 });
      const x = toyData(4, 3, 5, 4, true).x;
      for (const model of [0, 2]) {
        const ours = await t.predict(x, { model });
        expect(maxDiff(ours, await runOnnx(toOnnx(arena, { model }), Float32Array.from(x), 4))).toBeLessThan(1e-6);
      }
      expect(codeOf(() => toOnnx(arena, { model: 3 }))).toBe('BAD_OPTION');
    } finally {
      arena.dispose();
    }
  });
});

describe('safetensors', () => {
  it('has nn.Sequential names, [out, in] weights, F32, an 8-aligned header and metadata', async () => {
    const { arena } = await trained([6, 16, 5], ['relu', 'softmax']);
    try {
      const bytes = toSafetensors(arena);
      const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
      expect((8 + n) % 8).toBe(0);
      const header = JSON.parse(Buffer.from(bytes.subarray(8, 8 + n)).toString('utf8'));
      expect(Object.keys(header).filter((k) => k !== '__metadata__')).toEqual(['0.weight', '0.bias', '2.weight', '2.bias']);
      expect(header['0.weight']).toEqual({ dtype: 'F32', shape: [16, 6], data_offsets: [0, 384] });
      expect(header['2.bias']).toEqual({ dtype: 'F32', shape: [5], data_offsets: [384 + 64 + 320, 384 + 64 + 320 + 20] });
      expect(header.__metadata__.nn_arena_sequential).toBe('Sequential(Linear(6, 16), ReLU(), Linear(16, 5), Softmax(dim=1))');
      const f = readSafetensors(bytes);
      expect(Array.from(f.tensors.get('0.weight')!.data)).toEqual(Array.from(arena.view(1, 'w')));
      expect(Array.from(f.tensors.get('2.bias')!.data)).toEqual(Array.from(arena.view(2, 'b')));
    } finally {
      arena.dispose();
    }
  });

  for (const dtype of ['float32', 'float64'] as const) {
    it(`round trip nn-arena -> safetensors -> nn-arena (${dtype}): the same weights bit for bit and the same predictions`, async () => {
      const { arena, t, x } = await trained([5, 12, 9, 3], ['tanh', 'relu', 'softmax'], dtype);
      const other = Arena.create(planLayout({ layers: [5, 12, 9, 3], batch: 3, activations: ['tanh', 'relu', 'softmax'], dtype }), cpu);
      try {
        const path = join(dir, `rt-${dtype}.safetensors`);
        saveSafetensors(arena, path);
        const t2 = new Trainer(other);
        t2.init(99); // different weights, on both sides: the import must replace them
        loadSafetensors(other, path);
        for (let l = 1; l <= 3; l++) {
          expect(Buffer.compare(bytesOf(other.view(l, 'w')), bytesOf(arena.view(l, 'w')))).toBe(0);
          expect(Buffer.compare(bytesOf(other.view(l, 'b')), bytesOf(arena.view(l, 'b')))).toBe(0);
        }
        expect(Array.from(await t2.predict(x))).toEqual(Array.from(await t.predict(x)));
      } finally {
        arena.dispose();
        other.dispose();
      }
    });
  }

  it('F64 tensors load into a float32 arena (rounded), and F32 into a float64 one', async () => {
    const { arena } = await trained([4, 6, 2], ['tanh', 'identity'], 'float64');
    const f32 = Arena.create(planLayout({ layers: [4, 6, 2], batch: 2, activations: ['tanh', 'identity'] }), cpu);
    try {
      loadSafetensors(f32, toSafetensors(arena));
      expect(Array.from(f32.view(1, 'w'))).toEqual(Array.from(arena.view(1, 'w'), Math.fround));
    } finally {
      arena.dispose();
      f32.dispose();
    }
  });

  it('refuses tensors that do not fit the network, naming them, before writing anything', async () => {
    const { arena } = await trained([6, 16, 5], ['relu', 'softmax']);
    const bytes = toSafetensors(arena);
    const wrong = (layers: number[]) => Arena.create(planLayout({ layers, batch: 2 }), cpu);
    const cases: Array<[number[], string]> = [
      [[6, 15, 5], '0.weight.shape'],
      [[6, 16, 5, 3], '4.weight'],
      [[6, 5], '0.weight.shape'],
    ];
    try {
      for (const [layers, field] of cases) {
        const a = wrong(layers);
        try {
          const before = Float32Array.from(a.view(1, 'w'));
          let err: unknown;
          try {
            loadSafetensors(a, bytes);
          } catch (e) {
            err = e;
          }
          expect(err).toBeInstanceOf(DataError);
          expect((err as DataError).code).toBe('BAD_TENSOR');
          expect((err as DataError).field).toBe(field);
          expect(Array.from(a.view(1, 'w'))).toEqual(Array.from(before));
        } finally {
          a.dispose();
        }
      }
    } finally {
      arena.dispose();
    }
  });

  it('refuses malformed files with BAD_FILE (crafted cases and fuzzed headers); never anything else', () => {
    const file = (header: unknown, data = new Uint8Array(0)) => {
      const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
      const out = new Uint8Array(8 + json.length + data.length);
      new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
      out.set(json, 8);
      out.set(data, 8 + json.length);
      return out;
    };
    const crafted: Array<[Uint8Array, string]> = [
      [new Uint8Array(5), 'header size'],
      [Uint8Array.of(255, 255, 255, 255, 0, 0, 0, 0, 123), 'header size'],
      [file('{"a":'), 'header'],
      [file([1, 2]), 'header'],
      [file({ a: { dtype: 'I8', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)), 'a.dtype'],
      [file({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 4] } }, new Uint8Array(4)), 'a.data_offsets'],
      [file({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 8] } }, new Uint8Array(4)), 'a.data_offsets'],
      [file({ a: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, new Uint8Array(4)), 'a.shape'],
      [file({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, new Uint8Array(8)), 'a.data_offsets'],
      [file({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, new Uint8Array(8)), 'data'],
      [
        file({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, b: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4)),
        'b.data_offsets',
      ],
      [file({ __metadata__: { a: 1 } }), '__metadata__'],
    ];
    for (const [bytes, field] of crafted) {
      let err: unknown;
      try {
        readSafetensors(bytes);
      } catch (e) {
        err = e;
      }
      expect(err, field).toBeInstanceOf(DataError);
      expect((err as DataError).code).toBe('BAD_FILE');
      expect((err as DataError).field).toBe(field);
    }
    // A valid file, then random byte flips and truncations: a parsed file or BAD_FILE.
    const good = file(
      { __metadata__: { k: 'v' }, w: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] }, b: { dtype: 'F64', shape: [1], data_offsets: [16, 24] } },
      new Uint8Array(24),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(good.length - 1), fc.nat(255)), { maxLength: 6 }), fc.nat(good.length), (flips, cut) => {
        const b = good.slice(0, cut === 0 ? good.length : cut);
        for (const [i, v] of flips) if (i < b.length) b[i] = v;
        const code = codeOf(() => readSafetensors(b));
        expect([undefined, 'BAD_FILE']).toContain(code);
      }),
      { numRuns: 500 },
    );
  });
});

/** ONNX Runtime on the exported graph gives the trained network's predict() (float64 within
 *  1e-12, float32 within 1e-6); the arena is disposed after. */
async function onnxGivesPredict(r: { arena: Arena; t: Trainer; x: ArrayLike<number> }, dtype: Dtype, inputs: number): Promise<void> {
  try {
    const ours = await r.t.predict(r.x);
    const input = dtype === 'float64' ? Float64Array.from(r.x) : Float32Array.from(r.x);
    expect(maxDiff(ours, await runOnnx(toOnnx(r.arena), input, inputs))).toBeLessThan(dtype === 'float64' ? 1e-12 : 1e-6);
  } finally {
    r.arena.dispose();
  }
}

describe('export of a network with ops (layernorm, dropout, residual, rmsnorm)', () => {
  const layers = [
    6,
    { units: 8, activation: 'relu' },
    { op: 'layernorm' },
    { op: 'dropout', p: 0.3 },
    { units: 8 },
    { op: 'residual', from: 1 },
    { op: 'rmsnorm' },
    { units: 3, activation: 'softmax' },
  ] as const;

  async function trainedOps(dtype: Dtype) {
    const arena = Arena.create(planLayout({ layers: layers as never, batch: 8, dtype, optimizer: 'adam', samples: 64 }), cpu);
    const t = new Trainer(arena, { lr: 0.01, dropoutSeed: 4 });
    t.init(3);
    await t.fit(toyData(6, 3, 64, 5, false), { epochs: 2, seed: 1 });
    return { arena, t, x: toyData(6, 3, 21, 9, true).x };
  }

  it.each(['float32', 'float64'] as const)('%s: ONNX Runtime gives predict()', async (dtype) => onnxGivesPredict(await trainedOps(dtype), dtype, 6));

  it('safetensors: the norms gain and bias under the layer indices, a round trip bit for bit, the module in the metadata', async () => {
    const { arena, t, x } = await trainedOps('float32');
    try {
      const bytes = toSafetensors(arena);
      const file = readSafetensors(bytes);
      expect([...file.tensors.keys()].sort()).toEqual(['0.bias', '0.weight', '10.weight', '12.bias', '12.weight', '2.bias', '2.weight', '6.bias', '6.weight']);
      expect(file.tensors.get('2.weight')!.shape).toEqual([8]);
      expect(file.tensors.get('10.weight')!.shape).toEqual([8]);
      expect(file.metadata.nn_arena_sequential).toBe(
        'NnArena(Linear(6, 8), ReLU(), LayerNorm(8, eps=0.00001), Identity(), Dropout(p=0.3), Identity(), Linear(8, 8), Identity(), Residual(1), Identity(), RMSNorm(8, eps=1.1920928955078125e-7), Identity(), Linear(8, 3), Softmax(dim=1))',
      );
      using again = Arena.create(arena.plan, cpu);
      loadSafetensors(again, bytes);
      const t2 = new Trainer(again);
      expect(Array.from(await t2.predict(x))).toEqual(Array.from(await t.predict(x)));
    } finally {
      arena.dispose();
    }
  });
});

describe('export of a network with an embedding', () => {
  const layers = [
    5,
    {
      op: 'embedding',
      numeric: 3,
      categorical: [
        { cardinality: 5, dim: 3 },
        { cardinality: 7, dim: 2 },
      ],
    },
    { units: 8, activation: 'relu' },
    { units: 3, activation: 'softmax' },
  ] as const;
  // x's last two columns as indices of their tables
  const indexed = (x: Float64Array) => x.map((v, i) => (i % 5 < 3 ? v : Math.floor(Math.abs(v) * 1000) % (i % 5 === 3 ? 5 : 7)));

  async function trainedEmbedding(dtype: Dtype) {
    const arena = Arena.create(planLayout({ layers: layers as never, batch: 8, dtype, optimizer: 'adam', samples: 64 }), cpu);
    const t = new Trainer(arena, { lr: 0.01 });
    t.init(3);
    const data = toyData(5, 3, 64, 5, false);
    await t.fit({ x: indexed(data.x), labels: data.labels! }, { epochs: 2, seed: 1 });
    return { arena, t, x: indexed(toyData(5, 3, 21, 9, true).x) };
  }

  it.each(['float32', 'float64'] as const)('%s: ONNX Runtime gives predict() (Slice, Cast, Gather, Concat)', async (dtype) =>
    onnxGivesPredict(await trainedEmbedding(dtype), dtype, 5),
  );

  it('safetensors: each table as {i}.tables.{j}.weight [cardinality, dim], a round trip bit for bit', async () => {
    const { arena, t, x } = await trainedEmbedding('float32');
    try {
      const bytes = toSafetensors(arena);
      const file = readSafetensors(bytes);
      expect([...file.tensors.keys()].sort()).toEqual(['0.tables.0.weight', '0.tables.1.weight', '2.bias', '2.weight', '4.bias', '4.weight']);
      expect(file.tensors.get('0.tables.0.weight')!.shape).toEqual([5, 3]);
      expect(file.tensors.get('0.tables.1.weight')!.shape).toEqual([7, 2]);
      expect(file.metadata.nn_arena_sequential).toBe(
        'NnArena(Embeddings(3, [(5, 3), (7, 2)]), Identity(), Linear(8, 8), ReLU(), Linear(8, 3), Softmax(dim=1))',
      );
      using again = Arena.create(arena.plan, cpu);
      loadSafetensors(again, bytes);
      const t2 = new Trainer(again);
      expect(Array.from(await t2.predict(x))).toEqual(Array.from(await t.predict(x)));
    } finally {
      arena.dispose();
    }
  });
});
