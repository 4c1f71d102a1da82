// cli.ts: the `nn-arena` command. Errors print as one line with their code; exit status 1.
import { Command, Option } from 'commander';
import { NnArenaError } from './errors.js';
import { planLayout } from './layout/plan.js';
import type { Dtype, Optimizer, Order } from './layout/header.js';
import { parseList, parseNumber } from './cli/format.js';
import { planJson, planSummary } from './cli/plan.js';
import { planOutput } from './cli/plan-output.js';
import { train } from './cli/train.js';
import { inspectCheckpoint } from './checkpoint.js';

const program = new Command();
program.name('nn-arena').description('Plan, allocate and train neural networks in one contiguous memory arena.');

program
  .command('plan')
  .description('print the arena layout of a network: every region (layer, kind, offset, bytes) and totals by kind')
  .option('--layers <list>', 'units per layer, input first', '784,128,10')
  .option('--batch <n>', 'batch size', '100')
  .addOption(new Option('--dtype <dtype>', 'element type').choices(['float32', 'float64']).default('float32'))
  .addOption(new Option('--optimizer <name>', 'optimizer (sets the state regions)').choices(['sgd', 'momentum', 'adam']).default('sgd'))
  .addOption(new Option('--order <order>', 'region order').choices(['layer-major', 'kind-major']).default('layer-major'))
  .option('--align <bytes>', 'alignment of every region start', '256')
  .option('--samples <n>', 'rows of a resident data set', '0')
  .option('--json', 'print the plan as JSON')
  .option('--svg <file>', 'also write the memory map (SVG) to <file>')
  .option('--vs-pytorch', "print, per training stage, what PyTorch's caching allocator would hold beside the arena's regions")
  .action((o) => {
    const plan = planLayout({
      layers: parseList(o.layers, 'layers'),
      batch: parseNumber(o.batch, 'batch'),
      dtype: o.dtype as Dtype,
      optimizer: o.optimizer as Optimizer,
      order: o.order as Order,
      align: parseNumber(o.align, 'align'),
      samples: parseNumber(o.samples, 'samples'),
    });
    console.log(planOutput(plan, { json: o.json, svg: o.svg, vsPytorch: o.vsPytorch }));
  });

program
  .command('train', { isDefault: false })
  .description('train an MLP on the MNIST digits shipped with the `mnist` package (8,000 train / 2,000 held out) and test it')
  .addOption(new Option('--backend <backend>', 'where to train').choices(['auto', 'cpu', 'cuda']).default('auto'))
  .option('--layers <list>', 'units per layer, input first', '784,128,10')
  .option('--epochs <n>', 'passes over the training digits', '10')
  .option('--batch <n>', 'batch size', '50')
  .option('--lr <rate>', 'learning rate (default: 0.001 for adam, 0.05 otherwise)')
  .addOption(new Option('--optimizer <name>', 'optimizer').choices(['sgd', 'momentum', 'adam']).default('momentum'))
  .addOption(new Option('--dtype <dtype>', 'element type').choices(['float32', 'float64']).default('float32'))
  .option('--seed <n>', 'seed of the split, the weights and the shuffles', '1')
  .option('--save <path>', 'write a checkpoint of the trained arena (resume with Trainer.load; see `nn-arena inspect`)')
  .option('--json', 'print a machine-readable summary on stdout (progress goes to stderr)')
  .option('--report <file>', 'write a self-contained HTML training report (charts, memory map, transfers, machine, settings)')
  .action(async (o) => {
    await train({
      backend: o.backend, layers: parseList(o.layers, 'layers'), epochs: parseNumber(o.epochs, 'epochs'), batch: parseNumber(o.batch, 'batch'),
      lr: o.lr === undefined ? undefined : parseNumber(o.lr, 'lr'), optimizer: o.optimizer as Optimizer, dtype: o.dtype as Dtype,
      seed: parseNumber(o.seed, 'seed'), save: o.save, report: o.report, json: Boolean(o.json),
    });
  });

program
  .command('inspect')
  .argument('<file>', 'a checkpoint written by Arena.save / Trainer.save / train --save')
  .description('check a saved arena (headers, sizes, checksum) and print its layout and totals')
  .option('--json', 'print as JSON')
  .action((file: string, o) => {
    const info = inspectCheckpoint(file);
    if (o.json) {
      console.log(JSON.stringify({ file, version: info.version, arenaBytes: info.arenaBytes, payloadBytes: info.payloadBytes, steps: info.steps, kinds: info.kinds, ...planJson(info.plan) }, null, 2));
      return;
    }
    console.log(`${file}: nn-arena checkpoint v${info.version}, checksum ok; ${info.payloadBytes} payload bytes; saved kinds ${info.kinds.join(', ')}; trainer steps ${info.steps}`);
    console.log(planSummary(info.plan));
  });

program.parseAsync(process.argv).catch((e: unknown) => {
  if (e instanceof NnArenaError) console.error(`nn-arena: ${e.code}: ${e.message}`);
  else console.error(`nn-arena: ${(e as Error).message ?? e}`);
  process.exitCode = 1;
});
