// train.ts (CLI): `nn-arena train`, the main job: an MLP on the MNIST digits shipped by the
// `mnist` package, trained in one arena, tested on held-out digits.
import cliProgress from 'cli-progress';
import { Arena, type BackendName } from '../arena/arena.js';
import { loadMnist } from '../data/mnist.js';
import type { Activation, Dtype, Optimizer } from '../layout/header.js';
import { LOSS_TABLE } from '../native/tables.generated.js';
import type { LossName } from '../native/addon.js';
import { planLayout } from '../layout/plan.js';
import { ArenaError } from '../core/errors.js';
import { cudaInfo } from '../native/addon.js';
import { Trainer, type TrainerOptions } from '../train/trainer.js';
import { planSummary } from './plan.js';
import { ReportCollector } from './train-report.js';
import { recordTransfers } from '../report/transfers.js';
import { bytes } from './format.js';
import { checkOutputFile } from './output-file.js';

export interface TrainOptions {
  backend: 'auto' | BackendName;
  layers: number[];
  epochs: number;
  batch: number;
  lr?: number;
  /** The Trainer's options (lr, weight decay, schedule, clipping; checked by the caller). */
  trainer?: TrainerOptions;
  optimizer: Optimizer;
  dtype: Dtype;
  /** Activation of the hidden layers (default relu), leaky-relu's slope. */
  activation?: Activation;
  leakyReluSlope?: number;
  /** The loss (default cross-entropy): the output layer is softmax for a loss that takes softmax
   *  logits, identity for the others; label smoothing of cross-entropy. */
  loss?: LossName;
  labelSmoothing?: number;
  /** Plan with compact: true (regions never live together share bytes). */
  compact?: boolean;
  seed: number;
  save?: string;
  /** Write the HTML training report here. */
  report?: string;
  json: boolean;
}

export async function train(o: TrainOptions): Promise<void> {
  // The checkpoint's path under the other output files' rule, before the data is read: a folder
  // or a FIFO there fails now, not as SAVE_FAILED after the training.
  if (o.save !== undefined) checkOutputFile('--save', o.save);
  const log = o.json ? (s: string) => process.stderr.write(`${s}\n`) : (s: string) => console.log(s);
  const started = performance.now();
  const { train: trainSet, test: testSet } = loadMnist({ seed: o.seed });
  const inputs = trainSet.inputs;
  if (o.layers[0] !== inputs || o.layers[o.layers.length - 1] !== trainSet.classes) {
    throw new ArenaError('BAD_ARGUMENT', `--layers: MNIST needs ${inputs} inputs and ${trainSet.classes} outputs, got ${o.layers.join(',')}`);
  }
  const loss = LOSS_TABLE.find((l) => l.name === (o.loss ?? 'cross-entropy'))!;
  const activations = [...o.layers.slice(2).map(() => o.activation ?? 'relu'), loss.softmax ? 'softmax' : 'identity'] as Activation[];
  const plan = planLayout({
    layers: o.layers,
    batch: o.batch,
    dtype: o.dtype,
    optimizer: o.optimizer,
    samples: trainSet.count,
    compact: o.compact === true,
    activations,
    ...(o.leakyReluSlope === undefined ? {} : { leakyReluSlope: o.leakyReluSlope }),
  });
  using arena = Arena.create(plan, { backend: o.backend });
  // Every transfer filed by what it was for (header, network, data, stats, weights back).
  const transfers = recordTransfers(arena);
  const report = o.report ? new ReportCollector(transfers) : undefined;
  const info = arena.backend === 'cuda' ? cudaInfo() : undefined;
  log(planSummary(plan));
  log(
    `backend ${arena.backend}${info ? ` (${info.name}, CUDA runtime ${info.runtimeVersion})` : ''}; ${trainSet.count} training digits, ${testSet.count} held out`,
  );

  const trainer = new Trainer(arena, {
    ...(o.trainer ?? (o.lr === undefined ? {} : { lr: o.lr })),
    loss: loss.name,
    ...(o.labelSmoothing === undefined ? {} : { labelSmoothing: o.labelSmoothing }),
  });
  trainer.init(o.seed);
  const bar = new cliProgress.SingleBar(
    {
      format: 'epoch {epoch}/{epochs} |{bar}| {percentage}% loss {loss} acc {acc} {speed} samples/s',
      stream: process.stderr,
      hideCursor: true,
      noTTYOutput: !process.stderr.isTTY,
      notTTYSchedule: 5000,
    },
    cliProgress.Presets.shades_classic,
  );
  const batches = Math.ceil(trainSet.count / o.batch);
  bar.start(o.epochs * batches, 0, { epoch: 1, epochs: o.epochs, loss: '-', acc: '-', speed: '-' });
  let fit;
  try {
    fit = await trainer.fit(trainSet, {
      epochs: o.epochs,
      seed: o.seed,
      reportsPerEpoch: 4,
      onProgress: (p) => {
        report?.onProgress(p);
        bar.update((p.epoch - 1) * batches + p.batch, {
          epoch: p.epoch,
          epochs: p.epochs,
          loss: p.loss.toFixed(4),
          acc: `${(p.accuracy * 100).toFixed(2)}%`,
          speed: Math.round(p.samplesPerSecond),
        });
      },
    });
  } finally {
    bar.stop();
  }
  const test = await trainer.evaluate(testSet);
  const seconds = (performance.now() - started) / 1000;
  if (o.save) log(`saved a checkpoint of ${trainer.save(o.save)} bytes to ${o.save}`);
  const reportPath = report?.write(o.report!, {
    plan,
    backend: arena.backend,
    path: fit.path,
    seconds,
    settings: {
      layers: o.layers.join(','),
      batch: o.batch,
      epochs: o.epochs,
      optimizer: o.optimizer,
      lr: o.lr ?? 'default',
      ...optimizerSettings(o.trainer),
      activation: o.activation ?? 'relu',
      loss: loss.name,
      dtype: o.dtype,
      precision: o.trainer?.precision ?? 'fp32',
      seed: o.seed,
      backend: o.backend,
      'reports per epoch': 4,
      'training samples (resident)': trainSet.count,
      'held-out samples': testSet.count,
    },
    test: { ...test, count: testSet.count },
    train: { loss: fit.loss, accuracy: fit.accuracy, seconds: fit.seconds, samplesPerSecond: fit.samplesPerSecond },
  });
  if (reportPath) log(`training report written to ${reportPath}`);
  const s = arena.stats;
  const byPurpose = transfers.byPurpose();
  transfers.stop();
  const summary = {
    accuracy: test.accuracy,
    loss: test.loss,
    trainAccuracy: fit.accuracy,
    trainLoss: fit.loss,
    epochs: o.epochs,
    seconds,
    trainSeconds: fit.seconds,
    samplesPerSecond: fit.samplesPerSecond,
    backend: arena.backend,
    device: info?.name ?? null,
    layers: o.layers,
    batch: o.batch,
    optimizer: o.optimizer,
    dtype: o.dtype,
    arenaBytes: plan.totalBytes,
    transfers: {
      toDevice: { transfers: s.toDeviceTransfers, bytes: s.toDeviceBytes },
      toHost: { transfers: s.toHostTransfers, bytes: s.toHostBytes },
      byPurpose: byPurpose.map(({ purpose, direction, transfers: n, bytes: b }) => ({ purpose, direction, transfers: n, bytes: b })),
    },
    allocations: { host: s.hostAllocs, device: s.deviceAllocs },
    ...(reportPath ? { report: reportPath } : {}),
  };
  if (o.json) {
    console.log(JSON.stringify(summary, null, 2));
    return;
  }
  log(
    `test accuracy ${(test.accuracy * 100).toFixed(2)}% (loss ${test.loss.toFixed(4)}) on ${testSet.count} held-out digits; train accuracy ${(fit.accuracy * 100).toFixed(2)}%`,
  );
  log(`wall time ${seconds.toFixed(2)} s (training ${fit.seconds.toFixed(2)} s, ${Math.round(fit.samplesPerSecond)} samples/s)`);
  log(
    `transfers: to device ${s.toDeviceTransfers} (${s.toDeviceBytes} bytes), to host ${s.toHostTransfers} (${s.toHostBytes} bytes); allocations: ${s.hostAllocs} host, ${s.deviceAllocs} device`,
  );
  log(`  by purpose: ${byPurpose.map((p) => `${p.purpose} ${p.transfers} ${p.direction === 'to device' ? 'up' : 'down'} (${bytes(p.bytes)})`).join(', ')}`);
}

/** The optimizer flags for the report's settings table. */
function optimizerSettings(t: TrainerOptions | undefined): Record<string, string | number> {
  if (!t) return {};
  const out: Record<string, string | number> = {};
  if (t.weightDecay !== undefined) out['weight decay'] = t.weightDecay;
  if (t.nesterov) out.nesterov = 'yes';
  if (t.clipGradNorm !== undefined) out['clip grad norm'] = t.clipGradNorm;
  if (t.schedule)
    out.schedule = Object.entries(t.schedule)
      .map(([k, v]) => (k === 'type' ? v : `${k} ${v}`))
      .join(', ');
  return out;
}
