// CUDA backend: the same checks as the CPU suite, on device and managed memory, plus what only
// a GPU can show (the binding kernel, prefetch/advise, out-of-memory). Runs on the GPU machine:
//   NN_ARENA_REQUIRE_GPU=1 bash .gpu/run.sh vitest run test/gpu
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, cudaInfo, planLayout } from '../../src/index.js';
import { checkDeviceBinding, checkRoundTrip, checkSelectiveTransfer, expectPattern, fillPattern, SPEC } from '../support/arena-checks.js';
import { codeOf } from '../support/errors.js';

const info = cudaInfo();
const hasGpu = info.built && info.devices > 0;
const required = process.env.NN_ARENA_REQUIRE_GPU === '1';
// Under compute-sanitizer the tool's own device allocations (initcheck shadows 1 bit per byte)
// move cudaMemGetInfo: the exact memory-accounting checks are skipped there.
const sanitized = process.env.NN_ARENA_UNDER_SANITIZER === '1';

/** A plan of about `bytes` bytes: the size sits in a resident data set, so nothing large is touched. */
function planOfSize(bytes: number) {
  return planLayout({ layers: [1024, 2, 2], batch: 1, samples: Math.ceil(bytes / 4096) });
}

it.runIf(required)('a CUDA device is usable (NN_ARENA_REQUIRE_GPU=1)', () => {
  expect(info.why).toBe('');
  expect(hasGpu).toBe(true);
});

describe.skipIf(!hasGpu)(`CUDA backend on ${info.name || 'no device'}`, () => {
  const cuda = { backend: 'cuda' } as const;
  const managed = { backend: 'cuda', memory: 'managed' } as const;

  it("'auto' picks CUDA", () => {
    using a = Arena.create(planLayout(SPEC));
    expect(a.backend).toBe('cuda');
    expect(a.pinned).toBe(true);
  });

  it('round trip, device memory, pinned host', () => checkRoundTrip(cuda));
  it('round trip, device memory, pageable host', () => checkRoundTrip({ ...cuda, pinned: false }));
  it('round trip, managed memory', () => checkRoundTrip(managed));
  it('round trip, float64 kind-major', () => checkRoundTrip(cuda, { ...SPEC, dtype: 'float64', order: 'kind-major' }));
  it('selective transfer, device memory', () => checkSelectiveTransfer(cuda));
  it('selective transfer, managed memory', () => checkSelectiveTransfer(managed));
  it('a kernel binds every region from the device base pointer alone', () => checkDeviceBinding(cuda));
  it('the same kernel on managed memory', () => checkDeviceBinding(managed));

  it('weights: 1 transfer kind-major, 1 per weighted layer layer-major', () => {
    for (const [order, n] of [
      ['kind-major', 1],
      ['layer-major', 3],
    ] as const) {
      using a = Arena.create(planLayout({ layers: [64, 32, 16, 8], batch: 4, order }), cuda);
      const before = a.stats.toDeviceTransfers;
      expect(a.toDevice({ kinds: ['w'] }).transfers).toBe(n);
      expect(a.stats.toDeviceTransfers - before).toBe(n);
    }
  });

  it('managed memory: prefetch and advice apply and keep the data', () => {
    using a = Arena.create(planLayout(SPEC), managed);
    fillPattern(a, 11);
    a.toDevice();
    a.advise({ kinds: ['w', 'b'] }, 'readMostly');
    a.advise({ layers: [1] }, 'preferredLocation', { location: 'device' });
    a.advise({ layers: [1] }, 'accessedBy', { location: 'device' });
    a.prefetch({ layers: [1] }, 'device');
    a.prefetch(undefined, 'host');
    a.advise({ kinds: ['w', 'b'] }, 'readMostly', { unset: true });
    fillPattern(a, 99);
    a.toHost();
    expectPattern(a, 11);
  });

  it('plain device memory says prefetch/advise do not apply', () => {
    using a = Arena.create(planLayout(SPEC), cuda);
    expect(codeOf(() => a.prefetch(undefined, 'device'))).toBe('NOT_SUPPORTED');
    expect(codeOf(() => a.advise(undefined, 'readMostly'))).toBe('NOT_SUPPORTED');
  });

  it('a device arena beyond free memory: CUDA_OOM with sizes, host freed, the next one works', () => {
    const free = cudaInfo().freeBytes;
    const plan = planOfSize(free + 4 * 2 ** 30);
    let err: ArenaError | undefined;
    try {
      Arena.create(plan, { ...cuda, pinned: false });
    } catch (e) {
      err = e as ArenaError;
    }
    expect(err).toBeInstanceOf(ArenaError);
    expect(err!.code).toBe('CUDA_OOM');
    expect(err!.message).toContain(String(plan.totalBytes));
    using ok = Arena.create(planLayout(SPEC), cuda);
    checkRoundTrip(cuda);
    expect(ok.stats.deviceAllocs).toBe(1);
  });

  it('managed memory above 90% of free is refused before allocation', () => {
    const free = cudaInfo().freeBytes;
    const plan = planOfSize(Math.floor(free * 0.95));
    expect(codeOf(() => Arena.create(plan, { ...managed, pinned: false }))).toBe('MANAGED_LIMIT');
  });

  it('soak: 2,000 create/use/dispose cycles return device memory to its baseline', () => {
    const plan = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'adam' });
    const cycles = Number(process.env.NN_ARENA_SOAK_CYCLES ?? 2000);
    {
      using warm = Arena.create(plan, cuda);
      warm.toDevice();
    }
    const before = cudaInfo().freeBytes;
    for (let i = 0; i < cycles; i++) {
      using a = Arena.create(plan, cuda);
      a.view(1, 'w')[i % 100] = i;
      a.toDevice();
      a.toHost({ kinds: ['w'] });
      if (a.view(1, 'w')[i % 100] !== i) throw new Error(`data lost in cycle ${i}`);
    }
    const after = cudaInfo().freeBytes;
    console.log(`device soak: ${cycles} cycles, free before ${before}, after ${after}`);
    // Free memory may rise (memory released from earlier tests); it must not fall.
    if (!sanitized) expect(before - after).toBeLessThanOrEqual(4 * 2 ** 20);
  });

  it('dispose returns the device memory', () => {
    const before = cudaInfo().freeBytes;
    const a = Arena.create(planOfSize(512 * 2 ** 20), cuda);
    expect(cudaInfo().freeBytes).toBeLessThan(before - 400 * 2 ** 20);
    a.dispose();
    if (!sanitized) expect(before - cudaInfo().freeBytes).toBeLessThan(64 * 2 ** 20);
  });
});
