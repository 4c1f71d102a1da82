import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KINDS, LayoutError, planLayout, type LayoutSpec, type Plan } from '../src/index.js';

const ACTS = ['identity', 'relu', 'sigmoid', 'tanh'] as const;

const specArb = fc
  .record({
    layers: fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 2, maxLength: 7 }),
    batch: fc.integer({ min: 1, max: 4096 }),
    dtype: fc.constantFrom('float32' as const, 'float64' as const),
    optimizer: fc.constantFrom('sgd' as const, 'momentum' as const, 'adam' as const, 'adamw' as const),
    order: fc.constantFrom('layer-major' as const, 'kind-major' as const),
    align: fc.integer({ min: 3, max: 13 }).map((e) => 2 ** e),
    samples: fc.integer({ min: 0, max: 3000 }),
    hiddenAct: fc.constantFrom(...ACTS),
  })
  .map(({ hiddenAct, ...s }): LayoutSpec => ({ ...s, activations: [...Array(s.layers.length - 2).fill(hiddenAct), 'softmax'] }));

function checkPlanInvariants(plan: Plan): void {
  const s = plan.spec;
  const elem = s.dtype === 'float32' ? 4 : 8;
  let end = plan.headerBytes;
  for (const r of plan.regions) {
    if (r.offset % s.align !== 0) throw new Error(`misaligned ${r.layer}:${r.kind} @${r.offset}`);
    if (r.offset < end) throw new Error(`overlap at ${r.layer}:${r.kind}`);
    if (r.bytes !== r.length * elem) throw new Error('bytes != length * elem');
    if (!Number.isSafeInteger(r.offset) || !Number.isSafeInteger(r.bytes)) throw new Error('inexact size');
    end = r.offset + r.bytes;
  }
  if (end > plan.totalBytes) throw new Error('region beyond totalBytes');
  if (plan.totalBytes % s.align !== 0) throw new Error('total not aligned');
  const byKind = plan.bytesByKind();
  const sum = Object.values(byKind).reduce((a, b) => a + b, 0);
  if (sum !== plan.totalBytes) throw new Error(`bytesByKind sums to ${sum}, total ${plan.totalBytes}`);
  if (byKind.padding < 0) throw new Error('negative padding');
}

describe('planLayout: worked example 784-128-10, batch 100, float32, SGD', () => {
  const plan = planLayout({ layers: [784, 128, 10], batch: 100, dtype: 'float32', optimizer: 'sgd' });
  const k = plan.bytesByKind();

  it('has the hand-computed bytes per kind', () => {
    // w: (784*128 + 128*10) * 4; b: (128 + 10) * 4; z: (784 + 128 + 10) * 100 * 4;
    // d: (128 + 10) * 100 * 4; y: 10 * 100 * 4
    expect(k.w).toBe(406_528);
    expect(k.b).toBe(552);
    expect(k.dw).toBe(406_528);
    expect(k.db).toBe(552);
    expect(k.z).toBe(368_800);
    expect(k.d).toBe(55_200);
    expect(k.y).toBe(4_000);
    expect(k.mw + k.mb + k.vw + k.vb + k.xdata + k.ydata).toBe(0);
    expect(k.stats).toBe(8 * 4);
  });

  it('places the header first and every region 256-aligned', () => {
    expect(k.header).toBe(128 + 3 * 248);
    expect(plan.headerBytes).toBe(1024);
    expect(plan.regions[0]).toEqual({ layer: 0, kind: 'z', offset: 1024, bytes: 313_600, length: 78_400, models: 1, stride: 0 });
    checkPlanInvariants(plan);
  });

  it('adds parameter-sized optimizer state: one copy for momentum, two for Adam', () => {
    const m = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'momentum' }).bytesByKind();
    const a = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'adam' }).bytesByKind();
    expect([m.mw, m.mb, m.vw, m.vb]).toEqual([406_528, 552, 0, 0]);
    expect([a.mw, a.mb, a.vw, a.vb]).toEqual([406_528, 552, 406_528, 552]);
  });

  it('is frozen', () => {
    expect(Object.isFrozen(plan)).toBe(true);
    expect(Object.isFrozen(plan.regions[0])).toBe(true);
    expect(() => {
      (plan as { totalBytes: number }).totalBytes = 1;
    }).toThrow(TypeError);
  });

  it('orders layer-major with each layer contiguous, kind-major with each kind contiguous', () => {
    const lm = planLayout({ layers: [5, 4, 3, 2], batch: 2 }).regions.map((r) => r.layer);
    expect(lm).toEqual([...lm].sort((a, b) => a - b));
    const km = planLayout({ layers: [5, 4, 3, 2], batch: 2, order: 'kind-major' }).regions.map((r) => (KINDS as readonly string[]).indexOf(r.kind));
    expect(km).toEqual([...km].sort((a, b) => a - b));
  });

  it('puts the resident data set after the network in both orders', () => {
    for (const order of ['layer-major', 'kind-major'] as const) {
      const p = planLayout({ layers: [4, 3, 2], batch: 2, samples: 10, order });
      expect(p.regions.slice(-2).map((r) => [r.layer, r.kind])).toEqual([
        [0, 'xdata'],
        [2, 'ydata'],
      ]);
      expect(p.region(0, 'xdata')!.length).toBe(40);
      expect(p.region(2, 'ydata')!.length).toBe(20);
    }
  });

  it('computes sizes beyond 2^32 exactly', () => {
    const p = planLayout({ layers: [65_536, 65_536, 2], batch: 1, dtype: 'float64' });
    expect(p.region(1, 'w')!.bytes).toBe(65_536 * 65_536 * 8);
    expect(p.totalBytes).toBeGreaterThan(2 ** 35);
    checkPlanInvariants(p);
  });
});

describe('planLayout: properties over random specs', () => {
  it('regions aligned, non-overlapping, inside totalBytes, totals exact', () => {
    fc.assert(
      fc.property(specArb, (spec) => checkPlanInvariants(planLayout(spec))),
      { numRuns: 3000 },
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(specArb, (spec) => {
        const a = planLayout(spec),
          b = planLayout(structuredClone(spec));
        expect(b.regions).toEqual(a.regions);
        expect(b.header).toEqual(a.header);
      }),
      { numRuns: 500 },
    );
  });

  it('has exactly the regions its shape calls for', () => {
    fc.assert(
      fc.property(specArb, (spec) => {
        const p = planLayout(spec);
        const L = spec.layers.length;
        const perLayer = ({ sgd: 5, momentum: 7, adam: 9, adamw: 9 } as Record<string, number>)[spec.optimizer!]!;
        const expected = L /* z */ + (L - 1) * perLayer /* b w d db dw + state */ + 2 /* y, stats */ + (spec.samples ? 2 : 0);
        expect(p.regions.length).toBe(expected);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('planLayout: bad specs give LayoutError naming field and value', () => {
  const base: LayoutSpec = { layers: [4, 3, 2], batch: 8 };
  const cases: Array<[string, LayoutSpec, string, string]> = [
    ['one layer', { ...base, layers: [4] }, 'layers', 'BAD_LAYERS'],
    ['no layers', { ...base, layers: [] }, 'layers', 'BAD_LAYERS'],
    ['layers not an array', { ...base, layers: 'x' as unknown as number[] }, 'layers', 'BAD_LAYERS'],
    ['zero units', { ...base, layers: [4, 0, 2] }, 'layers[1]', 'BAD_LAYERS'],
    ['negative units', { ...base, layers: [4, -3, 2] }, 'layers[1]', 'BAD_LAYERS'],
    ['fractional units', { ...base, layers: [4, 3.5, 2] }, 'layers[1]', 'BAD_LAYERS'],
    ['NaN units', { ...base, layers: [NaN, 3, 2] }, 'layers[0]', 'BAD_LAYERS'],
    ['Infinity units', { ...base, layers: [4, 3, Infinity] }, 'layers[2]', 'BAD_LAYERS'],
    ['string units', { ...base, layers: [4, '3' as unknown as number, 2] }, 'layers[1]', 'BAD_LAYERS'],
    ['zero batch', { ...base, batch: 0 }, 'batch', 'BAD_BATCH'],
    ['negative batch', { ...base, batch: -1 }, 'batch', 'BAD_BATCH'],
    ['fractional batch', { ...base, batch: 1.5 }, 'batch', 'BAD_BATCH'],
    ['NaN batch', { ...base, batch: NaN }, 'batch', 'BAD_BATCH'],
    ['Infinity batch', { ...base, batch: Infinity }, 'batch', 'BAD_BATCH'],
    ['unknown dtype', { ...base, dtype: 'float16' as 'float32' }, 'dtype', 'BAD_DTYPE'],
    ['unknown optimizer', { ...base, optimizer: 'rmsprop' as 'sgd' }, 'optimizer', 'BAD_OPTIMIZER'],
    ['unknown order', { ...base, order: 'random' as 'kind-major' }, 'order', 'BAD_ORDER'],
    ['unknown activation', { ...base, activations: ['relu', 'gelu' as 'relu'] }, 'activations[1]', 'BAD_ACTIVATIONS'],
    ['too few activations', { ...base, activations: ['relu'] }, 'activations', 'BAD_ACTIVATIONS'],
    ['too many activations', { ...base, activations: ['relu', 'relu', 'relu'] }, 'activations', 'BAD_ACTIVATIONS'],
    ['hidden softmax', { ...base, activations: ['softmax', 'softmax'] }, 'activations[0]', 'BAD_ACTIVATIONS'],
    ['align not a power of two', { ...base, align: 24 }, 'align', 'BAD_ALIGN'],
    ['align below 8', { ...base, align: 4 }, 'align', 'BAD_ALIGN'],
    ['align NaN', { ...base, align: NaN }, 'align', 'BAD_ALIGN'],
    ['negative samples', { ...base, samples: -5 }, 'samples', 'BAD_SAMPLES'],
    ['total beyond 2^53', { ...base, layers: [2 ** 27, 2 ** 27, 2] }, 'layers', 'TOO_LARGE'],
    // The native count (validate.cc expectedCount) saturates where it overflows 64 bits.
    ['a region count beyond 2^64', { ...base, layers: [2 ** 40, 2 ** 40, 2] }, 'layers', 'TOO_LARGE'],
  ];
  it.each(cases)('%s', (_name, spec, field, code) => {
    let err: unknown;
    try {
      planLayout(spec);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LayoutError);
    const le = err as LayoutError;
    expect(le.code).toBe(code);
    expect(le.field).toBe(field);
    expect(le.message).toContain(field);
    expect(le.message).toContain('got');
  });

  it('random bad specs always give LayoutError, never anything else', () => {
    const badNumber = fc.oneof(
      fc.constantFrom(0, -1, NaN, Infinity, -Infinity, 0.5, 2 ** 60, '8', null, undefined, {}),
      fc.double({ noInteger: true }),
      fc.integer({ max: 0 }),
    );
    const badSpec = fc.oneof(
      fc.record({ layers: fc.array(badNumber, { minLength: 2, maxLength: 4 }), batch: fc.constant(4) }),
      fc.record({ layers: fc.constant([3, 2]), batch: badNumber }),
      fc.record({ layers: fc.array(fc.integer({ min: 1, max: 9 }), { maxLength: 1 }), batch: fc.constant(4) }),
      fc.record({ layers: fc.constant([3, 2]), batch: fc.constant(4), dtype: fc.string().filter((s) => s !== 'float32' && s !== 'float64') }),
      fc.record({ layers: fc.constant([3, 2]), batch: fc.constant(4), align: fc.integer().filter((a) => a < 8 || (a & (a - 1)) !== 0) }),
      fc.record({
        layers: fc.constant([3, 3, 2]),
        batch: fc.constant(4),
        activations: fc
          .array(fc.constantFrom('relu', 'softmax', 'elu'), { maxLength: 4 })
          .filter((a) => a.length !== 2 || a.includes('elu') || a[0] === 'softmax'),
      }),
    );
    fc.assert(
      fc.property(badSpec, (spec) => {
        try {
          planLayout(spec as unknown as LayoutSpec);
        } catch (e) {
          if (!(e instanceof LayoutError)) throw new Error(`not a LayoutError: ${String(e)}`, { cause: e });
          return;
        }
        throw new Error(`accepted ${JSON.stringify(spec)}`);
      }),
      { numRuns: 3000 },
    );
  });
});
