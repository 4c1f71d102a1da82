// The TS encoder and the C header must describe the same bytes: compare the addon's
// sizeof/offsetof/enum values with the TS constants, then round-trip headers through the
// native decoder and validator.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Arena, KINDS, planLayout } from '../src/index.js';
import { runArena } from '../src/internal.js';
import * as H from '../src/layout/header.js';
import { LOSSES, MEMORY_KINDS, native, OPS } from '../src/native.js';

describe('header drift: TS constants == C struct', () => {
  const info = native().internal.layoutInfo() as {
    magic: number; version: number; maxLayers: number; kindCount: number; headerSize: number; layerSize: number; regionSize: number;
    header: Record<string, number>; layer: Record<string, number>; enums: Record<string, number>;
  };

  it('sizes and constants', () => {
    expect(info.magic).toBe(H.MAGIC);
    expect(info.version).toBe(H.VERSION);
    expect(info.maxLayers).toBe(H.MAX_LAYERS);
    expect(info.kindCount).toBe(H.KINDS.length);
    expect(info.headerSize).toBe(H.HEADER_SIZE);
    expect(info.layerSize).toBe(H.LAYER_SIZE);
    expect(info.regionSize).toBe(H.REGION_SIZE);
    expect((info as unknown as { statsCount: number }).statsCount).toBe(H.STATS_COUNT);
    expect((info as unknown as { statSlots: unknown }).statSlots).toEqual(H.STATS);
  });

  it('every header field offset', () => {
    expect(info.header).toEqual(H.HEADER_FIELDS);
  });

  it('every layer and region field offset', () => {
    expect(info.layer).toEqual(H.LAYER_FIELDS);
  });

  it('every enum value', () => {
    const ts: Record<string, number> = {
      ...H.DTYPES, layerMajor: H.ORDERS['layer-major'], kindMajor: H.ORDERS['kind-major'], ...H.OPTIMIZERS, ...H.ACTIVATIONS, ...H.KIND_INDEX,
    };
    expect(info.enums).toEqual(ts);
  });
});

describe('header round trip: written by TS, read by C++', () => {
  const spec = fc.record({
    layers: fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 2, maxLength: 6 }),
    batch: fc.integer({ min: 1, max: 1024 }),
    dtype: fc.constantFrom('float32' as const, 'float64' as const),
    optimizer: fc.constantFrom('sgd' as const, 'momentum' as const, 'adam' as const),
    order: fc.constantFrom('layer-major' as const, 'kind-major' as const),
    align: fc.constantFrom(8, 64, 256, 4096),
    samples: fc.integer({ min: 0, max: 500 }),
  });

  it('decodes to the plan, and the native validator accepts it', () => {
    fc.assert(fc.property(spec, (s) => {
      const plan = planLayout(s);
      expect(native().internal.validateHeader(plan.header, plan.totalBytes)).toBe('');
      const h = native().internal.decodeHeader(plan.header);
      expect(h.magic).toBe(H.MAGIC);
      expect(h.dtype).toBe(H.DTYPES[s.dtype]);
      expect(h.order).toBe(H.ORDERS[s.order]);
      expect(h.optimizer).toBe(H.OPTIMIZERS[s.optimizer]);
      expect(h.numLayers).toBe(s.layers.length);
      expect(h.batch).toBe(BigInt(s.batch));
      expect(h.samples).toBe(BigInt(s.samples));
      expect(h.align).toBe(BigInt(s.align));
      expect(h.headerBytes).toBe(BigInt(plan.headerBytes));
      expect(h.totalBytes).toBe(BigInt(plan.totalBytes));
      h.layers.forEach((L, l) => {
        expect(L.units).toBe(BigInt(s.layers[l]!));
        KINDS.forEach((k, i) => {
          const r = plan.region(l, k);
          expect(L.regions[i]).toEqual(r ? [BigInt(r.offset), BigInt(r.length)] : [0n, 0n]);
        });
      });
    }), { numRuns: 400 });
  });

  it('the validator rejects a header claiming more bytes than available', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2 });
    expect(native().internal.validateHeader(plan.header, plan.totalBytes - 1)).toMatch(/claims/);
  });

  it('the validator rejects single-field corruptions with a reason', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2, optimizer: 'adam' });
    const corrupt = (at: number, value: bigint, width: 4 | 8) => {
      const b = plan.header.slice();
      const v = new DataView(b.buffer);
      if (width === 4) v.setUint32(at, Number(value), true); else v.setBigUint64(at, value, true);
      return native().internal.validateHeader(b, plan.totalBytes);
    };
    const F = H.HEADER_FIELDS;
    const layer1 = H.HEADER_SIZE + H.LAYER_SIZE;
    const wRegion = layer1 + H.LAYER_FIELDS.region + H.KIND_INDEX.w * H.REGION_SIZE;
    expect(corrupt(F.magic, 0x12345678n, 4)).toMatch(/magic/);
    expect(corrupt(F.version, 99n, 4)).toMatch(/version/);
    expect(corrupt(F.dtype, 3n, 4)).toMatch(/dtype/);
    expect(corrupt(F.num_layers, 5000n, 4)).toMatch(/num_layers/);
    expect(corrupt(F.align, 24n, 8)).toMatch(/align/);
    expect(corrupt(F.batch, 2n ** 62n, 8)).toMatch(/overflow|count|total/);
    expect(corrupt(wRegion, BigInt(plan.totalBytes), 8)).toMatch(/beyond|overlap|aligned/);
    expect(corrupt(wRegion, BigInt(plan.region(1, 'b')!.offset), 8)).toMatch(/overlaps/);
    expect(corrupt(wRegion, 8n, 8)).toMatch(/aligned|header/);
    expect(corrupt(wRegion + 8, 1n, 8)).toMatch(/count/);
  });
});

describe('run contract: the numeric codes TS sends are the native ones', () => {
  it('ops, losses and memory kinds match the addon', () => {
    expect(native().internal.codes()).toEqual({ ops: { ...OPS }, losses: { ...LOSSES }, memory: { ...MEMORY_KINDS } });
  });
  it('an unknown run parameter or a wrong type is refused before the arena is touched', async () => {
    const arena = Arena.create(planLayout({ layers: [3, 2], batch: 2, activations: ['softmax'] }), { backend: 'cpu' });
    try {
      for (const bad of [{ op: 0, rows: 1, lrr: 0.1 }, { op: 0, rows: 1, resident: 1 }, { op: 0, rows: '1' }, { op: 0, rows: 1, lr: '0.1' }]) {
        await expect(runArena(arena, bad as never)).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      }
      expect(arena.stats.toDeviceTransfers).toBe(1);  // the header at creation, nothing since
    } finally {
      arena.dispose();
    }
  });
});
