// fp16-checks.ts: what dynamic loss scaling (precision 'fp16') must do on any backend, held to
// one definition (test/fp16-cpu.test.ts: the CPU's emulation; test/gpu/fp16.gpu.test.ts: CUDA,
// where the scale lives on the device): the scale's moves step by step, an injected overflow
// skipped and recovered from, exact resume with the scaler's state.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { Trainer, type Arena } from '../../src/index.js';
import { withArena } from './half-checks.js';
import { toyData } from './train-checks.js';

/** A learnable 20-input, 4-class set: the class is the largest of the first 4 inputs. */
export function classes(n: number, seed: number) {
  const d = toyData(20, 4, n, seed, false) as { x: Float64Array; labels: Uint8Array };
  d.labels = Uint8Array.from({ length: n }, (_, i) => [0, 1, 2, 3].reduce((m, j) => (d.x[i * 20 + j]! > d.x[i * 20 + m]! ? j : m), 0));
  return { x: Float32Array.from(d.x), labels: d.labels };
}

/** A [20, 16, 4] arena's weights and biases, copied. */
export const weights = (a: Arena) => [1, 2].flatMap((l) => [Float32Array.from(a.view(l, 'w')), Float32Array.from(a.view(l, 'b'))]);
export const same = (a: Float32Array[], b: Float32Array[]) => a.every((v, i) => Buffer.compare(Buffer.from(v.buffer), Buffer.from(b[i]!.buffer)) === 0);

/** From 2^36 the errors' fp16 copies overflow (at 65504) until the scale falls to what they fit
 *  under; then it grows every 3 steps, overflows once, and backs off again: 40 single steps,
 *  each checked (a skipped step leaves the weights bit for bit, the scale halves). */
export function checkScaleMoves(backend: 'cpu' | 'cuda'): Promise<void> {
  return withArena(
    [20, 16, 4],
    20,
    ['tanh', 'softmax'],
    async (arena) => {
      const { x, labels } = classes(20, 3);
      const t = new Trainer(arena, { lr: 0.1, precision: 'fp16', lossScale: { init: 2 ** 36, growthInterval: 3 } });
      t.init(2);
      expect(t.lossScale).toBe(2 ** 36);
      let good = 0,
        grew = 0,
        skipped = 0;
      for (let s = 0; s < 40; s++) {
        const before = weights(arena),
          scale = t.lossScale!;
        await t.step(x, { labels });
        t.syncToHost();
        if (t.skippedSteps > skipped) {
          // overflowed: no update, the scale backs off
          expect(same(weights(arena), before)).toBe(true);
          expect(t.lossScale).toBe(scale / 2);
          expect(good).toBe(0); // overflow happens only above the scale that worked
          skipped = t.skippedSteps;
        } else {
          expect(same(weights(arena), before)).toBe(false);
          good++;
          if (good === 3) {
            expect(t.lossScale).toBe(scale * 2);
            good = 0;
            grew++;
          } else expect(t.lossScale).toBe(scale);
        }
      }
      expect(skipped).toBeGreaterThan(5);
      expect(grew).toBeGreaterThan(1);
      expect(t.steps).toBe(40); // a skipped step still counts (the schedule and Adam's t move on)
    },
    undefined,
    backend,
  );
}

/** 5 epochs, then one step of a single misclassified row (its error about -1, times 2^20: past
 *  fp16's 65504, where a batch of 20 rows kept its errors under it), then 10 more epochs. fp16:
 *  that step is skipped (weights bit for bit, the scale halved); fp32 takes it as any step. */
export function injectedOverflow(precision: 'fp32' | 'fp16', backend: 'cpu' | 'cuda') {
  const data = classes(200, 5);
  return withArena(
    [20, 16, 4],
    20,
    ['tanh', 'softmax'],
    async (arena) => {
      const t = new Trainer(arena, { lr: 0.1, precision, ...(precision === 'fp16' ? { lossScale: { init: 2 ** 20 } } : {}) });
      t.init(3);
      await t.fit(data, { epochs: 5, seed: 2 });
      expect(t.skippedSteps).toBe(0);
      const p = Array.from(await t.predict(data.x.subarray(0, 20)));
      const wrong = p.indexOf(Math.min(...p)); // the least likely class: its error is about -1
      const before = weights(arena),
        scale = t.lossScale;
      await t.step(data.x.subarray(0, 20), { labels: [wrong] });
      t.syncToHost();
      if (precision === 'fp16') {
        expect(t.skippedSteps).toBe(1);
        expect(same(weights(arena), before)).toBe(true);
        expect(t.lossScale).toBe(scale! / 2);
      }
      const r = await t.fit(data, { epochs: 10, seed: 3 });
      return { loss: r.loss, accuracy: r.accuracy, path: r.path };
    },
    200,
    backend,
  );
}

/** Save after 2 epochs with skips behind it, load on `backend`, 3 more epochs on both: the same
 *  bits, and the scale, its growth tracker and the skipped steps come back. */
export function checkResumeWithScaler(backend: 'cpu' | 'cuda'): Promise<void> {
  return withArena(
    [20, 16, 4],
    20,
    ['tanh', 'softmax'],
    async (arena) => {
      const data = classes(100, 7);
      const t = new Trainer(arena, { lr: 0.1, precision: 'fp16', lossScale: { init: 2 ** 30, growthInterval: 4 } });
      t.init(5);
      await t.fit(data, { epochs: 2, seed: 1 });
      const dir = mkdtempSync(join(tmpdir(), 'nn-arena-fp16-resume-'));
      try {
        const path = join(dir, 'fp16.ckpt');
        t.save(path);
        const state = { scale: t.lossScale, skipped: t.skippedSteps };
        expect(state.skipped).toBeGreaterThan(0);
        const loaded = Trainer.load(path, { backend });
        try {
          expect(loaded.precision).toBe('fp16');
          expect({ scale: loaded.lossScale, skipped: loaded.skippedSteps }).toEqual(state);
          await t.fit(data, { epochs: 3, seed: 2 });
          await loaded.fit(data, { epochs: 3, seed: 2 });
          t.syncToHost();
          loaded.syncToHost();
          expect(same(weights(loaded.arena), weights(arena))).toBe(true);
          expect({ scale: loaded.lossScale, skipped: loaded.skippedSteps }).toEqual({ scale: t.lossScale, skipped: t.skippedSteps });
        } finally {
          loaded.dispose();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    100,
    backend,
  );
}
