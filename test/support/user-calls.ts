// user-calls.ts: what the per-call paths move and compute (issue 47: a step or a forward pass of a
// caller's batch uploads its rows, runs and reads its results back in one native call): each
// call's transfers as the arena's counters and its observers see them, and its results against a
// twin arena on the CPU backend that took the same calls. Run on the CPU (test/userpath.test.ts)
// and on CUDA (test/gpu/userpath.gpu.test.ts).
import { expect } from 'vitest';
import { Arena, planLayout, Trainer } from '../../src/index.js';
import { observeTransfers, type TransferEvent } from '../../src/arena/transfer-events.js';
import { toyData } from './train-checks.js';

type Backend = 'cpu' | 'cuda';

function make(backend: Backend) {
  const arena = Arena.create(planLayout({ layers: [6, 16, 3], batch: 10, samples: 20, optimizer: 'momentum' }), { backend });
  const t = new Trainer(arena, { lr: 0.05 });
  t.init(3);
  return { arena, t };
}

/** Calls step(), predict(), evaluate() and forward() on `backend` and on a CPU twin: the counters
 *  and the observers agree on every call's transfers, and the results match the twin's within
 *  `tol` (0 on the CPU: bit for bit). */
export async function checkUserCalls(backend: Backend, tol: number): Promise<void> {
  const a = make(backend),
    twin = make('cpu');
  try {
    const seen: TransferEvent[] = [];
    const stop = observeTransfers(a.arena, (e) => seen.push(e));
    const delta = async <R>(f: () => Promise<R>): Promise<{ r: R; counts: number[]; events: number[] }> => {
      const s0 = a.arena.stats;
      seen.length = 0;
      const r = await f();
      const s1 = a.arena.stats;
      const sum = (dir: TransferEvent['dir'], k: 'transfers' | 'bytes') => seen.filter((e) => e.dir === dir).reduce((n, e) => n + e[k], 0);
      return {
        r,
        counts: [
          s1.toDeviceTransfers - s0.toDeviceTransfers,
          s1.toDeviceBytes - s0.toDeviceBytes,
          s1.toHostTransfers - s0.toHostTransfers,
          s1.toHostBytes - s0.toHostBytes,
        ],
        events: [sum('toDevice', 'transfers'), sum('toDevice', 'bytes'), sum('toHost', 'transfers'), sum('toHost', 'bytes')],
      };
    };
    const near = (got: ArrayLike<number>, want: ArrayLike<number>) => {
      expect(got.length).toBe(want.length);
      for (let i = 0; i < want.length; i++) expect(Math.abs(got[i]! - want[i]!)).toBeLessThanOrEqual(tol * Math.max(1, Math.abs(want[i]!)));
    };
    const statsBytes = a.arena.plan.region(2, 'stats')!.bytes;
    const d = toyData(6, 3, 30, 7, false);
    const x = Float32Array.from(d.x),
      labels = Uint8Array.from(d.labels!);
    // step(): its 7 rows of x and of y up, the stats back; three steps on different rows.
    for (const first of [0, 7, 14]) {
      const xs = x.subarray(first * 6, (first + 7) * 6),
        ls = labels.subarray(first, first + 7);
      const s = await delta(() => a.t.step(xs, { labels: ls }));
      expect(s.counts).toEqual([2, 7 * 6 * 4 + 7 * 3 * 4, 1, statsBytes]);
      expect(s.events).toEqual(s.counts);
      const m = await twin.t.step(xs, { labels: ls });
      near([s.r.loss, s.r.accuracy], [m.loss, m.accuracy]);
    }
    a.t.syncToHost();
    twin.t.syncToHost();
    near(a.arena.view(1, 'w'), twin.arena.view(1, 'w'));
    // predict() of 25 rows: three batches, each its rows up and its outputs back.
    const p = await delta(() => a.t.predict(x.subarray(0, 25 * 6)));
    expect(p.counts).toEqual([3, 25 * 6 * 4, 3, 25 * 3 * 4]);
    expect(p.events).toEqual(p.counts);
    near(p.r, await twin.t.predict(x.subarray(0, 25 * 6)));
    // The arena's host rows of z[0] and z[L] end as one forward run of the last batch leaves them.
    expect(Array.from(a.arena.view(0, 'z').subarray(0, 5 * 6))).toEqual(Array.from(x.subarray(20 * 6, 25 * 6)));
    expect(Array.from(a.arena.view(2, 'z').subarray(0, 5 * 3))).toEqual(Array.from(p.r.subarray(20 * 3, 25 * 3)));
    // An even number of batches (four) as well as an odd one.
    const x4 = new Float32Array(40 * 6);
    x4.set(x);
    x4.set(x.subarray(0, 10 * 6), 30 * 6);
    near(await a.t.predict(x4), await twin.t.predict(x4));
    // A second predict of other rows gives their outputs, not the last batch's again.
    near(await a.t.predict(x.subarray(25 * 6, 30 * 6)), await twin.t.predict(x.subarray(25 * 6, 30 * 6)));
    // A non-finite element in the third batch: a DataError naming it (its index in x), as on every path.
    const bad = x.slice(0, 25 * 6);
    bad[21 * 6 + 2] = NaN;
    await expect(a.t.predict(bad)).rejects.toMatchObject({ code: 'BAD_DATA', field: `predict.x[${21 * 6 + 2}]` });
    // Bytes (Uint8Array) are read as numbers, as a typed array store reads them.
    const bytes = Uint8Array.from({ length: 12 * 6 }, (_, i) => i % 3);
    near(await a.t.predict(bytes), await twin.t.predict(Float32Array.from(bytes)));
    // evaluate() of 30 rows, more than the 20 the data regions hold: batch by batch, the stats
    // back once, with the last.
    const e = await delta(() => a.t.evaluate({ x, labels }));
    expect(e.counts).toEqual([6, 30 * 6 * 4 + 30 * 3 * 4, 1, statsBytes]);
    expect(e.events).toEqual(e.counts);
    const em = await twin.t.evaluate({ x, labels });
    near([e.r.loss, e.r.accuracy], [em.loss, em.accuracy]);
    // forward(): rows up, outputs back.
    const f = await delta(() => a.t.forward(x.subarray(0, 4 * 6)));
    expect(f.counts).toEqual([1, 4 * 6 * 4, 1, 4 * 3 * 4]);
    expect(f.events).toEqual(f.counts);
    near(f.r, await twin.t.forward(x.subarray(0, 4 * 6)));
    stop();
  } finally {
    a.arena.dispose();
    twin.arena.dispose();
  }
}
