// stream.mjs: fit() from a stream against fit() on the same data resident (issue 31). The same
// network, batch, data and epochs; the resident plan holds the whole data set, the streaming
// plan a window of --window rows (src/train/stream-fit.ts: windows are filled, checked and
// uploaded while the previous one trains). Sources: an array of batches in memory ('iterable',
// shuffled through fit's shuffle buffer; 'iterableInOrder', shuffle: false) and .npy files on
// disk ('npy', written to a temporary folder first).
// Resident time per step is fit()'s own (result.seconds: the steps over data already on the
// device); a fit() call's wall time also holds its snapshot, comparison and checksum of the
// whole data set (several passes over 205 MB for S at 65536 rows: hundreds of us per step of a
// 3-epoch fit), reported apart as residentWallMicrosPerStep. Streamed time per step is the
// whole fit() call's wall time (opening the source and the first window, which nothing
// overlaps, included: firstReportMs is when its run ended, the time to a first progress report);
// 'steady' leaves out the first window (from its progress report to the
// last one), as the resident figure leaves out the data set's upload. Ratios: streamed /
// resident steps.
//   npx tsup && node bench/stream.mjs [--backend auto|cpu|cuda] [--nets S,M] [--rows 65536]
//     [--window 8192] [--epochs 3] [--sources iterable,iterableInOrder,npy]
//     [--trainer '{"optimizer":"adamw","clipGradNorm":1}'] (the plan's optimizer, the rest Trainer options)
//     [--out bench/results/stream-<device>.json]
// Windows are produced on nn-arena's gather threads (NN_ARENA_GATHER_THREADS, NN_ARENA_GATHER:
// recorded in the results with UV_THREADPOOL_SIZE).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Arena, cudaInfo, planLayout, Trainer } from '../dist/index.js';
import { streamNpy, toNpy } from '../dist/io.js';
import { machineInfo } from '../dist/tools.js';
import { headCommit } from './git-commit.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const NETS = { S: [[784, 128, 10], 100], M: [[784, 1024, 1024, 10], 256], L: [[4096, 4096, 4096, 4096], 2048] };
const backend = args.backend ?? 'auto';
const rows = Number(args.rows ?? 65536);
const window = Number(args.window ?? 8192);
const epochs = Number(args.epochs ?? 3);
const nets = (args.nets ?? 'S,M').split(',');
const streamed = (args.sources ?? 'iterable,iterableInOrder,npy').split(',');
const { optimizer = 'sgd', ...trainerOptions } = JSON.parse(args.trainer ?? '{}');
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-stream-bench-'));
const results = [];
try {
  for (const net of nets) {
    const [layers, batch] = NETS[net];
    const inputs = layers[0],
      outputs = layers.at(-1);
    const x = new Float32Array(rows * inputs);
    for (let i = 0; i < x.length; i++) x[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
    const labels = Int32Array.from({ length: rows }, (_, i) => (i * 7) % outputs);
    writeFileSync(join(dir, `x-${net}.npy`), toNpy(x, [rows, inputs]));
    writeFileSync(join(dir, `labels-${net}.npy`), toNpy(labels));
    const chunk = 4096; // the iterable yields batches of this many rows
    const batches = Array.from({ length: Math.ceil(rows / chunk) }, (_, i) => ({
      x: x.subarray(i * chunk * inputs, Math.min(rows, (i + 1) * chunk) * inputs),
      labels: labels.subarray(i * chunk, (i + 1) * chunk),
    }));
    const sources = {
      resident: [rows, { x, labels }],
      iterable: [window, batches],
      // In source order (fit's shuffle: false): no shuffle buffer, so one copy of each row on
      // the host instead of two (in, then out in draw order); what the streaming costs alone.
      iterableInOrder: [window, batches, { shuffle: false }],
      npy: [window, () => streamNpy({ x: join(dir, `x-${net}.npy`), labels: join(dir, `labels-${net}.npy`) })],
    };
    const row = { network: net, layers, batch, rows, window, epochs, optimizer, trainerOptions };
    for (const [name, [samples, source, order = {}]] of Object.entries(sources).filter(([n]) => n === 'resident' || streamed.includes(n))) {
      const arena = Arena.create(planLayout({ layers, batch, samples, optimizer }), { backend });
      try {
        const t = new Trainer(arena, { lr: 0.01, ...trainerOptions });
        t.init(1);
        const data = () => (typeof source === 'function' ? source() : source);
        await t.fit(data(), { epochs: 1, seed: 1, ...order }); // warm-up: first uploads, kernels, file cache
        // Steady streaming: from the end of the first window's run to the end of the last, per
        // step (what the first window's fill and upload, which nothing overlaps, leave out).
        const reports = [];
        const onProgress = (p) => reports.push([performance.now(), p.step]);
        const start = performance.now();
        const r = await t.fit(data(), { epochs, seed: 1, onProgress, ...order });
        const ms = performance.now() - start;
        row.backend = arena.backend;
        if (name === 'resident') {
          row.residentMicrosPerStep = (r.seconds * 1e6) / r.steps;
          row.residentWallMicrosPerStep = (ms * 1000) / r.steps;
        } else {
          row[`${name}MicrosPerStep`] = (ms * 1000) / r.steps;
          const [[t1, s1], [tn, sn]] = [reports[0], reports.at(-1)];
          row[`${name}FirstReportMs`] = t1 - start; // the first window's fill, upload and run
          row[`${name}SteadyMicrosPerStep`] = ((tn - t1) * 1000) / (sn - s1);
        }
        row.steps = r.steps;
        row.path = r.path;
      } finally {
        arena.dispose();
      }
    }
    const f = (name) => {
      row[`${name}VsResident`] = row[`${name}MicrosPerStep`] / row.residentMicrosPerStep;
      row[`${name}SteadyVsResident`] = row[`${name}SteadyMicrosPerStep`] / row.residentMicrosPerStep;
      return `${name} ${row[`${name}MicrosPerStep`].toFixed(1)} (${row[`${name}VsResident`].toFixed(2)}x; steady ${row[`${name}SteadyMicrosPerStep`].toFixed(1)}, ${row[`${name}SteadyVsResident`].toFixed(2)}x; first report after ${row[`${name}FirstReportMs`].toFixed(1)} ms)`;
    };
    console.log(
      `${net} ${layers.join('-')} batch ${batch} (${row.backend}, ${row.path}, ${row.steps} steps): resident ${row.residentMicrosPerStep.toFixed(1)} us/step (fit() wall ${row.residentWallMicrosPerStep.toFixed(1)}); ${streamed.map(f).join('; ')}`,
    );
    results.push(row);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const device = (cudaInfo().devices > 0 && backend !== 'cpu' ? cudaInfo().name : 'cpu').toLowerCase().replace(/[^a-z0-9]+/g, '-');
const out = args.out ?? join('bench', 'results', `stream-${device}.json`);
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('NN_ARENA_GATHER') || k === 'UV_THREADPOOL_SIZE'));
const run = {
  benchmark: 'stream',
  machine: machineInfo(),
  date: new Date().toISOString(),
  commit: headCommit(),
  command: `node bench/stream.mjs ${process.argv.slice(2).join(' ')}`.trim(),
};
writeFileSync(out, `${JSON.stringify({ ...run, env, rows, window, epochs, results }, null, 2)}\n`);
console.log(`wrote ${out}`);
