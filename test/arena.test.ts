import { describe, expect, it } from 'vitest';
import { Arena, cudaInfo, planLayout } from '../src/index.js';
import { checkDeviceBinding, checkRoundTrip, checkSelectiveTransfer, fillPattern, SPEC } from './support/arena-checks.js';
import { codeOf } from './support/errors.js';

const cpu = { backend: 'cpu' } as const;

describe('Arena on the CPU backend', () => {
  it('create: exactly one host and one device allocation, the header on both sides', () => {
    const plan = planLayout(SPEC);
    using arena = Arena.create(plan, cpu);
    expect(arena.backend).toBe('cpu');
    const s = arena.stats;
    expect([s.hostAllocs, s.deviceAllocs, s.hostFrees, s.deviceFrees]).toEqual([1, 1, 0, 0]);
    // The header reaches the device at creation: one counted transfer of headerBytes.
    expect([s.toDeviceTransfers, s.toDeviceBytes, s.toHostTransfers]).toEqual([1, plan.headerBytes, 0]);
    expect(arena.bytes(0, plan.headerBytes)).toEqual(plan.header);
  });

  it('round trip through the stand-in device restores the data, one transfer each way', () => checkRoundTrip(cpu));
  it('round trip in float64 and kind-major order', () => checkRoundTrip(cpu, { ...SPEC, dtype: 'float64', order: 'kind-major' }));
  it('a selector moves only its regions', () => checkSelectiveTransfer(cpu));
  it.skipIf(process.env.NN_ARENA_TEST_ADDON === 'none')('binding from the device base finds every region at the planned offset', () => checkDeviceBinding(cpu));

  it('all weights: one transfer in kind-major order, one per layer with weights in layer-major', () => {
    const layers = [50, 40, 30, 20, 10];
    for (const [order, expected] of [
      ['kind-major', 1],
      ['layer-major', 4],
    ] as const) {
      const plan = planLayout({ layers, batch: 8, order });
      using arena = Arena.create(plan, cpu);
      const before = arena.stats;
      const r = arena.toDevice({ kinds: ['w'] });
      const wBytes = plan.bytesByKind().w;
      expect(r.transfers).toBe(expected);
      const after = arena.stats;
      expect(after.toDeviceTransfers - before.toDeviceTransfers).toBe(expected);
      // Moved bytes are the weights plus, when coalesced, the alignment padding between them.
      expect(after.toDeviceBytes - before.toDeviceBytes).toBe(r.bytes);
      expect(r.bytes).toBeGreaterThanOrEqual(wBytes);
      expect(r.bytes - wBytes).toBeLessThan(plan.spec.align * 4);
    }
  });

  it('weights and biases of one layer in layer-major order coalesce with nothing else', () => {
    const plan = planLayout({ layers: [6, 5, 4], batch: 2 });
    using arena = Arena.create(plan, cpu);
    // b and w are adjacent in layer-major order: one transfer per layer.
    expect(arena.toDevice({ kinds: ['b', 'w'] }).transfers).toBe(2);
    expect(arena.toDevice({ layers: [1] }).transfers).toBe(1);
    expect(arena.toDevice({ kinds: ['header'] })).toEqual({ transfers: 1, bytes: plan.headerBytes });
  });

  it('views are zero-copy windows of the host allocation', () => {
    using arena = Arena.create(planLayout(SPEC), cpu);
    const w = arena.view(1, 'w');
    expect(w).toBeInstanceOf(Float32Array);
    expect(w.length).toBe(784 * 128);
    expect(arena.view(1, 'w')).toBe(w);
    w[5] = 42.5;
    const r = arena.plan.region(1, 'w')!;
    expect(new Float32Array(arena.bytes(r.offset, r.bytes).buffer, arena.bytes(r.offset, r.bytes).byteOffset)[5]).toBe(42.5);
    expect(arena.hostAddress).toBeTypeOf('bigint');
    expect(arena.deviceAddress).not.toBe(arena.hostAddress);
  });

  it('dispose frees both allocations once, twice is harmless, views are detached', () => {
    const arena = Arena.create(planLayout(SPEC), cpu);
    fillPattern(arena, 3);
    const w = arena.view(1, 'w');
    const raw = arena.bytes();
    arena.dispose();
    arena.dispose();
    arena[Symbol.dispose]();
    const s = arena.stats;
    expect([s.hostFrees, s.deviceFrees]).toEqual([1, 1]);
    expect(arena.disposed).toBe(true);
    expect(w.length).toBe(0);
    expect(w[5]).toBeUndefined();
    expect(raw.length).toBe(0);
    expect(codeOf(() => arena.view(1, 'w'))).toBe('DISPOSED');
    expect(codeOf(() => arena.toDevice())).toBe('DISPOSED');
    expect(codeOf(() => arena.toHost({ kinds: ['w'] }))).toBe('DISPOSED');
    expect(codeOf(() => arena.hostAddress)).toBe('DISPOSED');
  });

  it('a forgotten arena does not take its views down with it (GC safety net)', async () => {
    let w: Float32Array | Float64Array | undefined;
    (() => {
      const arena = Arena.create(planLayout(SPEC), cpu);
      w = arena.view(1, 'w');
      w.fill(7);
    })();
    const gc = (globalThis as { gc?: () => void }).gc;
    expect(gc, 'tests run with --expose-gc (vitest.config.ts)').toBeTypeOf('function');
    for (let i = 0; i < 5; i++) {
      gc!();
      await new Promise((r) => setTimeout(r, 5));
    }
    // The view keeps the memory alive until it, too, is unreachable.
    expect(w!.length).toBe(784 * 128);
    expect(w![100]).toBe(7);
  });

  it('bad input gives typed errors', () => {
    const plan = planLayout(SPEC);
    expect(codeOf(() => Arena.create(plan, { backend: 'tpu' as 'cpu' }))).toBe('BAD_OPTION');
    expect(codeOf(() => Arena.create(plan, { backend: 'cpu', memory: 'shared' as 'device' }))).toBe('BAD_OPTION');
    expect(codeOf(() => Arena.create(plan, { backend: 'cpu', memory: 'managed' }))).toBe('NOT_SUPPORTED');
    using arena = Arena.create(plan, cpu);
    expect(codeOf(() => arena.view(0, 'w'))).toBe('NO_REGION');
    expect(codeOf(() => arena.toDevice({ kinds: ['weights' as 'w'] }))).toBe('BAD_SELECTOR');
    expect(codeOf(() => arena.toDevice({ layers: [3] }))).toBe('BAD_SELECTOR');
    expect(codeOf(() => arena.toDevice({ layers: [0.5] }))).toBe('BAD_SELECTOR');
    expect(codeOf(() => arena.prefetch(undefined, 'device'))).toBe('NOT_SUPPORTED');
    expect(codeOf(() => arena.advise({ kinds: ['w'] }, 'readMostly'))).toBe('NOT_SUPPORTED');
    expect(codeOf(() => arena.advise({ kinds: ['w'] }, 'sticky' as 'readMostly'))).toBe('BAD_OPTION');
    expect(codeOf(() => arena.bytes(0, plan.totalBytes + 1))).toBe('OUT_OF_RANGE');
  });

  it('a tampered header is refused before anything is allocated', () => {
    const plan = planLayout(SPEC);
    const bad = { ...plan, header: plan.header.slice() };
    new DataView(bad.header.buffer).setBigUint64(64, BigInt(plan.totalBytes) * 2n, true);
    // total_bytes no longer matches the regions' ends is fine, but regions beyond it are not:
    new DataView(bad.header.buffer).setBigUint64(64, 2048n, true);
    expect(codeOf(() => Arena.create(bad, cpu))).toBe('BAD_HEADER');
  });

  it("backend 'auto' picks CPU without a GPU, 'cuda' says why it cannot", () => {
    const info = cudaInfo();
    if (info.devices > 0) return; // this machine has a GPU: test/gpu covers it
    using arena = Arena.create(planLayout(SPEC));
    expect(arena.backend).toBe('cpu');
    expect(codeOf(() => Arena.create(planLayout(SPEC), { backend: 'cuda' }))).toBe('NO_DEVICE');
  });

  it('an impossible host allocation fails cleanly and the process goes on', () => {
    // About 2^50 bytes: a valid plan no machine can hold.
    const plan = planLayout({ layers: [2 ** 22, 2 ** 24, 2], batch: 1, dtype: 'float64', align: 8 });
    expect(plan.totalBytes).toBeGreaterThan(2 ** 50);
    expect(codeOf(() => Arena.create(plan, cpu))).toBe('HOST_OOM');
    using ok = Arena.create(planLayout(SPEC), cpu);
    expect(ok.stats.hostAllocs).toBe(1);
  });
});
