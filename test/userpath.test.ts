// userpath.test.ts: issue 47, the user's call without per-call work that grows with the data
// set: a data set read once, natively, straight into the arena (checked and compared in the
// same pass), Dataset handles that are not read again while the arena holds them, batches read
// into z[0] / y, and the bad-input guarantees on that path (a SharedArrayBuffer written by
// another thread during the calls included). Speed is measured in bench/userpath.mjs.
import { describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Arena, Dataset, DataError, planLayout, Trainer, type LayoutSpec } from '../src/index.js';
import { toyData } from './support/train-checks.js';
import { checkUserCalls } from './support/user-calls.js';

const cpu = { backend: 'cpu' } as const;
const spec: LayoutSpec = { layers: [6, 16, 3], batch: 10, samples: 200, optimizer: 'momentum' };
const toy = (n: number, seed: number) => {
  const d = toyData(6, 3, n, seed, false);
  return { x: Float32Array.from(d.x), labels: Uint8Array.from(d.labels!) };
};

function setup(s: LayoutSpec = spec) {
  const arena = Arena.create(planLayout(s), cpu);
  const t = new Trainer(arena, { lr: 0.05 });
  t.init(1);
  return { arena, t };
}

describe('the per-call paths: a batch up, the run and its results back in one native call', () => {
  it('step, predict, evaluate and forward move what they did before (counters and observers) and compute what a twin arena does', async () => {
    await checkUserCalls('cpu', 0);
  });
});

describe('Dataset: read once, then not at all while the arena holds it', () => {
  it('a second fit uploads nothing; in-place edits are seen after update(), and only what changed goes up', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const d = toy(100, 1);
    const ds = new Dataset(d);
    await t.fit(ds, { epochs: 1 });
    const s0 = arena.stats.toDeviceTransfers;
    await t.fit(ds, { epochs: 1 });
    expect(arena.stats.toDeviceTransfers).toBe(s0);
    // Not read: an edit without update() is not seen (the documented contract) ...
    d.x[0] = 1e3;
    await t.evaluate(ds);
    expect(arena.stats.toDeviceTransfers).toBe(s0);
    expect(arena.view(0, 'xdata')[0]).not.toBe(1e3);
    // ... and after update() it is, with only the x rows going up.
    ds.update();
    const b0 = arena.stats.toDeviceBytes;
    await t.evaluate(ds);
    expect(arena.stats.toDeviceTransfers).toBe(s0 + 1);
    expect(arena.stats.toDeviceBytes - b0).toBe(100 * 6 * 4);
    expect(arena.view(0, 'xdata')[0]).toBe(1e3);
  });

  it('trains exactly as the plain object does', async () => {
    const a = setup(),
      b = setup();
    using _a = a.arena;
    using _b = b.arena;
    const d = toy(100, 2);
    const ra = await a.t.fit(d, { epochs: 3, seed: 4 });
    const rb = await b.t.fit(new Dataset(d), { epochs: 3, seed: 4 });
    expect(rb.loss).toBe(ra.loss);
    expect(Array.from(b.arena.view(1, 'w'))).toEqual(Array.from(a.arena.view(1, 'w')));
  });

  it('displaced by another data set, it is read again (and checked) at its next use', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const d = toy(100, 1);
    const ds = new Dataset(d);
    const m0 = await t.evaluate(ds);
    await t.evaluate(toy(100, 9));
    const s0 = arena.stats.toDeviceTransfers;
    const m1 = await t.evaluate(ds);
    expect(arena.stats.toDeviceTransfers).toBeGreaterThan(s0);
    expect(m1).toEqual(m0);
    d.x[7] = NaN;
    await t.evaluate(toy(100, 9));
    await expect(t.evaluate(ds)).rejects.toMatchObject({ code: 'BAD_DATA', field: 'data.x[7]' });
  });

  it('a bad data set is refused before any step; the handle takes objects only', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const d = toy(100, 1);
    d.labels[40] = 3;
    const w0 = Array.from(arena.view(1, 'w'));
    await expect(t.fit(new Dataset(d), { epochs: 1 })).rejects.toMatchObject({ code: 'BAD_LABEL', field: 'data.labels[40]', value: 3 });
    expect(t.steps).toBe(0);
    arena.toHost({ kinds: ['w'] });
    expect(Array.from(arena.view(1, 'w'))).toEqual(w0);
    expect(() => new Dataset(null as never)).toThrow(DataError);
  });
});

describe('the native checked copy', () => {
  it('names the first bad element of every element type, and converts as a typed array store does', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const base = toy(100, 3);
    const cases: Array<[ArrayLike<number>, string, unknown]> = [
      [Float64Array.from(base.x, (v, i) => (i === 17 ? NaN : v)), 'data.x[17]', NaN],
      [Float64Array.from(base.x, (v, i) => (i === 599 ? 1e39 : v)), 'data.x[599]', Infinity], // finite in float64, not float32
      [Array.from(base.x, (v, i) => (i === 3 ? -Infinity : v)), 'data.x[3]', -Infinity],
    ];
    for (const [x, field, value] of cases) {
      const e = await t.evaluate({ x, labels: base.labels }).catch((err) => err);
      expect(e).toBeInstanceOf(DataError);
      expect(e).toMatchObject({ code: 'BAD_DATA', field });
      expect(Object.is(e.value, value)).toBe(true);
    }
    await expect(t.evaluate({ x: base.x, labels: Float64Array.from(base.labels, (v, i) => (i === 9 ? 1.5 : v)) })).rejects.toMatchObject({
      code: 'BAD_LABEL',
      field: 'data.labels[9]',
      value: 1.5,
    });
    await expect(t.evaluate({ x: base.x, labels: Float32Array.from(base.labels, (v, i) => (i === 2 ? NaN : v)) })).rejects.toMatchObject({
      code: 'BAD_DATA',
      field: 'data.labels[2]',
    });
    // Integer inputs are numbers like any other: the same metrics as their float32 copy.
    const ints = { x: Int16Array.from(base.x, (v) => Math.round(v * 100)), labels: Int32Array.from(base.labels) };
    const m1 = await t.evaluate(ints);
    const m2 = await t.evaluate({ x: Float32Array.from(ints.x), labels: Array.from(ints.labels) });
    expect(m1).toEqual(m2);
  });

  it('a large set split over threads: the first bad element of all, and nothing trained', async () => {
    const rows = 40_000;
    const { arena, t } = setup({ ...spec, samples: rows });
    using _a = arena;
    const x = new Float32Array(rows * 6).fill(0.25);
    const labels = new Uint8Array(rows);
    x[rows * 6 - 2] = NaN;
    x[rows * 3 + 1] = Infinity;
    await expect(t.fit({ x, labels }, { epochs: 1 })).rejects.toMatchObject({ code: 'BAD_DATA', field: `data.x[${rows * 3 + 1}]` });
    expect(t.steps).toBe(0);
    x[rows * 3 + 1] = 0;
    x[rows * 6 - 2] = 0;
    const r = await t.fit({ x, labels }, { epochs: 1 });
    expect(Number.isFinite(r.loss)).toBe(true);
  });

  it('a refused call leaves no stale claim: the next call uploads what it read', async () => {
    const { arena, t } = setup();
    using _a = arena;
    const d = toy(100, 1);
    const m0 = await t.evaluate(d);
    const bad = { x: Float32Array.from(d.x), labels: d.labels };
    bad.x.fill(9, 0, 300);
    bad.x[301] = NaN; // rows before it were written into the host side
    await expect(t.evaluate(bad)).rejects.toMatchObject({ field: 'data.x[301]' });
    expect(await t.evaluate(d)).toEqual(m0);
  });
});

describe('step, predict and forward read into the arena', () => {
  it('step() in a loop moves the batch rows only and trains as fit does on the same batches', async () => {
    const a = setup({ ...spec, samples: 40 }),
      b = setup({ ...spec, samples: 40 });
    using _a = a.arena;
    using _b = b.arena;
    const d = toy(40, 5);
    await a.t.fit(d, { epochs: 1, shuffle: false });
    const s0 = b.arena.stats;
    for (let i = 0; i < 4; i++) await b.t.step(d.x.subarray(i * 60, (i + 1) * 60), { labels: d.labels.subarray(i * 10, (i + 1) * 10) });
    const s1 = b.arena.stats;
    expect(s1.toDeviceBytes - s0.toDeviceBytes).toBe(40 * (6 + 3) * 4); // x rows and one-hot rows, nothing else
    b.arena.toHost({ kinds: ['w', 'b'] });
    expect(Array.from(b.arena.view(1, 'w'))).toEqual(Array.from(a.arena.view(1, 'w')));
  });

  it('steps queued without awaiting each take their own batch', async () => {
    const a = setup({ ...spec, samples: 40 }),
      b = setup({ ...spec, samples: 40 });
    using _a = a.arena;
    using _b = b.arena;
    const d = toy(40, 6);
    for (let i = 0; i < 4; i++) await a.t.step(d.x.subarray(i * 60, (i + 1) * 60), { labels: d.labels.subarray(i * 10, (i + 1) * 10) });
    const x = Float32Array.from(d.x);
    const queued = [];
    for (let i = 0; i < 4; i++) queued.push(b.t.step(x.subarray(i * 60, (i + 1) * 60), { labels: d.labels.subarray(i * 10, (i + 1) * 10) }));
    x.fill(NaN); // after the calls: what they read was read at the call
    await Promise.all(queued);
    b.arena.toHost({ kinds: ['w', 'b'] });
    a.arena.toHost({ kinds: ['w', 'b'] });
    expect(Array.from(b.arena.view(1, 'w'))).toEqual(Array.from(a.arena.view(1, 'w')));
  });

  it('fit on a plain object that did not change uploads nothing, and allocates nothing the size of the set', async () => {
    const rows = 100_000; // 6 x 4 bytes a row: 2.4 MB
    const { arena, t } = setup({ ...spec, samples: rows });
    using _a = arena;
    const d = { x: new Float32Array(rows * 6).map((_, i) => (i % 13) / 13), labels: new Uint8Array(rows).map((_, i) => i % 3) };
    await t.fit(d, { epochs: 1 });
    const s0 = arena.stats.toDeviceTransfers;
    const heap0 = process.memoryUsage().arrayBuffers;
    for (let i = 0; i < 5; i++) await t.evaluate(d);
    expect(arena.stats.toDeviceTransfers).toBe(s0);
    // A snapshot a call would be 2.4 MB of array buffers each; none is made.
    expect(process.memoryUsage().arrayBuffers - heap0).toBeLessThan(rows * 6 * 4);
  });
});

describe("no host copy of the data set beyond the user's array and the arena's region", () => {
  const status = (key: string) =>
    Number(
      /(\d+) kB/.exec(
        readFileSync('/proc/self/status', 'utf8')
          .split('\n')
          .find((l) => l.startsWith(key))!,
      )![1],
    ) * 1024;
  it.runIf(existsSync('/proc/self/clear_refs'))(
    "the peak resident set of a first fit grows by the host region and the device side only (the CPU backend's device side is host memory)",
    async () => {
      const rows = 20_000,
        inputs = 784;
      const { arena, t } = setup({ layers: [inputs, 8, 10], batch: 100, samples: rows, optimizer: 'sgd' });
      using _a = arena;
      const x = new Float32Array(rows * inputs).map((_, i) => (i % 251) / 251);
      const labels = new Uint8Array(rows).map((_, i) => i % 10);
      const bytes = x.byteLength;
      await t.evaluate({ x: x.subarray(0, inputs), labels: labels.subarray(0, 1) }); // code paths warm
      writeFileSync('/proc/self/clear_refs', '5'); // the peak (VmHWM) starts again from here
      const before = status('VmRSS:');
      await t.fit({ x, labels }, { epochs: 1 });
      const grown = status('VmHWM:') - before;
      // The host region and the device side are touched once each: 2x; a snapshot would be a third.
      expect(grown).toBeLessThan(2.5 * bytes);
      writeFileSync('/proc/self/clear_refs', '5');
      const again = status('VmRSS:');
      for (let i = 0; i < 3; i++) await t.fit({ x, labels }, { epochs: 1 });
      expect(status('VmHWM:') - again).toBeLessThan(0.25 * bytes); // unchanged: nothing the size of the set
    },
  );
});

describe('a SharedArrayBuffer written by another thread during the calls', () => {
  it('gives a typed error or a finite result, never a crash, and what trains is what was checked', async () => {
    const rows = 20_000;
    const { arena, t } = setup({ ...spec, samples: rows, batch: 100 });
    using _a = arena;
    const sab = new SharedArrayBuffer(rows * 6 * 4);
    const x = new Float32Array(sab).fill(0.5);
    const labels = new Uint8Array(rows);
    const writer = new Worker(
      `
      const { workerData } = require('node:worker_threads');
      const x = new Float32Array(workerData.sab);
      for (let k = 0; k < 4e8; k++) { const i = (k * 7919) % x.length; x[i] = (k & 3) === 0 ? NaN : 0.5; }
    `,
      { eval: true, workerData: { sab } },
    );
    let refused = 0,
      trained = 0;
    try {
      for (let i = 0; i < 20; i++) {
        try {
          const r = await t.fit({ x, labels }, { epochs: 1 });
          expect(Number.isFinite(r.loss)).toBe(true);
          trained++;
        } catch (e) {
          expect(e).toBeInstanceOf(DataError);
          refused++;
        }
        try {
          const out = await t.predict(x.subarray(0, 100 * 6));
          expect(out.every(Number.isFinite)).toBe(true);
        } catch (e) {
          expect(e).toBeInstanceOf(DataError);
        }
      }
    } finally {
      await writer.terminate();
    }
    expect(refused + trained).toBe(20);
    arena.toHost({ kinds: ['w'] });
    expect(arena.view(1, 'w').every(Number.isFinite)).toBe(true);
  });
});
