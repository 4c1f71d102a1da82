// gather.ts: how fast streamed windows are produced on the host, no training (issue 31): the
// rows/s and GB/s of window rows (x and one-hot y) written by a source's fill, for a .npy file
// (in the page cache) shuffled and in order, and an iterable of batches through the shuffle
// buffer. S and M share 784 inputs; L has 4096. Built by tsup into bench/dist/gather.js:
//   npx tsup && node bench/dist/gather.js [--widths 784,4096] [--rows 65536] [--window 16384]
//     [--epochs 5] [--sources npy,npy-ordered,iterable] [--out FILE.json]
// NN_ARENA_GATHER_THREADS=N and NN_ARENA_GATHER=mmap|pread (read at every window) are compared
// by running it again with them set.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { toNpy } from '../src/formats/npy.js';
import { Rng } from '../src/train/rng.js';
import { streamBatches, streamNpy, type DataStream } from '../src/train/stream.js';

const args = Object.fromEntries(process.argv.slice(2).reduce<string[][]>((a, v, i, all) => (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]!]] : a), []));
const widths = (args.widths ?? '784,4096').split(',').map(Number);
const rows = Number(args.rows ?? 65536),
  window = Number(args.window ?? 16384),
  epochs = Number(args.epochs ?? 5);
const sources = (args.sources ?? 'npy,npy-ordered,iterable').split(',');
const outputs = 10;
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-gather-bench-'));
const results: Array<Record<string, unknown>> = [];

/** Rows/s over the epochs (and of the best epoch: on a shared machine the least disturbed). */
async function measure(
  s: DataStream,
  width: number,
  shuffle: boolean,
): Promise<{ rowsPerSecond: number; gbPerSecond: number; msPerWindow: number; bestRowsPerSecond: number }> {
  const src = await s.open({ inputs: width, outputs, dtype: 'float32' });
  const into = { x: new Float32Array(window * width), y: new Float32Array(window * outputs) };
  const rng = new Rng(1);
  const epoch = async () => {
    let n = 0,
      windows = 0;
    const fill = src.epoch(shuffle ? rng : undefined, window, window);
    for (let f = await fill(window, into); f.rows > 0; f = await fill(window, into)) {
      n += f.rows;
      windows++;
    }
    return { n, windows };
  };
  try {
    await epoch(); // warm-up: page cache, first touches
    const t0 = performance.now();
    let n = 0,
      windows = 0,
      best = 0;
    for (let e = 0; e < epochs; e++) {
      const t = performance.now(),
        r = await epoch();
      n += r.n;
      windows += r.windows;
      best = Math.max(best, r.n / ((performance.now() - t) / 1000));
    }
    const s = (performance.now() - t0) / 1000;
    return { rowsPerSecond: n / s, gbPerSecond: (n * (width + outputs) * 4) / s / 1e9, msPerWindow: (s * 1000) / windows, bestRowsPerSecond: best };
  } finally {
    await src.close();
  }
}

try {
  for (const width of widths) {
    const x = new Float32Array(rows * width);
    for (let i = 0; i < x.length; i++) x[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
    const labels = Int32Array.from({ length: rows }, (_, i) => (i * 7) % outputs);
    const xf = join(dir, `x-${width}.npy`),
      lf = join(dir, `labels-${width}.npy`);
    writeFileSync(xf, toNpy(x, [rows, width]));
    writeFileSync(lf, toNpy(labels));
    readFileSync(xf); // into the page cache
    const chunk = 4096;
    const batches = Array.from({ length: Math.ceil(rows / chunk) }, (_, i) => ({
      x: x.subarray(i * chunk * width, Math.min(rows, (i + 1) * chunk) * width),
      labels: labels.subarray(i * chunk, (i + 1) * chunk),
    }));
    for (const name of sources) {
      const [s, shuffle] =
        name === 'npy'
          ? [streamNpy({ x: xf, labels: lf }), true]
          : name === 'npy-ordered'
            ? [streamNpy({ x: xf, labels: lf }), false]
            : name === 'iterable'
              ? [streamBatches(batches), true]
              : [streamBatches(batches), false];
      const r = await measure(s, width, shuffle);
      results.push({ width, source: name, rows, window, ...r });
      console.log(
        `width ${width} ${name.padEnd(16)} ${(r.rowsPerSecond / 1e6).toFixed(3)} M rows/s  ${r.gbPerSecond.toFixed(2)} GB/s  ${r.msPerWindow.toFixed(2)} ms/window of ${window}  (best epoch ${(r.bestRowsPerSecond / 1e6).toFixed(3)} M rows/s)`,
      );
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('NN_ARENA_GATHER') || k === 'UV_THREADPOOL_SIZE'));
if (args.out) writeFileSync(args.out, `${JSON.stringify({ cpus: cpus().length, cpu: cpus()[0]?.model, env, rows, window, epochs, results }, null, 2)}\n`);
