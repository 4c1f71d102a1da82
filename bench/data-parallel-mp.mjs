// data-parallel-mp.mjs: the multi-process mode (one process per GPU: DataParallel.join, rank and
// world from RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT) against one GPU, per-GPU
// batch fixed: per-step time of rank 0 and the throughput ratio. Any device count. Uses dist/.
//   node bench/data-parallel-mp.mjs [--devices N] [--nets S,M,L] [--out FILE.json]
// (bench/data-parallel.mjs measures the one-process mode, DataParallel.create.)
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cudaInfo, DataParallel, planLayout, Trainer } from '../dist/index.js';
import { headCommit } from './git-commit.mjs';

const NETS = { S: [[784, 128, 10], 100], M: [[784, 1024, 1024, 10], 256], L: [[4096, 4096, 4096, 4096], 2048] };
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};

async function replica(net) {
  const [layers, batch] = NETS[net];
  const world = Number(process.env.WORLD_SIZE);
  const perEpoch = net === 'L' ? 10 : 100;
  const samples = batch * world * perEpoch; // the same steps per epoch whatever the world
  const plan = planLayout({ layers, batch, optimizer: 'sgd', samples });
  const group = world > 1 ? await DataParallel.join(plan) : DataParallel.create(plan, { devices: [0] });
  const t = new Trainer(group, { lr: 1e-3 });
  t.init(1);
  const x = new Float32Array(samples * layers[0]);
  for (let i = 0; i < x.length; i++) x[i] = (i % 251) / 251;
  const labels = Uint8Array.from({ length: samples }, (_, i) => i % layers[layers.length - 1]);
  await t.fit({ x, labels }, { epochs: 1 }); // warm-up
  const r = await t.fit({ x, labels }, { epochs: net === 'L' ? 3 : 5 });
  if (process.env.RANK === '0')
    process.stdout.write(JSON.stringify({ net, world, microsPerStep: (r.seconds * 1e6) / r.steps, steps: r.steps, loss: r.loss }) + '\n');
  group.dispose();
}

function run(net, world, port) {
  const procs = Array.from(
    { length: world },
    (_, rank) =>
      new Promise((resolve, reject) => {
        const env = {
          ...process.env,
          RANK: String(rank),
          LOCAL_RANK: String(rank),
          WORLD_SIZE: String(world),
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: String(port),
        };
        const c = spawn(process.execPath, [process.argv[1], '--replica', net], { env, stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        c.stdout.on('data', (d) => (out += d));
        c.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`rank ${rank} of ${net} x${world} exited with ${code}`))));
      }),
  );
  return Promise.all(procs).then((outs) => JSON.parse(outs[0]));
}

if (arg('replica')) {
  await replica(arg('replica'));
} else {
  const devices = Number(arg('devices', String(cudaInfo().devices)));
  const rows = [];
  let port = 29500 + (process.pid % 1000);
  for (const net of arg('nets', 'S,M,L').split(',')) {
    const one = await run(net, 1, port++);
    const group = await run(net, devices, port++);
    const ratio = (devices * one.microsPerStep) / group.microsPerStep;
    rows.push({ net, devices, oneGpuMicros: one.microsPerStep, groupMicros: group.microsPerStep, throughput: ratio });
    console.log(
      `${net} x${devices} (one process per GPU): one GPU ${one.microsPerStep.toFixed(1)} us/step, group ${group.microsPerStep.toFixed(1)} us/step, throughput ${ratio.toFixed(2)}x`,
    );
  }
  const out = arg('out', '');
  if (out) {
    writeFileSync(
      out,
      JSON.stringify(
        {
          kind: 'data-parallel-processes',
          machine: `${devices} x ${cudaInfo().name}`,
          gpu: cudaInfo().name,
          date: new Date().toISOString(),
          commit: headCommit(),
          command: `node bench/data-parallel-mp.mjs ${process.argv.slice(2).join(' ')}`.trim(),
          rows,
        },
        null,
        2,
      ) + '\n',
    );
  }
}
