// arena-checks.ts: behaviour every backend must show, shared by the CPU suite (test/) and the
// CUDA suite (test/gpu/) so both assert exactly the same things.
import { expect } from 'vitest';
import { Arena, KINDS, planLayout, type ArenaOptions, type LayoutSpec } from '../../src/index.js';
import { deviceHeader, probeBind } from '../../src/internal.js';

export const SPEC: LayoutSpec = { layers: [784, 128, 10], batch: 100, dtype: 'float32', optimizer: 'adam' };

/** Fill every region with a value derived from (layer, kind, index). */
export function fillPattern(arena: Arena, salt: number): void {
  for (const r of arena.plan.regions) {
    const v = arena.view(r.layer, r.kind);
    const k = (KINDS as readonly string[]).indexOf(r.kind);
    for (let i = 0; i < v.length; i++) v[i] = salt + r.layer * 1000 + k * 100 + (i % 97) * 0.25;
  }
}

export function expectPattern(arena: Arena, salt: number): void {
  for (const r of arena.plan.regions) {
    const v = arena.view(r.layer, r.kind);
    const k = (KINDS as readonly string[]).indexOf(r.kind);
    for (let i = 0; i < v.length; i += Math.max(1, Math.floor(v.length / 257))) {
      if (v[i] !== salt + r.layer * 1000 + k * 100 + (i % 97) * 0.25) {
        throw new Error(`layer ${r.layer} ${r.kind}[${i}] = ${v[i]}, expected ${salt + r.layer * 1000 + k * 100 + (i % 97) * 0.25}`);
      }
    }
  }
}

/** Views -> device -> overwrite host -> back: the original data returns, counted exactly. */
export function checkRoundTrip(options: ArenaOptions, spec: LayoutSpec = SPEC): void {
  const plan = planLayout(spec);
  using arena = Arena.create(plan, options);
  const s0 = arena.stats;
  expect(s0.hostAllocs).toBe(1);
  expect(s0.deviceAllocs).toBe(1);
  fillPattern(arena, 1);
  expect(arena.toDevice()).toEqual({ transfers: 1, bytes: plan.totalBytes });
  fillPattern(arena, 5000);
  expectPattern(arena, 5000);
  expect(arena.toHost()).toEqual({ transfers: 1, bytes: plan.totalBytes });
  expectPattern(arena, 1);
  const s1 = arena.stats;
  expect(s1.toDeviceTransfers - s0.toDeviceTransfers).toBe(1);
  expect(s1.toDeviceBytes - s0.toDeviceBytes).toBe(plan.totalBytes);
  expect(s1.toHostTransfers - s0.toHostTransfers).toBe(1);
  expect(s1.toHostBytes - s0.toHostBytes).toBe(plan.totalBytes);
  expect(s1.hostAllocs).toBe(1);
  expect(s1.deviceAllocs).toBe(1);
}

/** A selector moves only its regions: the rest of the host side keeps what it had. */
export function checkSelectiveTransfer(options: ArenaOptions): void {
  const plan = planLayout({ ...SPEC, order: 'layer-major' });
  using arena = Arena.create(plan, options);
  fillPattern(arena, 1);
  arena.toDevice();
  fillPattern(arena, 7000);
  const r = arena.toHost({ kinds: ['w'] });
  expect(r.transfers).toBe(2); // one per layer that has weights
  for (const reg of plan.regions) {
    const v = arena.view(reg.layer, reg.kind);
    const k = (KINDS as readonly string[]).indexOf(reg.kind);
    const salt = reg.kind === 'w' ? 1 : 7000;
    expect(v[3]).toBe(salt + reg.layer * 1000 + k * 100 + 0.75);
  }
}

/** The device-side binding (kernel on CUDA) finds every region at the planner's offset. */
export function checkDeviceBinding(options: ArenaOptions): void {
  const plan = planLayout({ ...SPEC, samples: 64, order: 'kind-major' });
  using arena = Arena.create(plan, options);
  const offsets = probeBind(arena);
  const L = plan.spec.layers.length;
  for (let l = 0; l < L; l++) {
    KINDS.forEach((k, i) => {
      const r = plan.region(l, k);
      expect(offsets[l * KINDS.length + i], `layer ${l} ${k}`).toBe(r ? BigInt(r.offset) : 0xffffffffffffffffn);
    });
  }
  const h = deviceHeader(arena);
  expect(h.totalBytes).toBe(BigInt(plan.totalBytes));
  expect(h.numLayers).toBe(L);
}
