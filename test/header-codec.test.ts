// The TS encoder writes, at the offsets generated from nn_arena.h (FORMAT), the bytes the C side
// reads through its structs: headers planned in TS round-trip through the native decoder (the
// test addon's, which reads them as nna_header / nna_layer / nna_extra) and validator.
import { optimizerNamed } from '../src/layout/optimizers.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Arena, KINDS, planLayout } from '../src/index.js';
import { runArena, testAddon } from '../src/internal.js';
import { decodeSpec } from '../src/layout/decode.js';
import * as H from '../src/layout/header.js';
import { native } from '../src/native/addon.js';

describe('header round trip: written by TS, read by C++', () => {
  const spec = fc.record({
    layers: fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 2, maxLength: 6 }),
    batch: fc.integer({ min: 1, max: 1024 }),
    dtype: fc.constantFrom('float32' as const, 'float64' as const),
    optimizer: fc.constantFrom('sgd' as const, 'momentum' as const, 'adam' as const, 'adamw' as const),
    order: fc.constantFrom('layer-major' as const, 'kind-major' as const),
    align: fc.constantFrom(8, 64, 256, 4096),
    samples: fc.integer({ min: 0, max: 500 }),
    extra: fc.array(
      fc.oneof(
        fc.record({ like: fc.constantFrom('z' as const, 'b' as const, 'w' as const), pick: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }) }),
        fc.record({ bytes: fc.integer({ min: 1, max: 5000 }) }),
      ),
      { maxLength: 4 },
    ),
    models: fc.constantFrom(1, 1, 2, 5),
    compact: fc.boolean(),
  });
  /** The arbitrary's extras as a spec: names e0, e1, ...; `pick` chooses a subset of the layers
   *  that have the kind (all of them when it picks none). */
  const extrasOf = (layers: number, extra: ReadonlyArray<{ like: 'z' | 'b' | 'w'; pick: boolean[] } | { bytes: number }>) =>
    extra.map((e, i) => {
      if ('bytes' in e) return { name: `e${i}`, bytes: e.bytes };
      const has = Array.from({ length: layers }, (_, l) => l).filter((l) => e.like === 'z' || l > 0);
      const picked = has.filter((l) => e.pick[l]);
      return { name: `e${i}`, like: e.like, ...(picked.length ? { layers: picked } : {}) };
    });

  it('decodes to the plan, and the native validator accepts it', () => {
    fc.assert(
      fc.property(spec, (raw) => {
        // User regions and compact plans need models 1 (refused otherwise): models > 1 drops them.
        // Compact with user regions is kept: the validator and the aliasing replay must accept it.
        const s = { ...raw, extra: raw.models > 1 ? [] : extrasOf(raw.layers.length, raw.extra), compact: raw.models > 1 ? false : raw.compact };
        const plan = planLayout(s);
        expect(native().validateHeader(plan.header, plan.totalBytes)).toBe('');
        const h = testAddon().decodeHeader(plan.header);
        expect(h.magic).toBe(H.MAGIC);
        expect(h.dtype).toBe(H.DTYPES[s.dtype]);
        expect(h.order).toBe(H.ORDERS[s.order]);
        expect(h.optimizer).toBe(optimizerNamed(s.optimizer)!.code);
        expect(h.numLayers).toBe(s.layers.length);
        expect(h.batch).toBe(BigInt(s.batch));
        expect(h.samples).toBe(BigInt(s.samples));
        expect(h.align).toBe(BigInt(s.align));
        expect(h.headerBytes).toBe(BigInt(plan.headerBytes));
        expect(h.totalBytes).toBe(BigInt(plan.totalBytes));
        expect(h.flags).toBe(s.compact ? BigInt(H.FLAGS.compact) : 0n);
        expect(h.models).toBe(s.models > 1 ? BigInt(s.models) : 0n); // one model: 0, the version-1 meaning
        expect((decodeSpec(plan.header) as { models?: number }).models).toBe(s.models > 1 ? s.models : undefined);
        h.layers.forEach((L, l) => {
          expect(L.units).toBe(BigInt(s.layers[l]!));
          KINDS.forEach((k, i) => {
            const r = plan.region(l, k);
            expect(L.regions[i]).toEqual(r ? [BigInt(r.offset), BigInt(r.length)] : [0n, 0n]);
          });
        });
        // The kind table, read back through nna_extra_count / _name / _find / _region / _elems.
        expect(h.extras.map((e) => e.name)).toEqual(s.extra.map((e) => e.name));
        h.extras.forEach((e, i) => {
          const x = s.extra[i]!;
          expect(e.found).toBe(i);
          expect(e.rule).toBe('bytes' in x ? H.EXTRA_RULES.bytes : H.EXTRA_RULES.perLayer);
          expect(e.elemBytes).toBe('bytes' in x ? 1 : H.DTYPE_BYTES[s.dtype]);
          if ('bytes' in x) {
            const r = plan.region(-1, x.name)!;
            expect(e.regions).toEqual([[BigInt(r.offset), BigInt(x.bytes!)]]);
          } else {
            expect(e.like).toBe(H.KIND_INDEX[x.like]);
            expect(e.regions).toEqual(
              s.layers.map((_, l) => {
                const r = plan.region(l, x.name);
                return r ? [BigInt(r.offset), BigInt(r.length)] : [0n, 0n];
              }),
            );
          }
        });
      }),
      { numRuns: 400 },
    );
  });

  it('a version-1 header (no kind table) still validates; one with kind-table fields does not', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2, optimizer: 'momentum' });
    const v1 = plan.header.slice();
    const dv = new DataView(v1.buffer);
    dv.setUint32(H.HEADER_FIELDS.version, 1, true);
    expect(native().validateHeader(v1, plan.totalBytes)).toBe('');
    expect(testAddon().decodeHeader(v1).extras).toEqual([]);
    dv.setUint32(H.HEADER_FIELDS.num_extras, 1, true);
    expect(native().validateHeader(v1, plan.totalBytes)).toMatch(/version-1 header with a kind table/);
  });

  it('the validator checks the kind table like the layer table', () => {
    const plan = planLayout({
      layers: [4, 3, 2],
      batch: 2,
      extra: [
        { name: 'ema', like: 'w' },
        { name: 'rng', bytes: 100 },
      ],
    });
    expect(native().validateHeader(plan.header, plan.totalBytes)).toBe('');
    const table = H.HEADER_SIZE + 3 * H.LAYER_SIZE;
    const entries = table + 2 * H.EXTRA_SIZE; // ema: entries 0..2 (layers 0, 1, 2), rng: entry 3
    const corrupt = (edit: (v: DataView, b: Uint8Array) => void) => {
      const b = plan.header.slice();
      edit(new DataView(b.buffer), b);
      return native().validateHeader(b, plan.totalBytes);
    };
    const F = H.HEADER_FIELDS,
      X = H.EXTRA_FIELDS;
    const entry = (i: number) => entries + i * H.REGION_SIZE;
    expect(corrupt((v) => v.setUint32(F.num_extras, 65, true))).toMatch(/num_extras/);
    expect(corrupt((v) => v.setUint32(F.extra_size, 32, true))).toMatch(/extra_size/);
    expect(corrupt((v) => v.setBigUint64(F.extras_offset, BigInt(table + 8), true))).toMatch(/extras_offset/);
    expect(
      corrupt((_, b) => {
        b[table + 1] = 0x2d;
      }),
    ).toMatch(/user region 0 name has a character/); // 'e-a'
    expect(
      corrupt((_, b) => {
        b.set([0x77, 0, 0], table);
      }),
    ).toMatch(/built-in kind/); // 'w'
    expect(
      corrupt((_, b) => {
        b.set([0x65, 0x6d, 0x61, 0], table + H.EXTRA_SIZE);
      }),
    ).toMatch(/repeats user region 0/); // 'ema' twice
    expect(
      corrupt((_, b) => {
        b[table + 31] = 0x41;
      }),
    ).toMatch(/not NUL-padded/);
    expect(corrupt((v) => v.setUint32(table + X.rule, 7, true))).toMatch(/unknown rule/);
    expect(corrupt((v) => v.setUint32(table + X.like, H.KIND_INDEX.d, true))).toMatch(/must be z, b or w/);
    expect(corrupt((v) => v.setUint32(table + X.elem_bytes, 8, true))).toMatch(/elem_bytes/);
    expect(corrupt((v) => v.setUint32(table + H.EXTRA_SIZE + X.first, 2, true))).toMatch(/first entry/);
    expect(corrupt((v) => v.setBigUint64(entry(1) + 8, 13n, true))).toMatch(/its shape \(like w\) needs 12/);
    expect(corrupt((v) => v.setBigUint64(entry(0) + 8, 1n, true))).toMatch(/layer 0 has count 1, its shape \(like w\) needs 0/);
    expect(corrupt((v) => v.setBigUint64(entry(1), BigInt(plan.region(1, 'w')!.offset), true))).toMatch(/overlaps/);
    expect(corrupt((v) => v.setBigUint64(entry(3), BigInt(plan.totalBytes), true))).toMatch(/beyond total_bytes/);
    expect(corrupt((v) => v.setBigUint64(entry(3), 8n, true))).toMatch(/aligned|header/);
    expect(
      corrupt((v) => {
        v.setBigUint64(entry(3), 0n, true);
        v.setBigUint64(entry(3) + 8, 0n, true);
      }),
    ).toMatch(/'rng' has no region/);
    expect(
      corrupt((v) => {
        v.setBigUint64(entry(1) + 8, 0n, true);
        v.setBigUint64(entry(2) + 8, 0n, true);
      }),
    ).toMatch(/absent but has offset/);
    expect(corrupt((v) => v.setBigUint64(F.header_bytes, BigInt(entries), true))).toMatch(/kind table ends beyond header_bytes|starts inside/);
  });

  it('the validator rejects a header claiming more bytes than available', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2 });
    expect(native().validateHeader(plan.header, plan.totalBytes - 1)).toMatch(/claims/);
  });

  it('the validator rejects single-field corruptions with a reason', () => {
    const plan = planLayout({ layers: [4, 3, 2], batch: 2, optimizer: 'adam' });
    const corrupt = (at: number, value: bigint, width: 4 | 8) => {
      const b = plan.header.slice();
      const v = new DataView(b.buffer);
      if (width === 4) v.setUint32(at, Number(value), true);
      else v.setBigUint64(at, value, true);
      return native().validateHeader(b, plan.totalBytes);
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

describe('run parameters', () => {
  it('an unknown run parameter or a wrong type is refused before the arena is touched', async () => {
    const arena = Arena.create(planLayout({ layers: [3, 2], batch: 2, activations: ['softmax'] }), { backend: 'cpu' });
    try {
      for (const bad of [
        { op: 0, rows: 1, lrr: 0.1 },
        { op: 0, rows: 1, resident: 1 },
        { op: 0, rows: '1' },
        { op: 0, rows: 1, lr: '0.1' },
        { op: 0, rows: 1, precision: 'tf32' },
        { op: 0, rows: 1, precision: 99 },
        { op: 0, rows: 1, precision: 1.5 },
      ]) {
        await expect(runArena(arena, bad as never)).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
      }
      expect(arena.stats.toDeviceTransfers).toBe(1); // the header at creation, nothing since
    } finally {
      arena.dispose();
    }
  });
});
