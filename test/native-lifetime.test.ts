// The native layer under hostile use (issue 14, items 1-3 and 15): JS that runs while a call
// converts its arguments, headers changed by another thread, dispose and stats during a run,
// transfers refused while a run holds the arena, and workers terminated mid-run.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Arena, ArenaError, planLayout, Trainer } from '../src/index.js';
import { runArena } from '../src/internal.js';
import { MEMORY_KINDS, native, OPS } from '../src/native/addon.js';
import { HEADER_FIELDS } from '../src/layout/header.js';

const SMALL = planLayout({ layers: [3, 4, 2], batch: 2 });
const cpuOptions = { cuda: false, pinned: false, memory: MEMORY_KINDS.device, scheduled: true };
const newHandle = () => new (native().ArenaHandle)(SMALL.header, cpuOptions);
const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
};

/** A resident training run long enough to still be in flight when the test acts. */
function longRun() {
  const plan = planLayout({ layers: [64, 256, 256, 10], batch: 64, samples: 1024 });
  const arena = Arena.create(plan, { backend: 'cpu' });
  const t = new Trainer(arena);
  t.init(1);
  const x = new Float32Array(1024 * 64).map((_, i) => (i % 5) / 5);
  const labels = new Uint8Array(1024).map((_, i) => i % 10);
  arena.view(0, 'xdata').set(x);
  const y = arena.view(3, 'ydata');
  labels.forEach((c, i) => {
    y[i * 10 + c] = 1;
  });
  arena.toDevice();
  const settled = { done: false };
  const run = runArena(arena, { op: OPS.train, resident: true, samples: 1024, numBatches: 16, lr: 0.01 }).finally(() => {
    settled.done = true;
  });
  return { arena, run, settled };
}

describe('argument conversion never races the arena', () => {
  it('a getter that disposes the arena while a transfer converts its ranges gives DISPOSED, not a crash', () => {
    const h = newHandle();
    const ranges = [0, 8];
    Object.defineProperty(ranges, 1, {
      get: () => {
        h.dispose();
        return 8;
      },
    });
    expect(code(() => h.transfer('toHost', ranges))).toBe('DISPOSED');
    expect(h.stats().hostFrees).toBe(1);
  });

  it('a getter that disposes while run parameters convert: the run is refused, nothing runs', async () => {
    const h = newHandle();
    const params = {
      op: OPS.forward,
      rows: 1,
      get lr() {
        h.dispose();
        return 0.1;
      },
    };
    expect(code(() => h.run(params as never))).toBe('DISPOSED');
  });

  it('values are never coerced (no toString/valueOf runs): a wrong type is BAD_ARGUMENT', () => {
    const h = newHandle();
    let ran = false;
    const sneaky = {
      valueOf: () => {
        ran = true;
        h.dispose();
        return 0;
      },
      toString: () => {
        ran = true;
        return 'toHost';
      },
    };
    expect(code(() => h.transfer(sneaky as never, [0, 8]))).toBe('BAD_ARGUMENT');
    expect(code(() => h.transfer('toHost', [sneaky as never, 8]))).toBe('BAD_ARGUMENT');
    expect(ran).toBe(false);
    expect(h.dispose()).toBe(true);
  });
});

describe('a header changed by another thread while it is read', () => {
  it('is copied once: every arena made matches the header that was validated', async () => {
    const sab = new SharedArrayBuffer(SMALL.header.byteLength);
    const shared = new Uint8Array(sab);
    shared.set(SMALL.header);
    // The other thread flips total_bytes between the real size and one too small for the
    // regions (read after validation, it would size an allocation the regions overrun).
    const flipper = new Worker(
      `
      const { workerData } = require('node:worker_threads');
      const v = new DataView(workerData.sab);
      const at = workerData.at, real = BigInt(workerData.total), small = BigInt(workerData.small);
      for (let i = 0; i < 5e7; i++) v.setBigUint64(at, (i & 1) ? small : real, true);
    `,
      { eval: true, workerData: { sab, at: HEADER_FIELDS.total_bytes, total: SMALL.totalBytes, small: SMALL.headerBytes } },
    );
    let made = 0,
      refused = 0;
    try {
      for (let i = 0; i < 2000; i++) {
        let h;
        try {
          h = new (native().ArenaHandle)(shared, cpuOptions);
        } catch (e) {
          expect((e as { code?: string }).code).toBe('BAD_HEADER');
          refused++;
          continue;
        }
        made++;
        // The block is exactly the size its validated header gave: one transfer of all of it.
        expect(h.transferAll('toHost')).toBe(SMALL.totalBytes);
        h.dispose();
      }
    } finally {
      await flipper.terminate();
    }
    expect(made + refused).toBe(2000);
    expect(made).toBeGreaterThan(0);
  });
});

describe('a run in flight', () => {
  it('dispose() returns at once, and the memory goes when the run ends', async () => {
    const { arena, run, settled } = longRun();
    arena.dispose();
    expect(settled.done).toBe(false); // dispose did not wait for the run
    await run.catch(() => undefined);
    expect(arena.stats.hostFrees).toBe(1);
    expect(arena.stats.deviceFrees).toBe(1);
  });

  it('stats never wait; transfers and a second run are refused with BUSY instead of blocking', async () => {
    const { arena, run, settled } = longRun();
    try {
      expect(arena.stats.toDeviceTransfers).toBeGreaterThan(0);
      expect(settled.done).toBe(false);
      let err: unknown;
      try {
        arena.toHost();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ArenaError);
      expect((err as ArenaError).code).toBe('BUSY');
      await expect(runArena(arena, { op: OPS.eval, resident: true, samples: 64 })).rejects.toMatchObject({ code: 'BUSY' });
      expect(settled.done).toBe(false);
      await run;
      expect(arena.toHost().transfers).toBe(1); // idle again
    } finally {
      arena.dispose();
    }
  });
});

describe('worker threads', () => {
  it('100 workers terminated during a run: the process survives, every time', async () => {
    const url = new URL('./fixtures/terminate-worker.mjs', import.meta.url);
    for (let i = 0; i < 100; i++) {
      const w = new Worker(url);
      await new Promise<void>((resolve, reject) => {
        w.once('message', () => resolve());
        w.once('error', reject);
      });
      await new Promise((r) => setTimeout(r, i % 7));
      await w.terminate();
    }
    // Still alive, and the addon still works on this thread.
    const a = Arena.create(SMALL, { backend: 'cpu' });
    expect(a.toDevice().bytes).toBe(SMALL.totalBytes);
    a.dispose();
  });
});
