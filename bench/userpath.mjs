// userpath.mjs: what a user's program waits for. Each figure is the wall clock around the user's
// call (fit, step, predict, ...), measured from outside, beside the Trainer's own `seconds` where
// it reports one. Data: an MNIST-sized synthetic set (60,000 x 784 float32 by default, labels in
// [0, 10)), made once and held by the program as a user would hold it.
//   npx tsup && node bench/userpath.mjs [--backend cpu|cuda] [--nets S,M,P] [--samples N] [--json file]
// Nets: S 784-128-10 batch 100, M 784-1024-1024-10 batch 256, P 784-32-10 batch 100 (predict).
// PyTorch in the same run: bench/userpath_torch.py (the caller runs it; scripts/gpu-session.sh).
import { Arena, Dataset, planLayout, Trainer } from '../dist/index.js';
import { writeFileSync } from 'node:fs';
import { hostname, cpus } from 'node:os';
import { headCommit } from './git-commit.mjs';
import { option, xorshift } from './bench-args.mjs';

const opt = option;
const backend = opt('backend', 'auto');
const nets = opt('nets', 'S,P').split(',');
const samples = Number(opt('samples', '60000'));
const reps = Number(opt('reps', '5'));
const jsonOut = opt('json', undefined);

const NETS = {
  S: { layers: [784, 128, 10], batch: 100 },
  M: { layers: [784, 1024, 1024, 10], batch: 256 },
  P: { layers: [784, 32, 10], batch: 100 },
};

// A deterministic set (xorshift), values in [0, 1) as pixels are.
function makeSet(n, inputs, classes) {
  const x = new Float32Array(n * inputs),
    labels = new Uint8Array(n);
  const next = xorshift(0x9e3779b9);
  for (let i = 0; i < x.length; i++) x[i] = next();
  for (let i = 0; i < n; i++) labels[i] = Math.floor(next() * classes);
  return { x, labels };
}

const us = (ms) => ms * 1000;
const median = (a) => {
  const s = [...a].sort((p, q) => p - q);
  return s[Math.floor(s.length / 2)];
};
const range = (a) => ({ min: Math.min(...a), median: median(a), max: Math.max(...a) });

async function timeCall(f) {
  const t0 = performance.now();
  const r = await f();
  return { ms: performance.now() - t0, r };
}

const data = makeSet(samples, 784, 10);
const rows = [];
let backendUsed = '';
for (const net of nets) {
  const { layers, batch } = NETS[net];
  const plan = planLayout({ layers, batch, optimizer: 'sgd', samples });
  const arena = Arena.create(plan, { backend });
  backendUsed = arena.backend;
  const t = new Trainer(arena, { lr: 0.01 });
  t.init(1);
  const row = (call, wallMs, seconds, note) => {
    rows.push({ net, call, wallUs: wallMs.map(us), ...(seconds ? { secondsUs: seconds.map((s) => s * 1e6) } : {}), note });
  };
  if (net !== 'P') {
    // fit: the first call uploads the set; the later ones find it unchanged.
    const first = await timeCall(() => t.fit(data, { epochs: 1, seed: 1 }));
    row('fit 1 epoch, first call (includes the upload)', [first.ms], [first.r.seconds]);
    const w = [],
      s = [];
    for (let i = 0; i < reps; i++) {
      const { ms, r } = await timeCall(() => t.fit(data, { epochs: 1, seed: 1 }));
      w.push(ms);
      s.push(r.seconds);
    }
    row('fit 1 epoch, same data (a plain object: read and compared each call)', w, s);
    // A Dataset handle the arena holds is not read at all.
    const ds = new Dataset(data);
    await t.fit(ds, { epochs: 1, seed: 1 });
    const wd = [],
      sd = [];
    for (let i = 0; i < reps; i++) {
      const { ms, r } = await timeCall(() => t.fit(ds, { epochs: 1, seed: 1 }));
      wd.push(ms);
      sd.push(r.seconds);
    }
    row('fit 1 epoch, same Dataset', wd, sd);
    if (net === 'S') {
      const w10 = [],
        s10 = [];
      for (let i = 0; i < Math.max(1, Math.floor(reps / 2)); i++) {
        const { ms, r } = await timeCall(() => t.fit(ds, { epochs: 10, seed: 1 }));
        w10.push(ms);
        s10.push(r.seconds);
      }
      row('fit 10 epochs, same Dataset', w10, s10);
    }
    // step() in a loop, a new batch from host memory each call (consecutive rows of the set).
    const nb = Math.min(200, Math.floor(samples / batch));
    const xs = [],
      ls = [];
    for (let b = 0; b < nb; b++) {
      xs.push(data.x.subarray(b * batch * 784, (b + 1) * batch * 784));
      ls.push(data.labels.subarray(b * batch, (b + 1) * batch));
    }
    for (let b = 0; b < 20; b++) await t.step(xs[b % nb], { labels: ls[b % nb] });
    const sw = [];
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      for (let b = 0; b < nb; b++) await t.step(xs[b], { labels: ls[b] });
      sw.push((performance.now() - t0) / nb);
    }
    const fitStep = rows.find((q) => q.net === net && q.call === 'fit 1 epoch, same Dataset');
    row(
      `step() in a loop (${nb} calls, per call)`,
      sw,
      undefined,
      fitStep ? `fit's step: ${(median(fitStep.secondsUs) / Math.ceil(samples / batch)).toFixed(1)} us` : undefined,
    );
  }
  // 4,000 rows: past the per-run bound of CUDA's JS-thread runs (a fed run by INLINE_MACS.fed).
  for (const n of [1, 1000, 4000].filter((k) => k <= samples)) {
    const xq = data.x.subarray(0, n * 784);
    for (let i = 0; i < 20; i++) await t.predict(xq);
    const pw = [];
    for (let r = 0; r < reps; r++) {
      const k = n === 1 ? 500 : n <= 1000 ? 50 : 20;
      const t0 = performance.now();
      for (let i = 0; i < k; i++) await t.predict(xq);
      pw.push((performance.now() - t0) / k);
    }
    row(`predict() of ${n} row${n > 1 ? 's' : ''} (per call)`, pw);
  }
  arena.dispose();
}

for (const q of rows) {
  const w = range(q.wallUs),
    s = q.secondsUs ? range(q.secondsUs) : undefined;
  console.log(
    `${q.net} ${q.call}: wall ${w.median.toFixed(1)} us [${w.min.toFixed(1)}-${w.max.toFixed(1)}]${s ? `, seconds ${s.median.toFixed(1)} us (wall/seconds ${(w.median / s.median).toFixed(2)}x)` : ''}${q.note ? `; ${q.note}` : ''}`,
  );
}
if (jsonOut) {
  writeFileSync(
    jsonOut,
    JSON.stringify(
      {
        benchmark: 'userpath',
        date: new Date().toISOString(),
        commit: headCommit(),
        command: `node bench/userpath.mjs ${process.argv.slice(2).join(' ')}`,
        host: hostname(),
        cpu: cpus()[0]?.model,
        cores: cpus().length,
        node: process.version,
        backend: backendUsed,
        samples,
        rows,
      },
      null,
      2,
    ) + '\n',
  );
}
