// stream-shuffle.test.ts: how a shuffled stream fills its windows (src/train/stream.ts). A .npy
// file is shuffled over all its rows (the resident epoch's affine permutation of every row,
// rows gathered natively: narrow rows in spans, wide ones one by one, converted or not); an
// iterable through a shuffle buffer. Each window's rows are read back by id (x[row][0] = row).
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Arena, DataError, OptionError, planLayout, Trainer } from '../src/index.js';
import { streamBatches, streamNpy, toNpy, type DataStream } from '../src/io.js';
import { affinePermutation, Rng } from '../src/train/rng.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-arena-stream-shuffle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file of `n` rows of `width` values (row i starts with i), labels i % 4. */
function file(name: string, n: number, width: number, f64 = false): DataStream {
  const x = f64 ? new Float64Array(n * width) : new Float32Array(n * width);
  for (let i = 0; i < n; i++) x.fill(i, i * width, (i + 1) * width);
  writeFileSync(join(dir, `${name}.npy`), toNpy(x, [n, width]));
  writeFileSync(join(dir, `${name}-labels.npy`), toNpy(Int32Array.from({ length: n }, (_, i) => i % 4)));
  return streamNpy({ x: join(dir, `${name}.npy`), labels: join(dir, `${name}-labels.npy`) });
}

/** The row ids of each window of each epoch, as the source fills them (labels checked). */
/** `sizes`: fill k asks for sizes[k] rows (then `window`), as a fit's first windows do (stream-fit.ts). */
async function windows(
  s: DataStream,
  width: number,
  seed: number | undefined,
  window: number,
  epochs = 1,
  buffer = window,
  sizes: number[] = [],
): Promise<number[][][]> {
  const src = await s.open({ inputs: width, outputs: 4, dtype: 'float32' });
  const rng = seed === undefined ? undefined : new Rng(seed);
  const x = new Float32Array(window * width),
    y = new Float32Array(window * 4);
  const out: number[][][] = [];
  try {
    for (let e = 0; e < epochs; e++) {
      const fill = src.epoch(rng, window, buffer),
        ws: number[][] = [];
      let k = 0;
      const next = () => fill(sizes[k++] ?? window, { x, y });
      for (let f = await next(); f.rows > 0; f = await next()) {
        const ids = Array.from({ length: f.rows }, (_, i) => x[i * width]!);
        ids.forEach((id, i) => {
          expect(x[i * width + width - 1]).toBe(id);
          expect(y[i * 4 + (id % 4)]).toBe(1);
        });
        ws.push(ids);
      }
      out.push(ws);
    }
  } finally {
    await src.close();
  }
  return out;
}

const everyRowOnce = (ws: number[][], n: number) => expect(ws.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i));

describe('a shuffled .npy stream: over all rows', () => {
  const N = 1000,
    W = 100; // 10 windows
  const narrow = file('narrow', N, 3),
    wide = file('wide', 400, 2048),
    f64 = file('f64', N, 3, true);

  it('every row once per epoch, in the affine order of all rows the seed draws (narrow, wide, float64 rows)', async () => {
    for (const [s, n, width] of [
      [narrow, N, 3],
      [wide, 400, 2048],
      [f64, N, 3],
    ] as const) {
      const got = await windows(s, width, 7, W, 2);
      const rng = new Rng(7);
      for (const ws of got) {
        everyRowOnce(ws, n);
        const p = affinePermutation(rng, n);
        expect(ws.flat()).toEqual(Array.from({ length: n }, (_, k) => (p.a * k + p.c) % n));
      }
      expect(got[0]!.flat()).not.toEqual(got[1]!.flat());
    }
  });

  it('rows of different parts of the file share windows: the first and last row for some seed; windows mix the file', async () => {
    let together = false,
      blocks = 0,
      count = 0;
    for (let seed = 0; seed < 30; seed++) {
      const [ws] = await windows(narrow, 3, seed, W);
      if (ws!.some((w) => w.includes(0) && w.includes(N - 1))) together = true;
      for (const w of ws!) {
        blocks += new Set(w.map((id) => Math.floor(id / W))).size;
        count++;
      }
    }
    expect(together).toBe(true);
    // Windows of contiguous rows (the former order) would come from 1 block of W rows each.
    expect(blocks / count).toBeGreaterThan(8); // uniform: about 10 of 10
  });

  it('a file cut short after it was opened: a DataError BAD_FILE naming it (rows read one by one, and in spans)', async () => {
    for (const [name, n, width] of [
      ['cut-wide', 400, 2048],
      ['cut-narrow', N, 3],
    ] as const) {
      const src = await file(name, n, width).open({ inputs: width, outputs: 4, dtype: 'float32' });
      try {
        truncateSync(join(dir, `${name}.npy`), 128 + (n - 5) * width * 4);
        const fill = src.epoch(new Rng(1), n, n);
        const err = await fill(n, { x: new Float32Array(n * width), y: new Float32Array(n * 4) }).catch((e: unknown) => e);
        expect(err, name).toBeInstanceOf(DataError);
        expect(err, name).toMatchObject({ code: 'BAD_FILE', field: join(dir, `${name}.npy`) });
      } finally {
        await src.close();
      }
    }
  });

  it("windows of any sizes (a fit's first ones are smaller) hold the same rows in the same order", async () => {
    for (const seed of [3, undefined]) {
      const even = (await windows(narrow, 3, seed, W, 2)).map((ws) => ws.flat());
      const ramp = await windows(narrow, 3, seed, W, 2, W, [13, 25, 50]);
      expect(ramp[0]!.map((w) => w.length).slice(0, 4)).toEqual([13, 25, 50, W]);
      expect(ramp.map((ws) => ws.flat())).toEqual(even);
    }
  });

  it('same seed, same order; another seed, another; unshuffled: the file in order', async () => {
    expect(await windows(narrow, 3, 3, W, 2)).toEqual(await windows(narrow, 3, 3, W, 2));
    expect(await windows(narrow, 3, 3, W)).not.toEqual(await windows(narrow, 3, 4, W));
    const [plain] = await windows(narrow, 3, undefined, W);
    expect(plain!.flat()).toEqual(Array.from({ length: N }, (_, i) => i));
    expect(plain!.length).toBe(10);
  });
});

describe('a shuffled iterable: a shuffle buffer', () => {
  const N = 600,
    width = 3;
  const x = new Float32Array(N * width);
  for (let i = 0; i < N; i++) x.fill(i, i * width, (i + 1) * width);
  const labels = Int32Array.from({ length: N }, (_, i) => i % 4);
  const source = () =>
    streamBatches(() => Array.from({ length: 12 }, (_, b) => ({ x: x.subarray(b * 150, (b + 1) * 150), labels: labels.subarray(b * 50, (b + 1) * 50) })));

  it('every row once per epoch; a row comes out at most B draws ahead of its place; windows mix', async () => {
    for (const B of [1, 60, 200, 1000]) {
      const got = await windows(source(), width, 5, 60, 2, B);
      for (const ws of got) {
        everyRowOnce(ws, N);
        ws.flat().forEach((id, pos) => expect(pos).toBeGreaterThanOrEqual(id - B));
      }
      if (B === 1) expect(got[0]!.flat()).toEqual(Array.from({ length: N }, (_, i) => i));
      else expect(got[0]![0]!.some((id) => id >= 60)).toBe(true); // window 0 holds later rows
    }
  });

  it("windows of any sizes (a fit's first ones are smaller) draw the same rows in the same order", async () => {
    const even = (await windows(source(), width, 5, 60, 2, 100)).map((ws) => ws.flat());
    const ramp = await windows(source(), width, 5, 60, 2, 100, [7, 15, 30]);
    expect(ramp[0]!.map((w) => w.length).slice(0, 4)).toEqual([7, 15, 30, 60]);
    expect(ramp.map((ws) => ws.flat())).toEqual(even);
  });

  it('same seed, same order; another seed, another', async () => {
    expect(await windows(source(), width, 5, 60, 2, 100)).toEqual(await windows(source(), width, 5, 60, 2, 100));
    expect(await windows(source(), width, 5, 60, 1, 100)).not.toEqual(await windows(source(), width, 6, 60, 1, 100));
  });

  it('shuffleBuffer: a positive integer, else an OptionError naming it', async () => {
    const arena = Arena.create(planLayout({ layers: [3, 4], batch: 10, samples: 60 }), { backend: 'cpu' });
    try {
      const t = new Trainer(arena);
      for (const bad of [0, -5, 2.5, '64', Number.NaN, 2 ** 53]) {
        let err: unknown;
        try {
          await t.fit(source() as never, { epochs: 1, shuffleBuffer: bad as number });
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(OptionError);
        expect(err).toMatchObject({ code: 'BAD_OPTION', field: 'shuffleBuffer' });
        expect(Object.is((err as { value: unknown }).value, bad)).toBe(true);
      }
      const r = await t.fit(source() as never, { epochs: 1, shuffleBuffer: 7, seed: 2 });
      expect(r.steps).toBe(60);
    } finally {
      arena.dispose();
    }
  });
});
