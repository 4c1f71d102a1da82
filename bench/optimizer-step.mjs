// optimizer-step.mjs: the S network's training step (784-128-10, batch 100) with Adam against
// AdamW + a warmup-cosine schedule + gradient clipping, with ReLU and with GELU (issue 28's speed
// target: within 10%),
// on one backend. Rounds alternate the configurations (each round: one 100-step epoch of each,
// after a warm-up epoch) so that other load on a shared machine hits all of them alike; the
// median round is reported.
//   npx tsup && node bench/optimizer-step.mjs [--backend cpu|cuda] [--rounds 15] [--out FILE]
import { cpus, loadavg } from 'node:os';
import { writeFileSync } from 'node:fs';
import { Arena, planLayout, Trainer, cudaInfo } from '../dist/index.js';
import { headCommit } from './git-commit.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const backend = arg('backend', 'cpu');
const rounds = Number(arg('rounds', '15'));
const batch = 100,
  steps = 100,
  samples = batch * steps;
const CONFIGS = [
  { name: 'adam', optimizer: 'adam', options: { lr: 1e-4 } },
  {
    name: 'adamw + cosine + clip 1.0',
    optimizer: 'adamw',
    options: { lr: 1e-4, weightDecay: 0.01, schedule: { type: 'cosine', total: 100000, warmup: 100 }, clipGradNorm: 1 },
  },
  { name: 'adamw', optimizer: 'adamw', options: { lr: 1e-4, weightDecay: 0.01 } },
  // The recipe as written: GELU on the hidden layer too.
  {
    name: 'adamw + gelu + cosine + clip',
    optimizer: 'adamw',
    activations: ['gelu', 'softmax'],
    options: { lr: 1e-4, weightDecay: 0.01, schedule: { type: 'cosine', total: 100000, warmup: 100 }, clipGradNorm: 1 },
  },
];

let s = 12345;
const x = new Float32Array(samples * 784);
for (let i = 0; i < x.length; i++) {
  s = (Math.imul(s, 1103515245) + 12345) >>> 0;
  x[i] = (s >>> 8) / 2 ** 24;
}
const data = { x, labels: Uint8Array.from({ length: samples }, (_, i) => i % 10) };

const runs = CONFIGS.map((c) => {
  const arena = Arena.create(
    planLayout({ layers: [784, 128, 10], batch, optimizer: c.optimizer, samples, ...(c.activations ? { activations: c.activations } : {}) }),
    { backend },
  );
  const t = new Trainer(arena, c.options);
  t.init(1);
  return { ...c, arena, t, us: [], path: '' };
});
const load0 = loadavg()[0];
for (const r of runs) r.path = (await r.t.fit(data, { epochs: 1 })).path; // warm-up
for (let k = 0; k < rounds; k++) {
  for (const r of runs) {
    const f = await r.t.fit(data, { epochs: 1 });
    r.us.push((f.seconds * 1e6) / f.steps);
  }
}
const median = (a) => [...a].sort((p, q) => p - q)[Math.floor(a.length / 2)];
const base = median(runs[0].us);
const rows = runs.map((r) => ({
  config: r.name,
  path: r.path,
  medianMicrosPerStep: median(r.us),
  minMicrosPerStep: Math.min(...r.us),
  ratioToAdam: median(r.us) / base,
  rounds: r.us,
}));
for (const r of rows)
  console.log(
    `${r.config.padEnd(28)} ${r.path.padEnd(16)} median ${r.medianMicrosPerStep.toFixed(1)} us/step (min ${r.minMicrosPerStep.toFixed(1)}), ${r.ratioToAdam.toFixed(3)}x adam`,
  );
const info = backend === 'cuda' ? cudaInfo() : undefined;
const machine = info?.name ?? `${cpus().length}-core ${cpus()[0]?.model ?? 'cpu'}`;
const out = arg('out');
if (out) {
  const command = `node bench/optimizer-step.mjs ${process.argv.slice(2).join(' ')}`.trim();
  writeFileSync(
    out,
    `${JSON.stringify({ machine, backend, network: '784-128-10', batch, stepsPerRound: steps, rounds, load: [load0, loadavg()[0]], date: new Date().toISOString(), commit: headCommit(), command, rows }, null, 2)}\n`,
  );
  console.log(`wrote ${out}`);
}
for (const r of runs) r.arena.dispose();
