// data-parallel.mjs: one GPU against N GPUs (DataParallel over NCCL) for the S, M and L
// networks, with the same per-GPU batch (so the group's global batch is N times the one-GPU
// batch), in each precision asked for: per-step time by the wall clock of the fit() call and by
// the Trainer's `seconds`, throughput ratio, the all-reduce's share of a group step, and where
// data parallelism stops paying. Any device count. Uses the built package (dist/). The data set
// is a Dataset (read and uploaded by the warm-up fit, not again).
//   UV_THREADPOOL_SIZE=16 node bench/data-parallel.mjs [--devices N] [--nets S,M,L] [--precisions fp32,tf32,bf16] [--gradients full,bf16] [--steps K] [--ddp ONE,GROUP] [--floor FILE] [--out DIR]
// --gradients: the group's wire (DataParallelOptions.gradients), a row each.
// PyTorch DDP on the same nets, in the same call: bench/data_parallel_ddp.py (scripts/gpu-session.sh nccl).
// Writes DIR/data-parallel-<gpu>-x<N>.json (the default DIR is bench/results, whose README renders
// it: `npm run bench -- --render`) and prints the table.
//
// The all-reduce's share: a group step against the same replicas stepping on their own (one
// process, N threads, no reduction, the per-layer path as in the group): share =
// (group step - own step) / group step. "own" also differs by the SGD fold the group cannot
// use (about 2% of an L step), so the share is an upper bound.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Arena, cudaInfo, DataParallel, Dataset, ncclInfo, planLayout, Trainer } from '../dist/index.js';
import { machineInfo } from '../dist/tools.js';
import { headCommit } from './git-commit.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const NETS = { S: [[784, 128, 10], 100], M: [[784, 1024, 1024, 10], 256], L: [[4096, 4096, 4096, 4096], 2048] };
const TARGETS = { S: null, M: 1.5, L: 1.85 }; // issue 20, for 2 GPUs
const info = cudaInfo();
const devices = Number(args.devices ?? info.devices);
const nets = (args.nets ?? 'S,M,L').split(',');
const precisions = (args.precisions ?? 'fp32').split(',');
const wires = (args.gradients ?? 'full').split(',');
// --ddp ONE,GROUP: bench/data_parallel_ddp.py's JSON for one GPU and for the group, run just before
// in the same call: its steps go into the rows beside nn-arena's.
const ddp = args.ddp ? args.ddp.split(',').map((f) => JSON.parse(readFileSync(f, 'utf8'))) : [];
const ddpStep = (file, net, precision) => file?.rows.find((r) => r.net === net && r.precision === precision)?.usPerStep;
// --floor FILE: bench/allreduce_floor.py's JSON (one all-reduce of each net's gradients, run just
// before in the same call): each row's floor, one GPU's step plus that all-reduce unhidden.
const floor = args.floor ? JSON.parse(readFileSync(args.floor, 'utf8')) : null;
const allReduceUs = (net, gradients) => floor?.rows.find((r) => r.net === net && r.wire === (gradients === 'bf16' ? 'bfloat16' : 'float32'))?.pipelinedUs;
const outDir = args.out ?? 'bench/results';

// Child mode: the one-GPU baseline on the per-layer path (NN_ARENA_STEP_PATH is read once per
// process, so it runs apart).
if (args.child) {
  const r = await oneGpu(args.child, Number(args.steps), args.precision);
  console.log(JSON.stringify(r));
  process.exit(0);
}

function problem(net, replicas, steps) {
  const [layers, batch] = NETS[net];
  const perEpoch = Math.min(steps, net === 'L' ? 10 : 100);
  const samples = batch * replicas * perEpoch;
  const x = new Float32Array(samples * layers[0]);
  for (let i = 0; i < x.length; i++) x[i] = (i % 251) / 251;
  const labels = Uint8Array.from({ length: samples }, (_, i) => i % layers[layers.length - 1]);
  return { layers, batch, samples, perEpoch, data: new Dataset({ x, labels }), epochs: Math.max(1, Math.ceil(steps / perEpoch)) };
}

// usPerStep: the Trainer's `seconds` a step; wallUsPerStep: the wall clock of the fit() call a step.
async function timed(trainer, p) {
  await trainer.fit(p.data, { epochs: 1, shuffle: false }); // warm-up (cuBLAS, NCCL connections, the upload)
  const t0 = performance.now();
  const r = await trainer.fit(p.data, { epochs: p.epochs, shuffle: false });
  const wall = performance.now() - t0;
  return { usPerStep: (r.seconds * 1e6) / r.steps, wallUsPerStep: (wall * 1e3) / r.steps, steps: r.steps, path: r.path, loss: r.loss };
}

async function oneGpu(net, steps, precision) {
  const p = problem(net, 1, steps);
  const arena = Arena.create(planLayout({ layers: p.layers, batch: p.batch, samples: p.samples }), { backend: 'cuda' });
  const t = new Trainer(arena, { lr: 1e-3, precision });
  t.init(1);
  const r = await timed(t, p);
  arena.dispose();
  return { ...r, samplesPerSecond: (p.batch * 1e6) / r.usPerStep, wallSamplesPerSecond: (p.batch * 1e6) / r.wallUsPerStep };
}

// The replicas stepping on their own: N arenas, one per device, fits at once (no reduction).
async function ownSteps(net, steps, precision) {
  const p = problem(net, 1, steps);
  const arenas = Array.from({ length: devices }, (_, d) =>
    Arena.create(planLayout({ layers: p.layers, batch: p.batch, samples: p.samples }), { backend: 'cuda', device: d }),
  );
  const ts = arenas.map((a) => {
    const t = new Trainer(a, { lr: 1e-3, precision });
    t.init(1);
    return t;
  });
  const rs = await Promise.all(ts.map((t) => timed(t, p)));
  for (const a of arenas) a.dispose();
  return { usPerStep: Math.max(...rs.map((r) => r.usPerStep)), path: rs[0].path };
}

async function group(net, steps, precision, gradients) {
  const p = problem(net, devices, steps);
  const g = DataParallel.create(planLayout({ layers: p.layers, batch: p.batch, samples: p.samples, order: args.order ?? 'layer-major' }), {
    devices: Array.from({ length: devices }, (_, i) => i),
    gradients,
  });
  const t = new Trainer(g, { lr: 1e-3, precision });
  t.init(1);
  const r = await timed(t, p);
  // Replicas bit-identical: every w and b, from every device.
  const bytesOf = (a) => {
    a.toHost({ kinds: ['w', 'b'] });
    const parts = [];
    for (let l = 1; l < p.layers.length; l++)
      for (const k of ['w', 'b']) parts.push(Buffer.from(a.bytes(a.plan.region(l, k).offset, a.plan.region(l, k).bytes)));
    return Buffer.concat(parts);
  };
  const first = bytesOf(g.replicas[0]);
  const identical = g.replicas.slice(1).every((a) => Buffer.compare(first, bytesOf(a)) === 0);
  const gradBytes = p.layers.slice(1).reduce((a, n, i) => a + n * (p.layers[i] + 1), 0) * 4;
  g.dispose();
  return {
    ...r,
    samplesPerSecond: (p.batch * devices * 1e6) / r.usPerStep,
    wallSamplesPerSecond: (p.batch * devices * 1e6) / r.wallUsPerStep,
    replicasIdentical: identical,
    gradientBytes: gradBytes,
  };
}

if (devices < 2) {
  console.log(`data-parallel bench: needs 2+ GPUs (${info.devices} found)`);
  process.exit(0);
}
const n = ncclInfo();
if (!n.available) {
  console.log(`data-parallel bench: NCCL not available: ${n.why}`);
  process.exit(0);
}
const rows = [];
for (const net of nets) for (const precision of precisions) await measure(net, precision);

async function measure(net, precision) {
  const steps = Number(args.steps ?? (net === 'L' ? 50 : 500));
  const one = await oneGpu(net, steps, precision);
  const child = spawnSync(process.execPath, [new URL(import.meta.url).pathname, '--child', net, '--steps', String(steps), '--precision', precision], {
    env: { ...process.env, NN_ARENA_STEP_PATH: 'layers' },
    encoding: 'utf8',
  });
  const oneLayers = JSON.parse(child.stdout.trim().split('\n').pop());
  const own = await ownSteps(net, steps, precision);
  for (const gradients of wires) report(net, precision, one, oneLayers, own, gradients, await group(net, steps, precision, gradients));
}

function report(net, precision, one, oneLayers, own, gradients, g) {
  const speedup = g.samplesPerSecond / one.samplesPerSecond;
  const speedupWall = g.wallSamplesPerSecond / one.wallSamplesPerSecond;
  const share = Math.max(0, (g.usPerStep - own.usPerStep) / g.usPerStep);
  const row = {
    net,
    precision,
    gradients,
    layers: NETS[net][0],
    perGpuBatch: NETS[net][1],
    globalBatch: NETS[net][1] * devices,
    devices,
    oneGpu: one,
    oneGpuLayers: oneLayers,
    ownSteps: own,
    group: g,
    speedup,
    speedupWall,
    allReduceShare: share,
    target: TARGETS[net] && devices === 2 ? TARGETS[net] : null,
  };
  if (ddp.length === 2) {
    const [oneUs, groupUs] = ddp.map((f) => ddpStep(f, net, precision));
    // DDP's throughput over its own one GPU (its group's global batch a step against one GPU's
    // batch), by the wall clock, as nn-arena's speedupWall.
    if (oneUs && groupUs)
      row.ddp = { torch: ddp[1].torch, oneGpuUsPerStep: oneUs, groupUsPerStep: groupUs, speedup: (ddp[1].devices * oneUs) / (ddp[0].devices * groupUs) };
  }
  const reduceUs = allReduceUs(net, gradients);
  if (reduceUs) row.floor = { allReduceUs: reduceUs, stepUs: one.wallUsPerStep + reduceUs };
  rows.push(row);
  console.log(
    `${net} ${precision} x${devices}${gradients === 'full' ? '' : `, ${gradients} gradients`}: wall clock one GPU ${one.wallUsPerStep.toFixed(1)} us/step, group ${g.wallUsPerStep.toFixed(1)} (throughput ${speedupWall.toFixed(2)}x)` +
      (row.ddp
        ? `, PyTorch DDP one GPU ${row.ddp.oneGpuUsPerStep.toFixed(1)}, group ${row.ddp.groupUsPerStep.toFixed(1)} (${row.ddp.speedup.toFixed(2)}x); `
        : '; ') +
      `seconds: one GPU ${one.usPerStep.toFixed(1)} us/step (${one.path}), per-layer ${oneLayers.usPerStep.toFixed(1)}; group ${g.usPerStep.toFixed(1)} us/step; ` +
      (row.floor ? `floor (one GPU + all-reduce) ${row.floor.stepUs.toFixed(1)} us; ` : '') +
      `throughput ${speedup.toFixed(2)}x; all-reduce share ${(share * 100).toFixed(1)}% (${(g.gradientBytes / 1e6).toFixed(1)} MB of gradients); identical ${g.replicasIdentical}` +
      (row.target ? `; target >= ${row.target}x: ${speedupWall >= row.target ? 'met' : 'MISSED'} (wall clock)` : ''),
  );
}
const m = machineInfo();
const slug = `${(info.name || 'gpu')
  .toLowerCase()
  .replace(/[^a-z0-9]+/g, '-')
  .replace(/^-|-$/g, '')}-x${devices}`;
const result = {
  kind: 'data-parallel',
  machine: `${devices} x ${info.name}`,
  host: { ...m, gpus: info.devices, nccl: n.version },
  date: new Date().toISOString(),
  commit: headCommit(),
  command: `node bench/data-parallel.mjs ${process.argv.slice(2).join(' ')}`.trim(),
  rows,
};
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `data-parallel-${slug}.json`), JSON.stringify(result, null, 2) + '\n');
console.log(
  [
    `Data parallelism: ${devices} x ${info.name} (NCCL ${n.version}). Per-GPU batch fixed; the group's global batch is ${devices} times it.`,
    'Throughput: samples per second of the group over one GPU, by the wall clock of fit() and by the Trainer seconds. All-reduce share: (group step - replicas stepping on their own) / group step (seconds).',
    '',
    '| net | precision | per-GPU batch | one GPU wall µs/step | group wall µs/step | throughput (wall) | one GPU µs/step (path) | one GPU per-layer µs/step | group µs/step | throughput | all-reduce share | replicas identical | target (wall) |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.net} ${r.layers.join('-')} | ${r.precision} | ${r.perGpuBatch} | ${r.oneGpu.wallUsPerStep.toFixed(1)} | ${r.group.wallUsPerStep.toFixed(1)} | ${r.speedupWall.toFixed(2)}x | ${r.oneGpu.usPerStep.toFixed(1)} (${r.oneGpu.path}) | ${r.oneGpuLayers.usPerStep.toFixed(1)} | ${r.group.usPerStep.toFixed(1)} | ${r.speedup.toFixed(2)}x | ${(r.allReduceShare * 100).toFixed(1)}% | ${r.group.replicasIdentical} | ${r.target ? `>= ${r.target}x ${r.speedupWall >= r.target ? 'met' : 'missed'}` : '—'} |`,
    ),
  ].join('\n'),
);
