// cli.ts: the `nn-arena` command. Errors print as one line with their code; exit status 1.
import { Command, Option } from 'commander';
import { NnArenaError } from './errors.js';
import { planLayout } from './layout/plan.js';
import type { Dtype, Optimizer, Order } from './layout/header.js';
import { parseList, parseNumber } from './cli/format.js';
import { planJson, planSummary, regionTable } from './cli/plan.js';

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
    if (o.json) console.log(JSON.stringify(planJson(plan), null, 2));
    else console.log(`${planSummary(plan)}\n\n${regionTable(plan)}`);
  });

program.parseAsync(process.argv).catch((e: unknown) => {
  if (e instanceof NnArenaError) console.error(`nn-arena: ${e.code}: ${e.message}`);
  else console.error(`nn-arena: ${(e as Error).message ?? e}`);
  process.exitCode = 1;
});
