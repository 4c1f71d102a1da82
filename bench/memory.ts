// memory.ts: arena bytes by kind against the planner's prediction, and the memory actually
// taken (device: cudaMemGetInfo before and after; CPU backend: resident set growth).
import { Arena, planLayout, type BackendName } from '../src/index.js';
import { cudaInfo } from '../src/native/addon.js';
import { NETWORKS } from './steps.js';
import { testAddon } from '../src/internal.js';

export interface MemoryRow {
  network: string;
  optimizer: string;
  backend: BackendName;
  plannedBytes: number;
  headerTotalBytes: number;
  byKind: Record<string, number>;
  deviceTakenBytes: number | null;
  hostRssGrowthBytes: number;
  exact: boolean;
}

export function benchMemory(backend: BackendName, names: string[], log: (s: string) => void): MemoryRow[] {
  const rows: MemoryRow[] = [];
  for (const net of NETWORKS.filter((n) => names.includes(n.name))) {
    for (const optimizer of ['sgd', 'adam'] as const) {
      const plan = planLayout({ layers: net.layers, batch: net.batch, optimizer, activations: [...net.activations] });
      const byKind = plan.bytesByKind();
      const sum = Object.values(byKind).reduce((a, v) => a + v, 0);
      const freeBefore = backend === 'cuda' ? cudaInfo().freeBytes : 0;
      const rssBefore = process.memoryUsage().rss;
      using arena = Arena.create(plan, { backend });
      const taken = backend === 'cuda' ? freeBefore - cudaInfo().freeBytes : null;
      const rss = process.memoryUsage().rss - rssBefore;
      const headerTotal = Number(testAddon().decodeHeader(arena.bytes(0, plan.headerBytes)).totalBytes);
      const row: MemoryRow = {
        network: net.name,
        optimizer,
        backend,
        plannedBytes: plan.totalBytes,
        headerTotalBytes: headerTotal,
        byKind: { ...byKind },
        deviceTakenBytes: taken,
        hostRssGrowthBytes: rss,
        exact: sum === plan.totalBytes && headerTotal === plan.totalBytes,
      };
      rows.push(row);
      log(
        `  ${net.name} ${optimizer.padEnd(4)}: planned ${plan.totalBytes} B, by kind sums to ${sum} B, header says ${headerTotal} B${taken !== null ? `, device took ${taken} B (+${(((taken - plan.totalBytes) / plan.totalBytes) * 100).toFixed(2)}%)` : ''}, host RSS +${rss} B`,
      );
    }
  }
  return rows;
}
