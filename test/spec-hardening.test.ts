// spec-hardening.test.ts: issue 14 items 8 and 9 (specs and selectors): sparse arrays, values
// that change between reads, wrong types, each a typed error naming the field.
import { describe, expect, it } from 'vitest';
import { Arena, errorClassOf, FieldError, LayoutError, minDeviceBudget, OptionError, planLayout, type LayoutSpec } from '../src/index.js';

const layoutFailure = (spec: unknown) => {
  try {
    planLayout(spec as LayoutSpec);
  } catch (e) {
    expect(e).toBeInstanceOf(LayoutError);
    return [(e as LayoutError).code, (e as LayoutError).field];
  }
  throw new Error('accepted');
};

/** A value that answers `first` on the first read and `then` on every later read. */
function changing<T extends object>(target: T, key: PropertyKey, first: unknown, then: unknown): T {
  let reads = 0;
  return new Proxy(target, { get: (t, k, r) => (String(k) === String(key) ? (reads++ === 0 ? first : then) : Reflect.get(t, k, r)) });
}

describe('item 8: specs are read once into a snapshot', () => {
  it('sparse arrays are refused with the index of the hole', () => {
    // eslint-disable-next-line no-sparse-arrays
    expect(layoutFailure({ layers: [784, , 10], batch: 1 })).toEqual(['BAD_LAYERS', 'layers[1]']);
    expect(layoutFailure({ layers: new Array(3), batch: 1 })).toEqual(['BAD_LAYERS', 'layers[0]']);
    // eslint-disable-next-line no-sparse-arrays
    expect(layoutFailure({ layers: [4, 8, 2], batch: 1, activations: [, 'softmax'] })).toEqual(['BAD_ACTIVATIONS', 'activations[0]']);
  });

  it('an activation that changes between reads is used as first read (and checked)', () => {
    const activations = changing(['relu', 'softmax'] as Array<'relu' | 'softmax'>, 0, 'relu', 'softmax');
    const plan = planLayout({ layers: [4, 8, 2], batch: 1, activations });
    expect(plan.spec.activations).toEqual(['relu', 'softmax']);
    // The other way round: a hidden softmax read first is refused, whatever a later read says.
    const bad = changing(['relu', 'softmax'], 0, 'softmax', 'relu');
    expect(layoutFailure({ layers: [4, 8, 2], batch: 1, activations: bad })).toEqual(['BAD_ACTIVATIONS', 'activations[0]']);
    // A spec whose fields change: one read each.
    const spec = changing({ layers: [4, 8, 2], batch: 2 }, 'batch', 2, -1);
    expect(planLayout(spec).spec.batch).toBe(2);
    const layers = changing([4, 8, 2], 'length', 3, 5000);
    expect(planLayout({ layers, batch: 1 }).spec.layers).toEqual([4, 8, 2]);
  });

  it('wrong types: BigInt, strings, huge lengths', () => {
    expect(layoutFailure({ layers: [4n, 2], batch: 1 })).toEqual(['BAD_LAYERS', 'layers[0]']);
    expect(layoutFailure({ layers: [4, 2], batch: 1n })).toEqual(['BAD_BATCH', 'batch']);
    expect(layoutFailure({ layers: '42', batch: 1 })).toEqual(['BAD_LAYERS', 'layers']);
    expect(layoutFailure({ layers: changing([4, 2], 'length', 2 ** 40, 2), batch: 1 })).toEqual(['BAD_LAYERS', 'layers']);
    expect(layoutFailure({ layers: [4, 2], batch: 1, activations: 'softmax' })).toEqual(['BAD_ACTIVATIONS', 'activations']);
  });
});

describe('item 9: selectors', () => {
  it('non-array kinds or layers, wrong element types: BAD_SELECTOR naming the field', () => {
    using arena = Arena.create(planLayout({ layers: [4, 3], batch: 2 }), { backend: 'cpu' });
    for (const [sel, field] of [
      [{ kinds: 5 }, 'kinds'],
      [{ layers: 5 }, 'layers'],
      [{ kinds: 'w' }, 'kinds'],
      [{ layers: ['1'] }, 'layers'],
      [{ layers: [1n] }, 'layers'],
      [{ kinds: [Symbol('w')] }, 'kinds'],
      [null, 'selector'],
    ] as const) {
      let err: unknown;
      try {
        arena.toDevice(sel as never);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(OptionError);
      expect((err as OptionError).code).toBe('BAD_SELECTOR');
      expect((err as OptionError).field).toContain(field);
    }
    // Read once: a layers list that grows on a second read selects what the first read said.
    const layers = changing([1], 'length', 1, 2);
    expect(arena.toDevice({ layers })).toEqual(arena.toDevice({ layers: [1] }));
  });
});

describe('item 9: minDeviceBudget arguments', () => {
  it('a missing plan (LayoutError) or an unknown memory kind (OptionError) names the field', () => {
    const plan = planLayout({ layers: [4, 3], batch: 2 });
    for (const [p, m, code, f] of [
      [null, 'managed', 'BAD_PLAN', 'plan'],
      [{}, 'staged', 'BAD_PLAN', 'plan'],
      [plan, 'device', 'BAD_OPTION', 'memory'],
      [plan, 5, 'BAD_OPTION', 'memory'],
    ] as const) {
      expect(layoutFailure2(() => minDeviceBudget(p as never, m as never))).toEqual([code, f]);
    }
    expect(minDeviceBudget(plan, 'staged').bytes).toBeGreaterThan(0);
  });
});

function layoutFailure2(f: () => unknown) {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(FieldError);
    expect((e as FieldError).name).toBe(errorClassOf((e as FieldError).code));
    return [(e as FieldError).code, (e as FieldError).field];
  }
  throw new Error('accepted');
}

describe('arena and plan are not reassignable', () => {
  it('a resident data set of 2^32 rows or more is refused by the planner, not at the first run', () => {
    let err: unknown;
    try {
      planLayout({ layers: [1, 1], batch: 1, samples: 2 ** 32 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LayoutError);
    expect([(err as LayoutError).code, (err as LayoutError).field]).toEqual(['BAD_SAMPLES', 'samples']);
  });
  it("an arena's plan cannot be replaced to redirect its views", () => {
    using arena = Arena.create(planLayout({ layers: [4, 3], batch: 2 }), { backend: 'cpu' });
    expect(() => {
      (arena as { plan: unknown }).plan = planLayout({ layers: [400, 300], batch: 2 });
    }).toThrow(TypeError);
    expect(arena.view(1, 'w').length).toBe(12);
  });
});
