// first-upload.test.ts: issue 31: the first upload of a new arena skips the regions nobody
// wrote (they are zero on both sides), so init() no longer sends the empty data regions; any
// upload after the device side may have changed sends the whole arena, as before.
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer } from '../src/index.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;
const spec = { layers: [6, 9, 4], batch: 5, optimizer: 'momentum' as const, samples: 4000 };
const upBytes = (a: Arena, f: () => void) => {
  const s0 = a.stats.toDeviceBytes;
  f();
  return a.stats.toDeviceBytes - s0;
};

describe('the first upload sends what was written', () => {
  it('init() on a new arena leaves out the untouched data regions; training is bit-identical to a full upload', async () => {
    const plan = planLayout(spec);
    using fresh = Arena.create(plan, cpu);
    using full = Arena.create(plan, cpu);
    full.toDevice(); // no longer fresh: its init uploads the whole arena
    const [a, b] = [new Trainer(fresh, { lr: 0.1 }), new Trainer(full, { lr: 0.1 })];
    const sent = upBytes(fresh, () => a.init(3));
    expect(upBytes(full, () => b.init(3))).toBe(plan.totalBytes);
    const data = plan.bytesByKind().xdata! + plan.bytesByKind().ydata!;
    expect(sent).toBeLessThanOrEqual(plan.totalBytes - data);
    expect(sent).toBeGreaterThanOrEqual(plan.bytesByKind().w! + plan.bytesByKind().b! + plan.bytesByKind().mw! + plan.bytesByKind().mb!);
    const d = toyData(6, 4, 40, 2, false);
    const [ra, rb] = [await a.fit(d, { epochs: 3 }), await b.fit(d, { epochs: 3 })];
    expect(ra).toMatchObject({ loss: rb.loss, accuracy: rb.accuracy });
    a.syncToHost();
    b.syncToHost();
    for (const k of ['w', 'b', 'mw', 'mb'] as const) for (const l of [1, 2]) expect(fresh.view(l, k)).toEqual(full.view(l, k));
  });

  it('what you wrote goes up with it: a view of the data regions, bytes() of the header, the host address', () => {
    const plan = planLayout(spec);
    {
      using a = Arena.create(plan, cpu);
      a.view(0, 'xdata')[7] = 5; // written by hand before the first run
      const t = new Trainer(a);
      const sent = upBytes(a, () => t.init(1));
      expect(sent).toBeGreaterThan(plan.bytesByKind().xdata!);
      a.view(0, 'xdata')[7] = 0;
      a.toHost({ kinds: ['xdata'] });
      expect(a.view(0, 'xdata')[7]).toBe(5); // it reached the device
    }
    {
      using a = Arena.create(plan, cpu);
      void a.hostAddress; // native code may write anywhere
      expect(upBytes(a, () => new Trainer(a).init(1))).toBe(plan.totalBytes);
    }
  });

  it('an arena that ran (or was uploaded) gets the whole arena from init(), as before', async () => {
    const plan = planLayout(spec);
    using a = Arena.create(plan, cpu);
    const t = new Trainer(a);
    t.init(1);
    await t.fit(toyData(6, 4, 40, 2, false), { epochs: 1 });
    expect(upBytes(a, () => t.init(2))).toBe(plan.totalBytes);
  });
});
