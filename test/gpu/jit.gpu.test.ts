// Issue 17 part 4 on the GPU: a JIT kernel (NVRTC) reads one region and writes another of the
// arena, checked against JS; compile errors carry the log; the cache; ordering with the runs.
//   NN_ARENA_REQUIRE_GPU=1 npx vitest run test/gpu/jit.gpu.test.ts
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, cudaInfo, minDeviceBudget, planLayout, Trainer, type LayoutSpec } from '../../src/index.js';
import { EXTRA_SPEC, EXTRA_SRC } from '../support/jit-extras.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;

// mw[i] = alpha * w[i] + beta over layer `layer` (a momentum plan has mw for every weighted layer).
const SRC = `#include <nn_arena.h>
extern "C" __global__ void affine(void* base, unsigned int layer, float alpha, double beta) {
  nna_bound_layer<float> L = nna_bind<float>(base, layer);
  const unsigned long long n = L.units * L.fan_in;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
    L.mw[i] = alpha * L.w[i] + (float)beta;
}
`;

describe.skipIf(!hasGpu)(`JIT kernels on ${info.name || 'no device'}`, () => {
  const plan = () => planLayout({ layers: [40, 300, 10], batch: 8, optimizer: 'momentum' });

  it('a kernel reads w of layer 1 and writes mw of layer 1, as JS computes it', async () => {
    using a = Arena.create(plan(), { backend: 'cuda' });
    const w = a.view(1, 'w') as Float32Array;
    for (let i = 0; i < w.length; i++) w[i] = Math.sin(i) * 3;
    a.toDevice();
    const k = a.compileKernel(SRC, 'affine', ['u32', 'f32', 'f64']);
    await k.launch({ grid: 4, block: [128] }, 1, 0.5, 0.25);
    a.toHost({ layers: [1], kinds: ['mw'] });
    const mw = a.view(1, 'mw');
    const expected = Float32Array.from(w, (x) => Math.fround(Math.fround(0.5 * x) + 0.25));
    expect(Array.from(mw)).toEqual(Array.from(expected));
    // Layer 2's mw untouched.
    a.toHost();
    expect(a.view(2, 'mw').every((x) => x === 0)).toBe(true);
  });

  it('a kernel finds user regions by name in device code: reads one (and w), writes another', async () => {
    using a = Arena.create(planLayout(EXTRA_SPEC as LayoutSpec), { backend: 'cuda' });
    for (const l of [1, 2, 3]) {
      const w = a.view(l, 'w') as Float32Array;
      for (let i = 0; i < w.length; i++) w[i] = Math.sin(i + l) * 3;
      const sc = a.view('scale', l) as Float32Array;
      for (let j = 0; j < sc.length; j++) sc[j] = 0.5 + j / 8 + l;
    }
    a.toDevice();
    const k = a.compileKernel(EXTRA_SRC, 'scaleRows', ['u32']);
    await k.launch({ grid: 8, block: 128 }, 1); // 'flags' is entry 1 of the kind table
    for (const l of [1, 3]) a.view('scaled', l).fill(-1);
    a.toHost({ kinds: ['scaled', 'flags'] });
    for (const l of [1, 3]) {
      const w = a.view(l, 'w'),
        sc = a.view('scale', l),
        fanIn = EXTRA_SPEC.layers[l - 1]!;
      expect(Array.from(a.view('scaled', l))).toEqual(Array.from(w, (x, i) => Math.fround(sc[Math.floor(i / fanIn)]! * x)));
    }
    expect(a.plan.region(2, 'scaled')).toBeUndefined();
    expect(Array.from(a.view('flags'))).toEqual([0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 's'.charCodeAt(0), 3]);
    // Nothing else was written: the whole device side matches the host but for what the kernel wrote.
    a.toHost();
    expect(a.view(2, 'mw').every((x) => x === 0)).toBe(true);
    expect(a.view('scale', 2)[0]).toBe(2.5);
  });

  it('the cache returns the same kernel for the same source, name and signature', () => {
    using a = Arena.create(plan(), { backend: 'cuda' });
    const k = a.compileKernel(SRC, 'affine', ['u32', 'f32', 'f64']);
    expect(a.compileKernel(SRC, 'affine', ['u32', 'f32', 'f64'])).toBe(k);
    expect(a.compileKernel(`${SRC}\n`, 'affine', ['u32', 'f32', 'f64'])).not.toBe(k);
    // A second arena shares the compiled module (fast) but gets its own kernel object.
    using b = Arena.create(plan(), { backend: 'cuda' });
    const t0 = performance.now();
    const kb = b.compileKernel(SRC, 'affine', ['u32', 'f32', 'f64']);
    expect(kb).not.toBe(k);
    expect(performance.now() - t0).toBeLessThan(50);
  });

  it('a compile error is COMPILE_FAILED with the compiler log', () => {
    using a = Arena.create(plan(), { backend: 'cuda' });
    try {
      a.compileKernel(`${SRC}\nnot CUDA at all;\n`, 'affine', ['u32', 'f32', 'f64']);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ArenaError);
      expect((e as ArenaError).code).toBe('COMPILE_FAILED');
      expect((e as ArenaError).message).toMatch(/did not compile for sm_\d+:\n.*error/s);
      expect((e as ArenaError).detail).toMatch(/error/);
    }
    // A signature other than the kernel's is refused by the compiler, naming the one expected.
    expect(() => a.compileKernel(SRC, 'affine', ['u32', 'f32', 'f32'])).toThrow(/void affine\(void\* base, unsigned int, float, float\)/);
  });

  it('launch arguments are checked against the signature', async () => {
    using a = Arena.create(plan(), { backend: 'cuda' });
    const k = a.compileKernel(SRC, 'affine', ['u32', 'f32', 'f64']);
    await expect(k.launch({ grid: 1, block: 1 }, 1, 0.5)).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'args' });
    await expect(k.launch({ grid: 1, block: 1 }, -1, 0.5, 0)).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'args[0]' });
    await expect(k.launch({ grid: 1, block: 1 }, 1, 2n as never, 0)).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'args[1]' });
    await expect(k.launch({ grid: 0, block: 1 }, 1, 1, 0)).rejects.toMatchObject({ code: 'BAD_OPTION', field: 'grid' });
    // A block larger than the device allows: the launch fails with CUDA's error.
    await expect(k.launch({ grid: 1, block: 4096 }, 1, 1, 0)).rejects.toMatchObject({ code: 'CUDA_ERROR' });
    await k.launch({ grid: 1, block: 32 }, 1n as never, 1, 0);
  });

  it('launches are queued with the runs in call order', async () => {
    using a = Arena.create(plan(), { backend: 'cuda' });
    const t = new Trainer(a, { lr: 0.1, momentum: 0.9 });
    t.init(5);
    const x = Array.from({ length: 8 * 40 }, (_, i) => Math.cos(i));
    const labels = Array.from({ length: 8 }, (_, i) => i % 10);
    // mw := w after the step: the step's own momentum write comes before it.
    const copy = a.compileKernel(SRC, 'affine', ['u32', 'f32', 'f64']);
    const step = t.step(x, { labels });
    const launched = copy.launch({ grid: 8, block: 256 }, 1, 1, 0);
    await Promise.all([step, launched]);
    await a.synchronize();
    a.toHost();
    expect(Array.from(a.view(1, 'mw'))).toEqual(Array.from(a.view(1, 'w')));
  });

  it('staged memory is NOT_SUPPORTED', () => {
    using a = Arena.create(plan(), { backend: 'cuda', memory: 'staged', deviceBudget: minDeviceBudget(plan(), 'staged').bytes });
    expect(() => a.compileKernel(SRC, 'affine', ['u32', 'f32', 'f64'])).toThrow(/staged memory/);
  });
});
