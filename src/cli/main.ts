// main.ts: the `nn-arena` command. Every option is checked before any work starts; every error,
// the argument parser's and the library's, prints as one line `nn-arena: CODE: message` (exit
// status 1); --verbose adds the error's detail (where in the native code it was raised).
import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { NnArenaError } from '../core/errors.js';
import { packageVersion } from '../native/doctor.js';
import { runDataParallelAdvice, runDoctor } from './doctor.js';
import { planLayout } from '../layout/plan.js';
import type { Activation, Dtype, Optimizer, Order } from '../layout/header.js';
import { ACTIVATION_TABLE, LOSS_TABLE, PRECISION_TABLE } from '../native/tables.generated.js';
import type { GradientWire, LossName, PrecisionName } from '../native/addon.js';
import type { LayoutSpec } from '../layout/spec.js';
import { parseExtras, parseInteger, parseList, parseNumber, usage } from './format.js';
import { planJson, planSummary } from './plan.js';
import { planOutput } from './plan-output.js';
import { train } from './train.js';
import { checkOutputFile } from './output-file.js';
import { inspectCheckpoint } from '../checkpoint/checkpoint.js';
import { optimizers, schedules } from '../layout/optimizers.js';
import { MNIST_TRAIN_COUNT } from '../data/mnist.js';
import { checkOptimizerOptions } from '../train/optimizer-options.js';
import { checkLossScaleOptions, lossScaleParams } from '../train/options.js';
import { PRECISIONS } from '../native/addon.js';
import type { TrainerOptions } from '../train/trainer.js';
import { EXPORT_FORMATS, runExport } from './export.js';
import { PYTORCH_PRECISIONS, type PytorchPrecision } from '../report/pytorch.js';
import { didYouMean } from '../core/known-keys.js';

const program = new Command();
program
  .name('nn-arena')
  .description('Plan, allocate and train neural networks in one contiguous memory arena.')
  .version(packageVersion(), '-V, --version', 'print the version of nn-arena')
  .option('--verbose', 'on an error, also print its detail (for bug reports)')
  .exitOverride()
  .configureOutput({ outputError: () => {} });

program
  .command('plan')
  .description('print the arena layout of a network: every region (layer, kind, offset, bytes) and totals by kind')
  .option('--layers <list>', 'units per layer, input first', '784,128,10')
  .option('--batch <n>', 'batch size', '100')
  .addOption(new Option('--dtype <dtype>', 'element type').choices(['float32', 'float64']).default('float32'))
  .addOption(new Option('--optimizer <name>', 'optimizer (sets the state regions)').choices(optimizers().map((x) => x.name)).default('sgd'))
  .addOption(new Option('--order <order>', 'region order').choices(['layer-major', 'kind-major']).default('layer-major'))
  .option('--align <bytes>', 'alignment of every region start', '256')
  .option('--samples <n>', 'rows of a resident data set', '0')
  .option(
    '--extra <spec>',
    'a user region (repeatable): NAME:KIND (z, b or w: one per layer shaped like it), NAME:KIND:LAYERS (1,2) or NAME:BYTES (global)',
    (v: string, prev: string[]) => [...prev, v],
    [] as string[],
  )
  .option('--compact', 'regions never live at the same time share bytes (an SGD plan has no dw); gradients cannot be read')
  .option('--json', 'print the plan as JSON')
  .option('--svg <file>', 'also write the memory map (SVG) to <file>')
  .option('--vs-pytorch', "print, per training stage, what PyTorch's caching allocator would hold beside the arena's regions")
  .addOption(
    new Option(
      '--precision <name>',
      "--vs-pytorch: PyTorch plain (fp32) or with AMP (bf16 autocast; fp16 autocast + GradScaler), beside nn-arena's precision of that name",
    )
      .choices([...PYTORCH_PRECISIONS])
      .default('fp32'),
  )
  .action((o) => {
    if (o.svg !== undefined) checkOutputFile('--svg', o.svg);
    if (o.precision !== 'fp32' && !o.vsPytorch)
      throw usage(`--precision: applies to --vs-pytorch (a plan is the same for every precision), got '${o.precision}' without it`);
    const plan = planLayout({
      layers: parseList(o.layers, 'layers'),
      batch: parseInteger(o.batch, 'batch', 1),
      dtype: o.dtype as Dtype,
      optimizer: o.optimizer as Optimizer,
      order: o.order as Order,
      align: parseInteger(o.align, 'align', 1),
      samples: parseInteger(o.samples, 'samples', 0),
      extra: parseExtras(o.extra) as LayoutSpec['extra'],
      compact: Boolean(o.compact),
    });
    console.log(planOutput(plan, { json: o.json, svg: o.svg, vsPytorch: o.vsPytorch, precision: o.precision as PytorchPrecision }));
  });

program
  .command('train', { isDefault: false })
  .description('train an MLP on the MNIST digits shipped with the `mnist` package (8,000 train / 2,000 held out) and test it')
  .addOption(new Option('--backend <backend>', 'where to train').choices(['auto', 'cpu', 'cuda']).default('auto'))
  .option('--layers <list>', 'units per layer, input first', '784,128,10')
  .option('--epochs <n>', 'passes over the training digits', '10')
  .option('--batch <n>', 'batch size', '50')
  .option('--lr <rate>', 'learning rate (default: 0.001 for adam, 0.05 otherwise)')
  .addOption(new Option('--optimizer <name>', 'optimizer').choices(optimizers().map((x) => x.name)).default('momentum'))
  .option('--weight-decay <x>', 'weight decay (sgd, momentum, adam: L2 on the gradient; adamw: decoupled; default 0, adamw 0.01)')
  .option('--nesterov', 'Nesterov momentum (--optimizer momentum)')
  .addOption(new Option('--schedule <name>', "learning-rate schedule over the run's steps").choices(schedules().map((x) => x.name)).default('constant'))
  .option('--warmup <steps>', 'cosine: linear warmup steps', '0')
  .option('--min-lr <rate>', 'cosine: learning rate at the end', '0')
  .option('--step-size <steps>', 'step: steps between decays (default: one epoch)')
  .option('--gamma <x>', 'step: factor of each decay', '0.1')
  .option('--clip <norm>', 'clip gradients to this global norm before each step')
  .addOption(new Option('--dtype <dtype>', 'element type').choices(['float32', 'float64']).default('float32'))
  .addOption(
    new Option(
      '--precision <name>',
      'how the products are computed (float32; CUDA: tf32 / tf32x3 / bf16 / fp16 tensor cores; the CPU emulates bf16 and fp16; fp16 with loss scaling)',
    )
      .choices(PRECISION_TABLE.map((p) => p.name))
      .default('fp32'),
  )
  .addOption(
    new Option('--activation <name>', 'activation of the hidden layers').choices(ACTIVATION_TABLE.filter((a) => a.hidden).map((a) => a.name)).default('relu'),
  )
  .option('--leaky-relu-slope <s>', 'negative slope of leaky-relu layers (default 0.01)')
  .addOption(
    new Option('--loss <name>', 'loss (the output layer is softmax for cross-entropy, identity for the others)')
      .choices(LOSS_TABLE.map((l) => l.name))
      .default('cross-entropy'),
  )
  .option('--label-smoothing <eps>', 'label smoothing of cross-entropy, in [0, 1]')
  .option('--seed <n>', 'seed of the split, the weights and the shuffles', '1')
  .option('--compact', 'train on a compact plan (regions never live at the same time share bytes; SGD keeps no dw)')
  .option('--save <path>', 'write a checkpoint of the trained arena (resume with Trainer.load; see `nn-arena inspect`)')
  .option('--json', 'print a machine-readable summary on stdout (progress goes to stderr)')
  .option('--report <file>', 'write a self-contained HTML training report (charts, memory map, transfers, machine, settings)')
  .action(async (o, cmd: Command) => {
    // All of them checked here, before the data is read or anything printed.
    const layers = parseList(o.layers, 'layers');
    if (layers.length < 2 || layers[0] !== 784 || layers[layers.length - 1] !== 10 || layers.some((n) => !Number.isInteger(n) || n < 1)) {
      throw usage(`--layers: MNIST needs 784 inputs, 10 outputs and whole numbers of units, got '${o.layers}'`);
    }
    const epochs = parseInteger(o.epochs, 'epochs', 1);
    const batch = parseInteger(o.batch, 'batch', 1);
    const lr = o.lr === undefined ? undefined : parseNumber(o.lr, 'lr');
    if (lr !== undefined && !(lr > 0 && Number.isFinite(lr))) throw usage(`--lr: must be a positive number, got '${o.lr}'`);
    const seed = parseInteger(o.seed, 'seed', 0);
    const slope = o.leakyReluSlope === undefined ? undefined : parseNumber(o.leakyReluSlope, 'leaky-relu-slope');
    if (slope !== undefined && !(slope >= 0 && Number.isFinite(slope)))
      throw usage(`--leaky-relu-slope: must be a finite number >= 0, got '${o.leakyReluSlope}'`);
    if (slope !== undefined && o.activation !== 'leaky-relu') throw usage(`--leaky-relu-slope: applies to --activation leaky-relu, not '${o.activation}'`);
    const labelSmoothing = o.labelSmoothing === undefined ? undefined : parseNumber(o.labelSmoothing, 'label-smoothing');
    if (labelSmoothing !== undefined && !(labelSmoothing >= 0 && labelSmoothing <= 1))
      throw usage(`--label-smoothing: must be a number in [0, 1], got '${o.labelSmoothing}'`);
    const lossRow = LOSS_TABLE.find((l) => l.name === o.loss)!;
    if (labelSmoothing !== undefined && !lossRow.smoothing) throw usage(`--label-smoothing: applies to cross-entropy, not '${o.loss}'`);
    // The optimizer flags as Trainer options, checked against the optimizer table and the native
    // run checks on the plan (MNIST: 784 inputs; the output layer and loss as train() plans them)
    // before any data is read.
    const steps = epochs * Math.ceil(MNIST_TRAIN_COUNT / batch);
    const opt: TrainerOptions = {
      ...(lr !== undefined ? { lr } : {}),
      ...(o.weightDecay !== undefined ? { weightDecay: parseNumber(o.weightDecay, 'weight-decay') } : {}),
      ...(o.nesterov ? { nesterov: true } : {}),
      ...(o.clip !== undefined ? { clipGradNorm: parseNumber(o.clip, 'clip') } : {}),
      ...(o.precision !== 'fp32' ? { precision: o.precision as PrecisionName } : {}),
    };
    // A schedule's own flags without that schedule would be ignored: refused instead.
    for (const [key, flag, schedule] of [
      ['warmup', 'warmup', 'cosine'],
      ['minLr', 'min-lr', 'cosine'],
      ['stepSize', 'step-size', 'step'],
      ['gamma', 'gamma', 'step'],
    ] as const) {
      if (cmd.getOptionValueSource(key) === 'cli' && o.schedule !== schedule) throw usage(`--${flag}: applies to --schedule ${schedule}, not '${o.schedule}'`);
    }
    if (o.schedule === 'cosine')
      opt.schedule = { type: 'cosine', total: steps, warmup: parseInteger(o.warmup, 'warmup', 0), minLr: parseNumber(o.minLr, 'min-lr') };
    else if (o.schedule === 'one-cycle') opt.schedule = { type: 'one-cycle', total: steps };
    else if (o.schedule === 'step') {
      opt.schedule = {
        type: 'step',
        stepSize: o.stepSize === undefined ? Math.ceil(MNIST_TRAIN_COUNT / batch) : parseInteger(o.stepSize, 'step-size', 1),
        gamma: parseNumber(o.gamma, 'gamma'),
      };
    }
    const probeActivations = [...layers.slice(2).map(() => o.activation as Activation), lossRow.softmax ? 'softmax' : 'identity'] as Activation[];
    const probe = planLayout({
      layers,
      batch,
      dtype: o.dtype as Dtype,
      optimizer: o.optimizer as Optimizer,
      compact: Boolean(o.compact),
      activations: probeActivations,
      ...(slope === undefined ? {} : { leakyReluSlope: slope }),
    });
    const lossScale = checkLossScaleOptions(undefined, o.precision as PrecisionName); // fp16: GradScaler's defaults
    checkOptimizerOptions(probe, opt as Record<string, unknown>, {
      loss: lossRow.code,
      ...(labelSmoothing ? { labelSmoothing } : {}),
      precision: PRECISIONS[o.precision as PrecisionName],
      ...lossScaleParams(lossScale, lossScale?.init ?? 0, 0),
    });
    if (o.report !== undefined) checkOutputFile('--report', o.report);
    if (o.save !== undefined) {
      // the checkpoint's own rules (no symlink, atomic) apply when it is written
      const dir = dirname(resolve(o.save));
      if (typeof o.save !== 'string' || o.save.trim() === '') throw usage(`--save: needs a file name, got '${String(o.save)}'`);
      if (!existsSync(dir) || !statSync(dir).isDirectory()) throw usage(`--save: the folder ${dir} does not exist`);
    }
    await train({
      backend: o.backend,
      layers,
      epochs,
      batch,
      lr,
      trainer: opt,
      optimizer: o.optimizer as Optimizer,
      dtype: o.dtype as Dtype,
      compact: Boolean(o.compact),
      seed,
      activation: o.activation as Activation,
      leakyReluSlope: slope,
      loss: o.loss as LossName,
      labelSmoothing,
      save: o.save,
      report: o.report,
      json: Boolean(o.json),
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
      const saved = [...info.kinds, ...info.extras];
      console.log(
        JSON.stringify(
          {
            file,
            version: info.version,
            arenaBytes: info.arenaBytes,
            payloadBytes: info.payloadBytes,
            steps: info.steps,
            kinds: info.kinds,
            extras: info.extras,
            data: info.data,
            metadata: info.metadata,
            ...planJson(info.plan, saved),
          },
          null,
          2,
        ),
      );
      return;
    }
    console.log(
      `${file}: nn-arena checkpoint v${info.version}, checksum ok; ${info.payloadBytes} payload bytes; saved kinds ${info.kinds.join(', ')}${info.extras.length ? `; saved user regions ${info.extras.join(', ')}` : ''}; data set ${info.data ? 'included' : 'not included'}; trainer steps ${info.steps}`,
    );
    for (const [key, value] of Object.entries(info.metadata)) console.log(`${key}: ${JSON.stringify(value)}`);
    console.log(planSummary(info.plan, [...info.kinds, ...info.extras]));
  });

program
  .command('export')
  .argument('<checkpoint>', 'a checkpoint written by Arena.save / Trainer.save / train --save')
  .argument('<out>', 'the file to write')
  .description("write a checkpoint's network for other frameworks: ONNX (its inference graph) or safetensors (PyTorch nn.Sequential state_dict names)")
  .addOption(new Option('--format <format>', 'what to write').choices([...EXPORT_FORMATS]).makeOptionMandatory())
  .option('--model <m>', 'a checkpoint of K models: which one', '0')
  .action((checkpoint: string, out: string, o) => runExport(checkpoint, out, o));

program
  .command('doctor')
  .description(
    "what this installation can do here: binary (prebuilt or local, CPU or CUDA, architectures), CPU, GPU, driver, cuBLAS, and the backend 'auto' picks",
  )
  .option('--json', 'print as JSON')
  .option('--data-parallel', 'instead: time a network on one GPU and on a group of GPUs, and say which trains faster here')
  .option('--layers <list>', '--data-parallel: units per layer, input first', '784,1024,1024,10')
  .option('--batch <n>', '--data-parallel: rows a GPU', '256')
  .addOption(new Option('--precision <name>', "--data-parallel: the products' precision").choices(PRECISION_TABLE.map((p) => p.name)).default('fp32'))
  .addOption(new Option('--optimizer <name>', '--data-parallel: optimizer').choices(optimizers().map((x) => x.name)).default('sgd'))
  .option('--devices <list>', "--data-parallel: the group's devices (default: every GPU)")
  .addOption(new Option('--gradients <wire>', '--data-parallel: what crosses the link').choices(['full', 'bf16']).default('full'))
  .option('--steps <n>', '--data-parallel: steps timed on each side', '200')
  .action(async (o, cmd: Command) => {
    if (!o.dataParallel) {
      // The options whose help says they are --data-parallel's.
      const given = cmd.options.find((x) => x.description.startsWith('--data-parallel:') && cmd.getOptionValueSource(x.attributeName()) === 'cli');
      if (given) throw usage(`${given.long}: applies to --data-parallel`);
      return runDoctor(Boolean(o.json));
    }
    await runDataParallelAdvice({
      layers: parseList(o.layers, 'layers'),
      batch: parseInteger(o.batch, 'batch', 1),
      precision: o.precision as PrecisionName,
      optimizer: o.optimizer as Optimizer,
      devices: o.devices === undefined ? undefined : parseList(o.devices, 'devices'),
      gradients: o.gradients as GradientWire,
      steps: parseInteger(o.steps, 'steps', 20),
      json: Boolean(o.json),
    });
  });

/** The argument parser's refusals in nn-arena's own form (`--flag: what is wrong, got 'value'`). */
function commanderMessage(e: CommanderError): string {
  const m = e.message.replace(/^error: /, '');
  const choice = /^option '(--[\w-]+)[^']*' argument '(.*)' is invalid\. Allowed choices are (.*)\.$/s.exec(m);
  if (choice) return `${choice[1]}: must be one of ${choice[3]}, got '${choice[2]}'${didYouMean(choice[2], choice[3]!.split(', '))}`;
  const missing = /^option '(--[\w-]+)[^']*' argument missing$/.exec(m);
  if (missing) return `${missing[1]}: needs a value`;
  const unknown = /^unknown option '([^']*)'/.exec(m);
  if (unknown) return `${unknown[1]}: unknown option`;
  return m;
}

/** Messages from the native layer end with their source location; that goes to `detail`. */
function split(e: { message: string; detail?: unknown }): { message: string; detail?: string } {
  const m = /^(.*?)\s*\(([^()\s]+\.(?:cc|cu|cuh|h|cpp|ts):\d+)\)\s*$/s.exec(e.message);
  // Relative to the package root: the build machine's own folders stay out of reports.
  const detail = typeof e.detail === 'string' && e.detail ? e.detail : m?.[2]?.replace(/^.*?(?=(?:csrc|src)\/)/, '');
  return { message: m ? m[1]! : e.message, ...(detail ? { detail } : {}) };
}

program.parseAsync(process.argv).catch((e: unknown) => {
  if (e instanceof CommanderError) {
    if (e.exitCode === 0 || e.code === 'commander.help' || e.code === 'commander.helpDisplayed' || e.code === 'commander.version') {
      process.exitCode = e.exitCode;
      return;
    }
    console.error(`nn-arena: BAD_ARGUMENT: ${commanderMessage(e)} (see nn-arena --help)`);
  } else {
    const err = e as Error & { code?: unknown; detail?: unknown };
    const code = e instanceof NnArenaError ? e.code : typeof err?.code === 'string' ? err.code : 'ERROR';
    const { message: text, detail } = split({ message: String(err?.message ?? e), detail: err?.detail });
    // Node's errors start with their own code ("EACCES: permission denied, ..."): printed once.
    const message = text.startsWith(`${code}: `) ? text.slice(code.length + 2) : text;
    console.error(`nn-arena: ${code}: ${message}`);
    if (program.opts().verbose) {
      if (detail) console.error(`detail: ${detail}`);
      if (err?.stack) console.error(err.stack);
    }
  }
  process.exitCode = 1;
});
