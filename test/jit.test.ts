// Issue 17 part 4 on machines without a GPU: JIT kernels are NOT_SUPPORTED on the CPU backend,
// their arguments are checked before anything is compiled, the cache key, arena.synchronize(),
// and (where NVRTC is found, e.g. NN_ARENA_NVRTC) compiles for a fixed architecture without a
// device. test/gpu/jit.gpu.test.ts launches them.
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, cudaInfo, planLayout, Trainer } from '../src/index.js';
import { compileOnly, kernelKey, runArena } from '../src/internal.js';
import { OPS } from '../src/native/addon.js';
import { codeOf } from './support/errors.js';
import { EXTRA_SRC } from './support/jit-extras.js';

const SPEC = { layers: [6, 5, 3], batch: 4 } as const;
const SRC = `#include <nn_arena.h>
extern "C" __global__ void scaleW(void* base, float f, unsigned long long n) {
  nna_bound_layer<float> L = nna_bind<float>(base, 1);
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) L.dw[i] = f * L.w[i];
}
`;

describe('compileKernel on the CPU backend', () => {
  it('is NOT_SUPPORTED, with a clear message', () => {
    using a = Arena.create(planLayout(SPEC), { backend: 'cpu' });
    expect(codeOf(() => a.compileKernel(SRC, 'scaleW', ['f32', 'u64']))).toBe('NOT_SUPPORTED');
    expect(() => a.compileKernel(SRC, 'scaleW', ['f32', 'u64'])).toThrow(/CUDA backend; this arena uses the CPU backend/);
  });

  it('checks its arguments first (BAD_OPTION naming the field)', () => {
    using a = Arena.create(planLayout(SPEC), { backend: 'cpu' });
    const bad: Array<[unknown, unknown, unknown, string]> = [
      ['', 'k', [], 'source'],
      [42, 'k', [], 'source'],
      [SRC, 'not an identifier', [], 'name'],
      [SRC, 'k; int x', [], 'name'],
      [SRC, 'k', ['float'], 'params'],
      [SRC, 'k', 'f32', 'params'],
    ];
    for (const [src, name, params, field] of bad) {
      try {
        a.compileKernel(src as string, name as string, params as never);
        expect.unreachable();
      } catch (e) {
        expect((e as { code: string }).code).toBe('BAD_OPTION');
        expect((e as { field: string }).field).toBe(field);
      }
    }
  });

  it('is DISPOSED on a disposed arena', () => {
    const a = Arena.create(planLayout(SPEC), { backend: 'cpu' });
    a.dispose();
    expect(codeOf(() => a.compileKernel(SRC, 'scaleW'))).toBe('DISPOSED');
  });
});

describe('the kernel cache key', () => {
  it('differs with the source, the name or the signature, and only then', () => {
    const k = kernelKey(SRC, 'scaleW', ['f32', 'u64']);
    expect(kernelKey(SRC, 'scaleW', ['f32', 'u64'])).toBe(k);
    expect(kernelKey(`${SRC} `, 'scaleW', ['f32', 'u64'])).not.toBe(k);
    expect(kernelKey(SRC, 'scaleW2', ['f32', 'u64'])).not.toBe(k);
    expect(kernelKey(SRC, 'scaleW', ['f32', 'i64'])).not.toBe(k);
    expect(kernelKey(SRC, 'scaleW', ['f32'])).not.toBe(k);
    // No ambiguity between fields.
    expect(kernelKey('b', 'a', [])).not.toBe(kernelKey('', 'a\0b', []));
  });
});

describe('arena.synchronize()', () => {
  it('resolves at once on an idle arena, and after dispose()', async () => {
    const a = Arena.create(planLayout(SPEC), { backend: 'cpu' });
    await a.synchronize();
    a.dispose();
    await a.synchronize();
  });

  it('waits for the runs queued and in flight', async () => {
    using a = Arena.create(planLayout(SPEC), { backend: 'cpu' });
    const t = new Trainer(a, { lr: 0.1 });
    t.init(1);
    const x = Array.from({ length: 24 }, (_, i) => Math.sin(i));
    const order: string[] = [];
    const steps = [1, 2, 3].map((i) => t.step(x, { labels: [0, 1, 2, 0] }).then(() => order.push(`step ${i}`)));
    await a.synchronize().then(() => order.push('synchronized'));
    await Promise.all(steps);
    expect(order).toEqual(['step 1', 'step 2', 'step 3', 'synchronized']);
    // Idle: transfers are allowed again.
    expect(a.toHost().transfers).toBe(1);
  });

  it('waits natively for a run started outside any queue, which makes transfers BUSY meanwhile', async () => {
    using a = Arena.create(planLayout({ layers: [256, 256, 256, 3], batch: 256 }), { backend: 'cpu' });
    let ended = false;
    const run = runArena(a, { op: OPS.forward, rows: 256 }).then(() => {
      ended = true;
    });
    expect(codeOf(() => a.toHost())).toBe('BUSY');
    await a.synchronize();
    // The run has ended natively (its promise's callbacks may still be queued): transfers work.
    expect(a.toHost().transfers).toBe(1);
    await run;
    expect(ended).toBe(true);
  });
});

// Where NVRTC is available (NN_ARENA_NVRTC or a CUDA toolkit; not on CI), the compiler itself.
function nvrtc(): boolean {
  if (!cudaInfo().built) return false;
  try {
    compileOnly(SRC, 'scaleW', ['f32', 'u64'], 'sm_90');
    return true;
  } catch (e) {
    if ((e as ArenaError).code === 'NOT_SUPPORTED') return false;
    throw e;
  }
}

describe.skipIf(!nvrtc())('NVRTC without a device', () => {
  it('compiles a kernel that binds regions through the public header', () => {
    expect(compileOnly(SRC, 'scaleW', ['f32', 'u64'], 'sm_90')).toBeGreaterThan(0);
  });

  it('a compile error is COMPILE_FAILED with the log in the message and in detail', () => {
    try {
      compileOnly(`${SRC}\nthis is not CUDA;\n`, 'scaleW', ['f32', 'u64'], 'sm_90');
      expect.unreachable();
    } catch (e) {
      const err = e as ArenaError;
      expect(err).toBeInstanceOf(ArenaError);
      expect(err.code).toBe('COMPILE_FAILED');
      expect(err.message).toMatch(/kernel 'scaleW' did not compile for sm_90:\n.*error/s);
      expect(err.detail).toMatch(/error/);
      expect(err.message).toContain(err.detail!);
    }
  });

  it('compiles a kernel that finds user regions by name in device code (nna_extra_*)', () => {
    expect(compileOnly(EXTRA_SRC, 'scaleRows', ['u32'], 'sm_90')).toBeGreaterThan(0);
  });

  it('a signature that does not match the kernel is a compile error naming the expected one', () => {
    expect(() => compileOnly(SRC, 'scaleW', ['f32', 'u32'], 'sm_90')).toThrow(/void scaleW\(void\* base, float, unsigned int\)/);
    expect(() => compileOnly(SRC, 'missing', [], 'sm_90')).toThrow(/global scope has no "missing"/);
  });
});
