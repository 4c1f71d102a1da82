// transfers.ts: the whole arena in ONE transfer against (b) the same regions as separate
// buffers moved one by one, (c) the arena from pageable host memory, and (d) the raw copy of
// the same bytes, all measured through benny from JS in the same run.
import b from 'benny';
import { Arena, planLayout, type BackendName, type Plan } from '../src/index.js';
import { testAddon } from '../src/internal.js';

export interface TransferRow {
  arena: string;
  totalBytes: number;
  direction: 'toDevice' | 'toHost';
  method: string;
  transfers: number;
  bytes: number;
  micros: number;
  gbps: number;
  ratioToRaw: number | null;
  baseline: string | null;
}

const MiB = 2 ** 20;

/** The S network (Adam), then arenas of the given sizes: S plus a resident data set. */
export function transferPlans(sizesMiB: number[]): Array<[string, Plan]> {
  const S = { layers: [784, 128, 10], batch: 100, dtype: 'float32' as const, optimizer: 'adam' as const };
  const s = planLayout(S);
  const perSample = (784 + 10) * 4;
  return [
    ['S 784-128-10 adam', s],
    ...sizesMiB.map((m): [string, Plan] => [`${m} MiB`, planLayout({ ...S, samples: Math.max(1, Math.floor((m * MiB - s.totalBytes) / perSample)) })]),
  ];
}

async function measure(name: string, fn: () => unknown, quick: boolean): Promise<number> {
  let mean = NaN;
  await b.suite(
    name,
    b.add(name, fn),
    b.configure({ cases: { minSamples: quick ? 5 : 20, maxTime: quick ? 0.25 : 1.5, minTime: 0.05 } }),
    b.complete((summary) => {
      mean = summary.results[0]!.details.mean;
    }),
  );
  return mean * 1e6;
}

export async function benchTransfers(backend: BackendName, sizesMiB: number[], quick: boolean, log: (s: string) => void): Promise<TransferRow[]> {
  const rows: TransferRow[] = [];
  const cuda = backend === 'cuda';
  for (const [label, plan] of transferPlans(sizesMiB)) {
    const regionSizes = [plan.headerBytes, ...plan.regions.map((r) => r.bytes)];
    for (const direction of ['toDevice', 'toHost'] as const) {
      const cases: Array<{ method: string; baseline: string | null; make: () => { run: () => number; dispose: () => void } }> = [
        { method: 'raw copy, pinned', baseline: null, make: () => copyBench(cuda, [plan.totalBytes], true, direction) },
        { method: 'arena, 1 transfer, pinned', baseline: 'raw copy, pinned', make: () => arenaCase(plan, backend, true, direction) },
        { method: `fragmented, ${regionSizes.length} buffers`, baseline: 'raw copy, pinned', make: () => copyBench(cuda, regionSizes, true, direction) },
      ];
      if (cuda) {
        cases.push(
          { method: 'raw copy, pageable', baseline: null, make: () => copyBench(cuda, [plan.totalBytes], false, direction) },
          { method: 'arena, 1 transfer, pageable', baseline: 'raw copy, pageable', make: () => arenaCase(plan, backend, false, direction) },
        );
      }
      const micros = new Map<string, number>();
      for (const c of cases) {
        const h = c.make();
        try {
          const transfers = h.run();
          const us = await measure(`${label} ${direction} ${c.method}`, h.run, quick);
          micros.set(c.method, us);
          const raw = c.baseline ? micros.get(c.baseline)! : null;
          const row: TransferRow = {
            arena: label,
            totalBytes: plan.totalBytes,
            direction,
            method: c.method,
            transfers,
            bytes: plan.totalBytes,
            micros: us,
            gbps: plan.totalBytes / us / 1e3,
            ratioToRaw: raw ? raw / us : null,
            baseline: c.baseline,
          };
          rows.push(row);
          log(
            `  ${label.padEnd(18)} ${direction.padEnd(8)} ${c.method.padEnd(28)} ${String(transfers).padStart(3)} x  ${us.toFixed(1).padStart(10)} us  ${row.gbps.toFixed(2).padStart(7)} GB/s${row.ratioToRaw ? `  ${(row.ratioToRaw * 100).toFixed(1)}% of raw (+${(us - raw!).toFixed(2)} us)` : ''}`,
          );
        } finally {
          h.dispose();
        }
      }
    }
  }
  return rows;
}

function copyBench(cuda: boolean, sizes: number[], pinned: boolean, dir: 'toDevice' | 'toHost') {
  const cb = new (testAddon().CopyBench)(cuda, sizes, pinned);
  return { run: () => cb.run(dir), dispose: () => cb.dispose() };
}

function arenaCase(plan: Plan, backend: BackendName, pinned: boolean, dir: 'toDevice' | 'toHost') {
  const a = Arena.create(plan, { backend, pinned });
  return { run: () => (dir === 'toDevice' ? a.toDevice() : a.toHost()).transfers, dispose: () => a.dispose() };
}
