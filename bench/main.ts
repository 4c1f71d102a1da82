// main.ts: `npm run bench [-- --quick] [--machine NAME] [--only transfers,steps,memory,um,cpu]`.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { cudaInfo } from '../src/native/addon.js';
import type { BackendName } from '../src/index.js';
import { benchCpu } from './cpu.js';
import { describeMachine, headCommit } from './machine.js';
import { benchMemory } from './memory.js';
import { renderReadme } from './readme.js';
import { writeResults, type Results } from './report.js';
import { attachTorch, benchSteps, runTorchReference } from './steps.js';
import { benchTransfers } from './transfers.js';
import { benchUm } from './um.js';

const program = new Command()
  .name('nn-arena-bench')
  .option('--quick', 'fewer samples, smaller arenas, no L network on the CPU')
  .option('--machine <name>', 'results file name (default: from the GPU or CPU)')
  .addOption(new Option('--only <parts>', 'comma-separated parts').default('transfers,steps,memory,um'))
  .option('--out <dir>', 'results folder', '')
  .option('--render', 'only rebuild results/README.md from the stored results files')
  .option('--no-torch', 'skip the PyTorch reference (python3 bench/torch_ref.py) on CUDA machines')
  .parse();
const o = program.opts<{ quick?: boolean; machine?: string; only: string; out: string; render?: boolean; torch: boolean }>();
const quick = Boolean(o.quick);
const parts = new Set(o.only.split(','));
const here = typeof __dirname === 'string' ? __dirname : dirname(fileURLToPath(import.meta.url));
const outDir = o.out || join(here, '..', 'results');
const log = (s: string) => process.stderr.write(`${s}\n`);
if (o.render) {
  renderReadme(outDir);
  log(`rebuilt ${join(outDir, 'README.md')}`);
  process.exit(0);
}

const machine = describeMachine(o.machine);
const info = cudaInfo();
const backends: BackendName[] = info.built && info.devices > 0 ? ['cpu', 'cuda'] : ['cpu'];
log(`machine ${machine.name}: ${machine.gpu ?? 'no GPU'}; backends ${backends.join(', ')}${quick ? ' (quick)' : ''}`);

const results: Results = {
  machine,
  date: new Date().toISOString(),
  commit: headCommit(),
  quick,
  parts: (['transfers', 'steps', 'memory', 'um', 'cpu'] as const).filter((p) => parts.has(p)),
  command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
  transfers: [],
  steps: [],
  memory: [],
  um: null,
  cpu: null,
};
const main = backends.includes('cuda') ? 'cuda' : 'cpu';
if (parts.has('transfers')) {
  log(`transfers (${main} backend)`);
  results.transfers = await benchTransfers(main, quick ? [16, 256] : [16, 256, 1024], quick, log);
}
if (parts.has('steps')) {
  for (const backend of backends) {
    log(`training steps (${backend} backend)`);
    const nets = backend === 'cpu' ? (quick ? ['S', 'M'] : ['S', 'M', 'L']) : ['S', 'M', 'L'];
    const steps = (net: string) => (net === 'S' ? 1000 : net === 'M' ? (backend === 'cpu' ? 20 : 1000) : backend === 'cpu' ? 1 : 50);
    results.steps.push(...(await benchSteps(backend, nets, steps, log)));
  }
  if (backends.includes('cuda') && o.torch) {
    log('PyTorch reference (bench/torch_ref.py, same GPU, same call)');
    const ref = runTorchReference(['S', 'M', 'L'], log);
    if (typeof ref === 'string') log(`  ${ref}`);
    else attachTorch(results.steps, ref);
  }
}
if (parts.has('memory')) {
  log(`memory (${main} backend)`);
  results.memory = benchMemory(main, ['S', 'M', 'L'], log);
}
if (parts.has('um')) {
  log('device budget: L-class network at 25% of its arena (cuda backend)');
  results.um = await benchUm(quick, log);
}
if (parts.has('cpu')) {
  log("CPU backend at the machine's limit: GEMM, FMA peak, steps, PyTorch CPU (issue 16)");
  results.cpu = await benchCpu(quick, log);
}
log(`wrote ${writeResults(outDir, results)}`);
