// Views in loops that never yield (issue 27): a synchronous loop of create / view / dispose
// retained ~57 KiB a cycle on the old main (each view was a native external ArrayBuffer whose
// finalizer record only a turn of the event loop frees). Views now slice one buffer per arena.
import { describe, expect, it } from 'vitest';
import { Arena, planLayout } from '../src/index.js';

const MiB = 2 ** 20;
const asan = (process.env.LD_PRELOAD ?? '').includes('libasan');

describe('views in a synchronous loop', () => {
  it('6,000 cycles of create / a view of every region / dispose grow RSS by under 160 MiB (old main: 467 MiB)', async () => {
    const plan = planLayout({ layers: [32, 32, 32, 32, 32, 4], batch: 4, samples: 8, optimizer: 'adam' });
    expect(plan.regions.length).toBeGreaterThan(40);
    const cycle = () => {
      const a = Arena.create(plan, { backend: 'cpu' });
      for (const r of plan.regions) a.view(r.layer, r.kind)[0] = 1;
      a.bytes(0, 64);
      a.dispose();
    };
    for (let i = 0; i < 500; i++) cycle();
    (globalThis as { gc?: () => void }).gc?.();
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 6000; i++) cycle();
    // One turn of the event loop before measuring: records the arena keeps apart from its views
    // (freed by finalizers that run on the next turn) are not what this measures; the old
    // views stayed tens of kilobytes a cycle after it too.
    await new Promise((r) => setTimeout(r, 50));
    (globalThis as { gc?: () => void }).gc?.();
    const growth = process.memoryUsage().rss - before;
    console.log(`6,000 cycles, ${plan.regions.length} views each: RSS growth ${(growth / MiB).toFixed(1)} MiB`);
    // Measured on the 2-core dev machine: 46-51 MiB, flat over 48,000 cycles; old per-view
    // buffers 427-467 MiB; one buffer per arena but arenas from malloc (host_memory.cc) 86-390
    // MiB (freed arenas leave heap holes). The bound separates them; it is not a tight figure.
    if (!asan) expect(growth).toBeLessThan(160 * MiB);
  });

  it('views still slice the right bytes, share them, and detach on dispose', () => {
    const plan = planLayout({ layers: [5, 7, 3], batch: 2, dtype: 'float64' });
    const a = Arena.create(plan, { backend: 'cpu' });
    const w = a.view(1, 'w'),
      b = a.view(1, 'b');
    expect(w.byteOffset).toBe(plan.region(1, 'w')!.offset);
    expect(w.length).toBe(35);
    w.fill(2.5);
    b[0] = -1;
    const raw = a.bytes(plan.region(1, 'w')!.offset, 8);
    expect(new Float64Array(raw.slice().buffer)[0]).toBe(2.5);
    expect(a.view(1, 'b')).toBe(b);
    a.dispose();
    expect(w.length).toBe(0);
    expect(raw.length).toBe(0);
  });
});
