// steps.ts: training step time as a user sees it: Trainer.fit over a data set resident in the
// arena, steps per second over many steps (per-epoch stats reads and the final weight
// download included).
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Arena, planLayout, Trainer, type BackendName, type Optimizer } from '../src/index.js';

export interface StepRow {
  network: string;
  layers: number[];
  batch: number;
  optimizer: Optimizer;
  backend: BackendName;
  /** The kernel path that ran (fused, layers (cublas), layers (tiled), cpu). */
  path?: string;
  steps: number;
  microsPerStep: number;
  samplesPerSecond: number;
  tflops: number;
  /** PyTorch on the same machine in the same call (bench/torch_ref.py), where it ran. */
  torch?: { eager: number; graph?: number; version: string };
}

export const NETWORKS = [
  { name: 'S', layers: [784, 128, 10], batch: 100, activations: ['relu', 'softmax'] as const },
  { name: 'M', layers: [784, 1024, 1024, 10], batch: 256, activations: ['relu', 'relu', 'softmax'] as const },
  { name: 'L', layers: [4096, 4096, 4096, 4096], batch: 2048, activations: ['relu', 'relu', 'softmax'] as const },
];

/** 6 x batch x sum(in x out): forward, and the two backward products. */
export const flopsPerStep = (layers: number[], batch: number) => 6 * batch * layers.slice(1).reduce((a, n, i) => a + n * layers[i]!, 0);

export async function benchSteps(backend: BackendName, names: string[], minSteps: (net: string) => number, log: (s: string) => void): Promise<StepRow[]> {
  const rows: StepRow[] = [];
  for (const net of NETWORKS.filter((n) => names.includes(n.name))) {
    for (const optimizer of ['sgd', 'adam'] as const) {
      const want = minSteps(net.name);
      // L's data set is 32 MiB per batch of samples: keep 10 batches resident.
      const batchesPerEpoch = Math.min(want, net.name === 'L' ? 10 : 100);
      const samples = net.batch * batchesPerEpoch;
      const plan = planLayout({ layers: net.layers, batch: net.batch, optimizer, samples, activations: [...net.activations] });
      using arena = Arena.create(plan, { backend });
      const t = new Trainer(arena, { lr: optimizer === 'adam' ? 1e-4 : 1e-3 });
      t.init(1);
      const inputs = net.layers[0]!,
        outputs = net.layers[net.layers.length - 1]!;
      let s = 12345;
      const x = new Float32Array(samples * inputs);
      for (let i = 0; i < x.length; i++) {
        s = (Math.imul(s, 1103515245) + 12345) >>> 0;
        x[i] = (s >>> 8) / 2 ** 24;
      }
      const labels = Uint8Array.from({ length: samples }, (_, i) => i % outputs);
      const data = { x, labels };
      await t.fit(data, { epochs: 1, shuffle: true }); // warm-up: uploads, first launches, caches
      const epochs = Math.max(1, Math.ceil(want / batchesPerEpoch));
      const r = await t.fit(data, { epochs, shuffle: true });
      const us = (r.seconds * 1e6) / r.steps;
      const row: StepRow = {
        network: net.name,
        layers: net.layers,
        batch: net.batch,
        optimizer,
        backend,
        path: r.path,
        steps: r.steps,
        microsPerStep: us,
        samplesPerSecond: (net.batch * 1e6) / us,
        tflops: flopsPerStep(net.layers, net.batch) / us / 1e6,
      };
      rows.push(row);
      log(
        `  ${net.name} ${net.layers.join('-')} batch ${net.batch} ${optimizer.padEnd(4)} ${backend}: ${us.toFixed(1).padStart(10)} us/step  ${Math.round(row.samplesPerSecond).toString().padStart(9)} samples/s  ${row.tflops.toFixed(3)} TFLOP/s  (${r.steps} steps, ${r.path})`,
      );
    }
  }
  return rows;
}

export interface TorchReference {
  torch: string;
  cuda: string;
  device: string;
  rows: Array<{ network: string; optimizer: string; mode: 'eager' | 'graph'; microsPerStep: number }>;
}

/** The python3 that imports torch: NN_ARENA_PYTHON, else python3 on PATH, else /usr/bin/python3
 *  (Debian's python3-torch; PATH may lead to another python without it). */
export function torchPython(): string | null {
  for (const py of [process.env.NN_ARENA_PYTHON, 'python3', '/usr/bin/python3']) {
    if (!py) continue;
    try {
      execFileSync(py, ['-c', 'import torch'], { stdio: 'ignore', timeout: 60_000 });
      return py;
    } catch {
      /* next */
    }
  }
  return null;
}

/** Runs bench/torch_ref.py (on the GPU machine: PyTorch with CUDA; `extra` ['--device', 'cpu']:
 *  the CPU reference) and returns its rows, or why it could not run. */
export function runTorchReference(names: string[], log: (s: string) => void, extra: string[] = []): TorchReference | string {
  const out = join(tmpdir(), `nn-arena-torch-${process.pid}.json`);
  const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'bench', 'torch_ref.py');
  const py = torchPython();
  if (!py) return 'PyTorch reference did not run: no python3 with torch (apt-get install python3-torch libopenblas0-pthread)';
  try {
    execFileSync(py, [script, '--out', out, '--only', names.join(','), ...extra], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 900_000, encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .forEach((l) => log(`  ${l}`));
    return JSON.parse(readFileSync(out, 'utf8')) as TorchReference;
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    return `PyTorch reference did not run: ${(err.stderr || err.message).trim().split('\n').pop()}`;
  } finally {
    rmSync(out, { force: true });
  }
}

/** Adds the PyTorch figures of the same network and optimizer to each row of `backend`. */
export function attachTorch(rows: StepRow[], ref: TorchReference, backend: BackendName = 'cuda'): void {
  for (const r of rows) {
    if (r.backend !== backend) continue;
    const pick = (mode: 'eager' | 'graph') => ref.rows.find((t) => t.network === r.network && t.optimizer === r.optimizer && t.mode === mode)?.microsPerStep;
    const eager = pick('eager'),
      graph = pick('graph');
    if (eager !== undefined && (graph !== undefined || backend === 'cpu')) r.torch = { eager, ...(graph !== undefined ? { graph } : {}), version: ref.torch };
  }
}
