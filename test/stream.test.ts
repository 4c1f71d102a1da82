// stream.test.ts: fit() from a source larger than the plan (issue 31). Streamed through the
// data regions window by window, the same data in the same order gives the same weights, bit
// for bit, as resident training on the whole set (CPU): from .npy files, an async generator and
// an array of batches; shuffled, a .npy source is resident shuffled training (any window). Bad
// sources are typed errors.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Arena, DataError, planLayout, Trainer, type Data, type Progress } from '../src/index.js';
import { streamNpy, toNpy } from '../src/io.js';
import { toyData } from './support/train-checks.js';

const cpu = { backend: 'cpu' } as const;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-stream-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const layers = [6, 10, 4];
const N = 100; // 12 full batches of 8 and one of 4
const data = toyData(6, 4, N, 3, false) as { x: Float64Array; labels: Uint8Array };
const x32 = Float32Array.from(data.x);
writeFileSync(join(dir, 'x.npy'), toNpy(x32, [N, 6]));
writeFileSync(
  join(dir, 'x64be.npy'),
  (() => {
    // float64, big-endian: converted while read
    const b = toNpy(Float64Array.from(x32), [N, 6]);
    const head = b.length - N * 48;
    for (let i = head; i < b.length; i += 8) b.subarray(i, i + 8).reverse();
    b.set(Buffer.from("'>f8'", 'latin1'), Buffer.from(b.subarray(0, head)).toString('latin1').indexOf("'<f8'"));
    return b;
  })(),
);
writeFileSync(join(dir, 'labels.npy'), toNpy(Int32Array.from(data.labels)));

async function train(
  samples: number,
  source: unknown,
  options: { epochs: number; shuffle?: boolean; seed?: number; onProgress?: (p: Progress) => void; signal?: AbortSignal },
) {
  const arena = Arena.create(planLayout({ layers, batch: 8, samples, optimizer: 'adam' }), cpu);
  try {
    const t = new Trainer(arena, { lr: 0.01 });
    t.init(5);
    const atInit = { bytes: arena.stats.toDeviceBytes, transfers: arena.stats.toDeviceTransfers };
    const r = await t.fit(source as Data, options);
    return { r, atInit, w: [1, 2].flatMap((l) => [Float32Array.from(arena.view(l, 'w')), Float32Array.from(arena.view(l, 'b'))]), stats: arena.stats };
  } finally {
    arena.dispose();
  }
}

const same = (a: Float32Array[], b: Float32Array[]) => a.every((v, i) => Buffer.compare(Buffer.from(v.buffer), Buffer.from(b[i]!.buffer)) === 0);

describe('fit() from a stream larger than the plan', () => {
  it('in source order: the weights of resident training on the whole set, bit for bit (npy, async generator, array of batches)', async () => {
    const resident = await train(N, data, { epochs: 3, shuffle: false });
    expect(resident.r.steps).toBe(39);
    async function* batches() {
      for (let r = 0; r < N; r += 7) yield { x: data.x.subarray(r * 6, Math.min(N, r + 7) * 6), labels: data.labels.subarray(r, Math.min(N, r + 7)) };
    }
    const array = Array.from({ length: 4 }, (_, i) => ({
      x: data.x.subarray(i * 25 * 6, (i + 1) * 25 * 6),
      labels: data.labels.subarray(i * 25, (i + 1) * 25),
    }));
    const sources: Array<[string, unknown]> = [
      ['streamNpy (float32)', streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') })],
      ['streamNpy (float64, big-endian)', streamNpy({ x: join(dir, 'x64be.npy'), labels: join(dir, 'labels.npy') })],
      ['async generator function', batches],
      ['array of batches', array],
    ];
    for (const [name, source] of sources) {
      const s = await train(24, source, { epochs: 3, shuffle: false }); // windows of 24 rows: 24, 24, 24, 24, 4
      expect(s.r.steps, name).toBe(39);
      expect(same(s.w, resident.w), name).toBe(true);
      expect(s.r.loss, name).toBe(resident.r.loss);
    }
  });

  it('shuffled .npy streaming is resident shuffled training over the whole file, any window (same seed, same weights); seeds matter', async () => {
    const resident = await train(N, data, { epochs: 2, seed: 9 });
    const npy = (x = 'x.npy') => streamNpy({ x: join(dir, x), labels: join(dir, 'labels.npy') });
    const one = await train(104, npy(), { epochs: 2, seed: 9 }); // a window of 104 rows holds all 100
    expect(same(one.w, resident.w)).toBe(true);
    const a = await train(24, npy(), { epochs: 2, seed: 9 }); // rows gathered from all over the file
    const be = await train(24, npy('x64be.npy'), { epochs: 2, seed: 9 }); // gathered, then converted
    const c = await train(24, npy(), { epochs: 2, seed: 10 });
    expect(same(a.w, resident.w)).toBe(true);
    expect(same(be.w, resident.w)).toBe(true);
    expect(same(a.w, c.w)).toBe(false);
  });

  it("reports progress per window; uploads each window's rows once, nothing more", async () => {
    const seen: Progress[] = [];
    const s = await train(24, streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') }), {
      epochs: 2,
      shuffle: false,
      onProgress: (p) => seen.push(p),
    });
    expect(seen.map((p) => [p.epoch, p.batch, p.batches])).toEqual(
      [1, 2].flatMap((e) => [
        [e, 3, 13],
        [e, 6, 13],
        [e, 9, 13],
        [e, 12, 13],
        [e, 13, 13],
      ]),
    );
    expect(seen.at(-1)!.step).toBe(26);
    expect(Number.isFinite(seen.at(-1)!.loss)).toBe(true);
    // Per epoch the rows' x (4 bytes x 6) and y (4 bytes x 4): 100 rows, in 5 windows of 2 ranges.
    const plan = planLayout({ layers, batch: 8, samples: 24, optimizer: 'adam' });
    // Nothing else goes up: the header at create, at init what init wrote (never the empty data
    // regions: test/first-upload.test.ts), then the windows.
    const data = plan.bytesByKind().xdata! + plan.bytesByKind().ydata!;
    expect(s.atInit.bytes).toBeLessThanOrEqual(plan.headerBytes + plan.totalBytes - data);
    expect(s.atInit.bytes).toBeGreaterThanOrEqual(plan.headerBytes + plan.bytesByKind().w! + plan.bytesByKind().b!);
    expect(s.stats.toDeviceBytes).toBe(s.atInit.bytes + 2 * N * (24 + 16));
    expect(s.stats.toDeviceTransfers).toBe(s.atInit.transfers + 2 * 5 * 2);
  });

  it("a large window: the fit's first windows are W/8, W/4, W/2 (training starts sooner), same weights as resident training", async () => {
    // 256 inputs (1 KiB a float32 row), windows of W = 8192 rows (8 MiB): the ramp's smallest
    // window still holds 1 MiB. The source: 20,000 rows.
    const wide = [256, 8, 4],
      n = 20000,
      W = 8192,
      batch = 64;
    const big = toyData(256, 4, n, 7, false) as { x: Float64Array; labels: Uint8Array };
    writeFileSync(join(dir, 'wide-x.npy'), toNpy(Float32Array.from(big.x), [n, 256]));
    writeFileSync(join(dir, 'wide-labels.npy'), toNpy(Int32Array.from(big.labels)));
    const run = async (samples: number, source: unknown, seen?: Progress[]) => {
      const arena = Arena.create(planLayout({ layers: wide, batch, samples, optimizer: 'adam' }), cpu);
      try {
        const t = new Trainer(arena, { lr: 0.01 });
        t.init(3);
        const r = await t.fit(source as Data, { epochs: 2, seed: 4, onProgress: seen ? (p) => seen.push(p) : undefined });
        return { r, w: [1, 2].flatMap((l) => [Float32Array.from(arena.view(l, 'w')), Float32Array.from(arena.view(l, 'b'))]) };
      } finally {
        arena.dispose();
      }
    };
    const resident = await run(n, { x: Float32Array.from(big.x), labels: big.labels });
    const seen: Progress[] = [];
    const streamed = await run(W, streamNpy({ x: join(dir, 'wide-x.npy'), labels: join(dir, 'wide-labels.npy') }), seen);
    // Epoch 1: 1024 + 2048 + 4096 + 8192 rows, then the 4,640 left (a last batch of 32); epoch 2: W, W, 3,616.
    const perWindow = seen.map((p, i) => p.batch - (i > 0 && seen[i - 1]!.epoch === p.epoch ? seen[i - 1]!.batch : 0));
    expect(perWindow).toEqual([16, 32, 64, 128, 73, 128, 128, 57]);
    expect(streamed.r.steps).toBe(resident.r.steps);
    expect(same(streamed.w, resident.w)).toBe(true);
  });

  it("an in-order iterable of large batches (copied into the window on the gather pool's threads): the weights of unshuffled resident training, bit for bit", async () => {
    // Batches of 1,536 rows of 256 float32 inputs: 1.5 MiB each, past the parallel copy's 1 MiB;
    // a window of 4,096 rows splits batches (the rest of one is held for the next window), and
    // the last batch is short. Float64 batches take set() (a conversion), mixed in.
    const wide = [256, 8, 4],
      n = 10000,
      W = 4096,
      batch = 64,
      rows = 1536;
    const big = toyData(256, 4, n, 9, false) as { x: Float64Array; labels: Uint8Array };
    const x32 = Float32Array.from(big.x);
    const batches = Array.from({ length: Math.ceil(n / rows) }, (_, i) => ({
      x:
        i % 3 === 2
          ? Float64Array.from(x32.subarray(i * rows * 256, Math.min(n, (i + 1) * rows) * 256))
          : x32.subarray(i * rows * 256, Math.min(n, (i + 1) * rows) * 256),
      labels: big.labels.subarray(i * rows, (i + 1) * rows),
    }));
    const run = async (samples: number, source: unknown) => {
      const arena = Arena.create(planLayout({ layers: wide, batch, samples, optimizer: 'adam' }), cpu);
      try {
        const t = new Trainer(arena, { lr: 0.01 });
        t.init(3);
        await t.fit(source as Data, { epochs: 2, shuffle: false });
        return [1, 2].flatMap((l) => [Float32Array.from(arena.view(l, 'w')), Float32Array.from(arena.view(l, 'b'))]);
      } finally {
        arena.dispose();
      }
    };
    const resident = await run(n, { x: x32, labels: big.labels });
    expect(same(await run(W, batches), resident)).toBe(true);
  });

  it('a signal stops it between windows (ArenaError ABORTED), after the window queued behind the one reporting', async () => {
    const ac = new AbortController();
    let reports = 0;
    const p = train(24, streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') }), {
      epochs: 2,
      onProgress: () => {
        if (++reports === 2) ac.abort();
      },
      signal: ac.signal,
    } as never);
    await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    // Window 3's run was queued while window 2 trained (src/train/stream-fit.ts): it runs and
    // reports; nothing after it does.
    expect(reports).toBe(3);
  });

  it('bad sources: typed errors naming the field', async () => {
    const npy = (files: { x: string; labels?: string; y?: string }) => streamNpy(files);
    writeFileSync(join(dir, 'bad-labels.npy'), toNpy(Int32Array.from({ length: N }, (_, i) => (i === 57 ? 4 : 0))));
    writeFileSync(join(dir, 'short-labels.npy'), toNpy(Int32Array.from({ length: N - 1 })));
    writeFileSync(
      join(dir, 'nan.npy'),
      toNpy(
        Float32Array.from(x32, (v, i) => (i === 61 ? NaN : v)),
        [N, 6],
      ),
    );
    async function* once() {
      yield { x: data.x.subarray(0, 60), labels: data.labels.subarray(0, 10) };
    }
    const cases: Array<[() => Promise<unknown>, string, string]> = [
      [() => train(24, npy({ x: join(dir, 'x.npy'), labels: join(dir, 'bad-labels.npy') }), { epochs: 1 }), 'BAD_LABEL', 'labels[57]'],
      [() => train(24, npy({ x: join(dir, 'x.npy'), labels: join(dir, 'short-labels.npy') }), { epochs: 1 }), 'BAD_DATA_WIDTH', 'labels shape'],
      [() => train(24, npy({ x: join(dir, 'labels.npy'), labels: join(dir, 'labels.npy') }), { epochs: 1 }), 'BAD_DATA_WIDTH', 'x shape'],
      [() => train(24, npy({ x: join(dir, 'nan.npy'), labels: join(dir, 'labels.npy') }), { epochs: 1, shuffle: false }), 'BAD_DATA', 'x[61]'],
      [() => train(24, npy({ x: join(dir, 'none.npy'), labels: join(dir, 'labels.npy') }), { epochs: 1 }), 'BAD_PATH', 'x'],
      [async () => npy({ x: join(dir, 'x.npy') }), 'BAD_DATA', 'files'],
      [() => train(24, once(), { epochs: 2 }), 'BAD_DATA', 'data'],
      [() => train(4, npy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') }), { epochs: 1 }), 'DATA_TOO_LARGE', 'data'],
      [() => train(24, [{ x: [1, 2, 3], labels: [0] }], { epochs: 1 }), 'BAD_DATA_WIDTH', 'batch 0.x.length'],
    ];
    for (const [f, code, field] of cases) {
      let err: unknown;
      try {
        await f();
      } catch (e) {
        err = e;
      }
      expect((err as DataError)?.code, `${field}: ${(err as Error)?.message}`).toBe(code);
      expect((err as DataError).field).toBe(field);
    }
    const arena = Arena.create(planLayout({ layers, batch: 8, samples: 24, models: 2 }), cpu);
    try {
      const t = new Trainer(arena);
      t.init(1);
      await expect(t.fit([data], { epochs: 1 })).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    } finally {
      arena.dispose();
    }
  });
});
