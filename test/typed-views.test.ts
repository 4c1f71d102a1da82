// typed-views.test.ts: views typed by the plan's dtype. The type assertions are checked by
// `tsc --noEmit` (this file is in the project: CI and every landing run it); the runtime ones by
// vitest. A plan without dtype is float32.
import { describe, expect, expectTypeOf, it } from 'vitest';
import { Arena, planLayout, Trainer, type Dtype, type LayoutSpec, type View } from '../src/index.js';

describe("views typed by the plan's dtype", () => {
  it('float32 and float64 plans give Float32Array and Float64Array without a cast', async () => {
    const p32 = planLayout({ layers: [3, 4, 2], batch: 2 });
    const p64 = planLayout({ layers: [3, 4, 2], batch: 2, dtype: 'float64' });
    expectTypeOf(p32.spec.dtype).toEqualTypeOf<'float32'>();
    expectTypeOf(p64.spec.dtype).toEqualTypeOf<'float64'>();
    const a = Arena.create(p32, { backend: 'cpu' });
    const b = Arena.create(p64, { backend: 'cpu' });
    try {
      const w: Float32Array = a.view(1, 'w');
      const w64: Float64Array = b.view(1, 'w');
      // @ts-expect-error: a float64 plan's view is no Float32Array
      const wrong: Float32Array = b.view(1, 'w');
      expect(w).toBeInstanceOf(Float32Array);
      expect(w64).toBeInstanceOf(Float64Array);
      expect(wrong).toBeInstanceOf(Float64Array);
      const t = new Trainer(a);
      expectTypeOf(t).toEqualTypeOf<Trainer<'float32'>>();
      t.init(1);
      const out: Float32Array = await t.predict(new Float32Array(3));
      expect(out).toBeInstanceOf(Float32Array);
      const f: Float32Array = await t.forward(new Float32Array(3));
      expect(f.length).toBe(2);
      const t64 = new Trainer(b);
      t64.init(1);
      const out64: Float64Array = await t64.predict([1, 2, 3]);
      expect(out64).toBeInstanceOf(Float64Array);
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it('a spec of unknown dtype gives the union; a user region may be raw bytes', () => {
    const spec: LayoutSpec = { layers: [2, 2], batch: 1, extra: [{ name: 'raw', bytes: 8 }] };
    const p = planLayout(spec);
    expectTypeOf(p.spec.dtype).toEqualTypeOf<Dtype>();
    const a = Arena.create(p, { backend: 'cpu' });
    try {
      expectTypeOf(a.view(1, 'w')).toEqualTypeOf<View>();
      expectTypeOf(a.view('raw')).toEqualTypeOf<View | Uint8Array>();
      expect(a.view('raw')).toBeInstanceOf(Uint8Array);
    } finally {
      a.dispose();
    }
  });
});
