// stream.mjs: fit() from a stream against fit() on the same data resident (issue 31). The same
// network, batch, data and epochs; the resident plan holds the whole data set, the streaming
// plan a window of --window rows (src/train/stream.ts: the next window is read and checked
// while the current one trains, then uploaded between runs). Sources: an array of batches in
// memory ('iterable') and .npy files on disk ('npy', written to a temporary folder first).
// Reports time per step and stream / resident.
//   npx tsup && node bench/stream.mjs [--backend auto|cpu|cuda] [--nets S,M] [--rows 65536]
//     [--window 8192] [--epochs 3] [--out bench/results/stream-<device>.json]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Arena, cudaInfo, planLayout, streamNpy, toNpy, Trainer } from '../dist/index.js';
import { machineInfo } from '../dist/tools.js';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const NETS = { S: [[784, 128, 10], 100], M: [[784, 1024, 1024, 10], 256], L: [[4096, 4096, 4096, 4096], 2048] };
const backend = args.backend ?? 'auto';
const rows = Number(args.rows ?? 65536);
const window = Number(args.window ?? 8192);
const epochs = Number(args.epochs ?? 3);
const nets = (args.nets ?? 'S,M').split(',');
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-stream-bench-'));
const results = [];
try {
  for (const net of nets) {
    const [layers, batch] = NETS[net];
    const inputs = layers[0], outputs = layers.at(-1);
    const x = new Float32Array(rows * inputs);
    for (let i = 0; i < x.length; i++) x[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
    const labels = Int32Array.from({ length: rows }, (_, i) => (i * 7) % outputs);
    writeFileSync(join(dir, `x-${net}.npy`), toNpy(x, [rows, inputs]));
    writeFileSync(join(dir, `labels-${net}.npy`), toNpy(labels));
    const chunk = 4096;  // the iterable yields batches of this many rows
    const batches = Array.from({ length: Math.ceil(rows / chunk) }, (_, i) => ({ x: x.subarray(i * chunk * inputs, Math.min(rows, (i + 1) * chunk) * inputs), labels: labels.subarray(i * chunk, (i + 1) * chunk) }));
    const sources = {
      resident: [rows, { x, labels }],
      iterable: [window, batches],
      npy: [window, () => streamNpy({ x: join(dir, `x-${net}.npy`), labels: join(dir, `labels-${net}.npy`) })],
    };
    const row = { network: net, layers, batch, rows, window, epochs };
    for (const [name, [samples, source]] of Object.entries(sources)) {
      const arena = Arena.create(planLayout({ layers, batch, samples, optimizer: 'sgd' }), { backend });
      try {
        const t = new Trainer(arena, { lr: 0.01 });
        t.init(1);
        const data = () => (typeof source === 'function' ? source() : source);
        await t.fit(data(), { epochs: 1, seed: 1 });  // warm-up: first uploads, kernels, file cache
        const start = performance.now();
        const r = await t.fit(data(), { epochs, seed: 1 });
        const ms = performance.now() - start;
        row.backend = arena.backend;
        row[`${name}MicrosPerStep`] = (ms * 1000) / r.steps;
        row.path = r.path;
      } finally {
        arena.dispose();
      }
    }
    row.iterableVsResident = row.iterableMicrosPerStep / row.residentMicrosPerStep;
    row.npyVsResident = row.npyMicrosPerStep / row.residentMicrosPerStep;
    console.log(`${net} ${layers.join('-')} batch ${batch} (${row.backend}, ${row.path}): resident ${row.residentMicrosPerStep.toFixed(1)} us/step; iterable ${row.iterableMicrosPerStep.toFixed(1)} (${row.iterableVsResident.toFixed(2)}x); npy ${row.npyMicrosPerStep.toFixed(1)} (${row.npyVsResident.toFixed(2)}x)`);
    results.push(row);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const device = (cudaInfo().devices > 0 && backend !== 'cpu' ? cudaInfo().name : 'cpu').toLowerCase().replace(/[^a-z0-9]+/g, '-');
const out = args.out ?? join('bench', 'results', `stream-${device}.json`);
writeFileSync(out, `${JSON.stringify({ machine: machineInfo(), rows, window, epochs, results }, null, 2)}\n`);
console.log(`wrote ${out}`);
