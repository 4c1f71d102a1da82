// stream-pipeline.test.ts: the streaming fit's pipeline (src/train/stream-fit.ts: windows
// filled and uploaded ahead while the previous one trains, and across epochs). The shuffled
// order is the documented one: a file's is resident training's, an iterable's is rebuilt here
// from the seed (the shuffle buffer's draws) and trained resident; the native non-finite check
// names the element as the source knows it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer, type Data, type Progress, type TrainerOptions } from '../src/index.js';
import { streamNpy, toNpy } from '../src/io.js';
import { Rng } from '../src/train/rng.js';
import { toyData } from './support/train-checks.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-arena-stream-pipe-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const layers = [6, 10, 4];
const N = 96; // 4 windows of 24 rows, 3 batches of 8 each
const data = toyData(6, 4, N, 7, false) as { x: Float64Array; labels: Uint8Array };
const x32 = Float32Array.from(data.x);
writeFileSync(join(dir, 'x.npy'), toNpy(x32, [N, 6]));
writeFileSync(join(dir, 'labels.npy'), toNpy(Int32Array.from(data.labels)));

function trainer(samples: number, options: Partial<TrainerOptions> = {}) {
  const arena = Arena.create(planLayout({ layers, batch: 8, samples, optimizer: 'adam' }), { backend: 'cpu' });
  const t = new Trainer(arena, { lr: 0.01, ...options });
  t.init(5);
  return { arena, t, weights: () => [1, 2].flatMap((l) => [Float32Array.from(arena.view(l, 'w')), Float32Array.from(arena.view(l, 'b'))]) };
}

const same = (a: Float32Array[], b: Float32Array[]) => a.every((v, i) => Buffer.compare(Buffer.from(v.buffer), Buffer.from(b[i]!.buffer)) === 0);

/** Rows of each epoch in an iterable's documented shuffled order (src/train/shuffle-buffer.ts):
 *  a buffer of `size` rows, each row drawn uniformly from it and its place taken by the source's
 *  next row (or, once the source is exhausted, by the buffer's last), the draws one after another. */
function bufferOrder(seed: number, epochs: number, size: number): number[][] {
  const rng = new Rng(seed);
  return Array.from({ length: epochs }, () => {
    const held: number[] = [],
      out: number[] = [];
    let next = 0;
    while (held.length < size && next < N) held.push(next++);
    while (held.length > 0) {
      const j = rng.int(held.length);
      out.push(held[j]!);
      if (next < N) held[j] = next++;
      else {
        held[j] = held[held.length - 1]!;
        held.pop();
      }
    }
    return out;
  });
}

/** Resident training on those rows, in that order (shuffle off), epoch by epoch. */
async function residentInOrder(epochs: number[][]) {
  const r = trainer(N);
  try {
    for (const rows of epochs) {
      const x = new Float32Array(N * 6),
        labels = new Uint8Array(N);
      rows.forEach((s, i) => {
        x.set(x32.subarray(s * 6, s * 6 + 6), i * 6);
        labels[i] = data.labels[s]!;
      });
      await r.t.fit({ x, labels }, { epochs: 1, shuffle: false });
    }
    return r.weights();
  } finally {
    r.arena.dispose();
  }
}

async function streamed(source: unknown, options: { epochs: number; seed: number; shuffleBuffer?: number }) {
  const r = trainer(24);
  try {
    const res = await r.t.fit(source as Data, options);
    return { res, w: r.weights() };
  } finally {
    r.arena.dispose();
  }
}

describe('fit() from a stream: the pipeline', () => {
  it('shuffled, with windows filled ahead across epochs: the documented order, bit for bit (npy and iterable)', async () => {
    const npy = await streamed(streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') }), { epochs: 3, seed: 11 });
    expect(npy.res.steps).toBe(36);
    const r = trainer(N);
    try {
      await r.t.fit({ x: x32, labels: data.labels }, { epochs: 3, seed: 11 });
      expect(same(npy.w, r.weights())).toBe(true);
    } finally {
      r.arena.dispose();
    }
    // An iterable: through a shuffle buffer (the default: a window's 24 rows; and 40).
    const batches = () => Array.from({ length: 8 }, (_, i) => ({ x: x32.subarray(i * 72, (i + 1) * 72), labels: data.labels.subarray(i * 12, (i + 1) * 12) }));
    const it = await streamed(batches, { epochs: 3, seed: 11 });
    expect(same(it.w, await residentInOrder(bufferOrder(11, 3, 24)))).toBe(true);
    expect(same(it.w, npy.w)).toBe(false);
    const it40 = await streamed(batches, { epochs: 3, seed: 11, shuffleBuffer: 40 });
    expect(same(it40.w, await residentInOrder(bufferOrder(11, 3, 40)))).toBe(true);
  });

  it("runs queued behind the one training (no clipping) and runs that wait for their reads (clipping): both are resident training, with each window's stats and norms", async () => {
    const npy = () => streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') });
    for (const clipGradNorm of [0, 0.05]) {
      const resident = trainer(N, { clipGradNorm }),
        stream = trainer(24, { clipGradNorm });
      try {
        const rp: Progress[] = [],
          sp: Progress[] = [];
        const a = await resident.t.fit({ x: x32, labels: data.labels }, { epochs: 2, shuffle: false, onProgress: (p) => rp.push(p) });
        const b = await stream.t.fit(npy() as never, { epochs: 2, shuffle: false, onProgress: (p) => sp.push(p) });
        expect(same(stream.weights(), resident.weights()), `clip ${clipGradNorm}`).toBe(true);
        expect([b.loss, b.steps], `clip ${clipGradNorm}`).toEqual([a.loss, a.steps]);
        expect(sp.map((p) => p.step)).toEqual([3, 6, 9, 12, 15, 18, 21, 24]); // a report a window of 3 steps
        // Each report's loss is its epoch's so far; the last of each epoch is the resident one's.
        expect([sp[3]!.loss, sp[7]!.loss]).toEqual(rp.filter((p) => p.batch === p.batches).map((p) => p.loss));
        if (clipGradNorm > 0) {
          expect(sp.every((p) => p.gradNorms?.length === 3 && p.gradNorms.every((n) => n > 0))).toBe(true);
          expect(sp.flatMap((p) => p.gradNorms!)).toEqual(rp.flatMap((p) => p.gradNorms!));
        }
      } finally {
        resident.arena.dispose();
        stream.arena.dispose();
      }
    }
  });

  it("fp16: each queued window's run goes on from the loss scale the run before it left: resident training's scale, skips and weights", async () => {
    // Runs long enough (256-512-10) that the next window's run is queued while one trains; a scale
    // that overflows at first (steps skipped, backed off), then grows every 2 good steps: it moves
    // within windows and across them.
    const rows = 256,
      x = Float32Array.from({ length: rows * 256 }, (_, i) => Math.sin(i * 0.37)),
      labels = Int32Array.from({ length: rows }, (_, i) => (i * 7) % 10);
    const batches = Array.from({ length: 4 }, (_, i) => ({ x: x.subarray(i * 64 * 256, (i + 1) * 64 * 256), labels: labels.subarray(i * 64, (i + 1) * 64) }));
    const fit = async (samples: number, source: unknown, onProgress?: (p: Progress) => void) => {
      const arena = Arena.create(planLayout({ layers: [256, 512, 10], batch: 16, samples, optimizer: 'adam' }), { backend: 'cpu' });
      try {
        const t = new Trainer(arena, { lr: 0.01, precision: 'fp16', lossScale: { init: 2 ** 40, growthInterval: 2 } });
        t.init(5);
        await t.fit(source as Data, { epochs: 2, shuffle: false, onProgress });
        return { w: Float32Array.from(arena.view(1, 'w')), scale: [t.lossScale, t.skippedSteps] };
      } finally {
        arena.dispose();
      }
    };
    const sp: Progress[] = [];
    const want = await fit(rows, { x, labels }),
      got = await fit(64, batches, (p) => sp.push(p));
    expect(want.scale[1]).toBeGreaterThan(0);
    expect(got.scale).toEqual(want.scale);
    expect(got.w.every((v, i) => v === want.w[i])).toBe(true);
    expect(new Set(sp.map((p) => p.lossScale)).size).toBeGreaterThan(1); // each report: the scale after its window
  });

  it('a non-finite value found on upload is a BAD_DATA naming the element as the source knows it', async () => {
    const bad = (at: number, v: number, f64 = false) => {
      const x = f64 ? Float64Array.from(data.x) : Float32Array.from(x32);
      x[at] = v;
      return Array.from({ length: 8 }, (_, i) => ({ x: x.subarray(i * 72, (i + 1) * 72), labels: data.labels.subarray(i * 12, (i + 1) * 12) }));
    };
    const mse = toyData(6, 4, N, 8, true) as { x: Float64Array; y: Float64Array };
    const yBad = Float64Array.from(mse.y);
    yBad[4 * 30 + 2] = Infinity;
    const cases: Array<[unknown, string, number]> = [
      [bad(5 * 72 + 13, NaN), 'batch 5.x[13]', NaN],
      [bad(2 * 72 + 71, -Infinity), 'batch 2.x[71]', -Infinity],
      [bad(7 * 72, 1e39, true), 'batch 7.x[0]', Infinity], // float64 1e39 is Infinity in float32
      [
        [
          { x: mse.x.subarray(0, 20 * 6), y: mse.y.subarray(0, 80) },
          { x: mse.x.subarray(120), y: yBad.subarray(80) },
        ],
        'batch 1.y[42]',
        Infinity,
      ],
    ];
    // A batch split over two windows (48 rows, windows of 24): its second part, read in place.
    const split = Float32Array.from(x32);
    split[30 * 6 + 4] = NaN;
    cases.push([
      [
        { x: split.subarray(0, 48 * 6), labels: data.labels.subarray(0, 48) },
        { x: split.subarray(48 * 6), labels: data.labels.subarray(48) },
      ],
      'batch 0.x[184]',
      NaN,
    ]);
    for (const [source, field, value] of cases) {
      const r = trainer(24);
      try {
        let err: unknown;
        try {
          await r.t.fit(source as Data, { epochs: 1, shuffle: false });
        } catch (e) {
          err = e;
        }
        expect((err as { code?: string })?.code, field).toBe('BAD_DATA');
        expect((err as { field?: string }).field).toBe(field);
        expect((err as { value?: number }).value).toBe(value);
      } finally {
        r.arena.dispose();
      }
    }
  });

  it('a second streaming fit on the arena (its window buffers kept): two fits of one epoch are one fit of two; after dispose(), DISPOSED', async () => {
    const npy = () => streamNpy({ x: join(dir, 'x.npy'), labels: join(dir, 'labels.npy') });
    const once = await streamed(npy(), { epochs: 2, seed: 0, shuffle: false } as never);
    const r = trainer(24);
    try {
      await r.t.fit(npy() as never, { epochs: 1, shuffle: false });
      await r.t.fit(npy() as never, { epochs: 1, shuffle: false });
      expect(same(r.weights(), once.w)).toBe(true);
    } finally {
      r.arena.dispose();
    }
    await expect(r.t.fit(npy() as never, { epochs: 1 })).rejects.toMatchObject({ code: 'DISPOSED' });
  });
});
