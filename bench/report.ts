// report.ts: bench/results/<machine>.json, and bench/results/README.md rebuilt from every
// results file so the tables of all machines stand side by side.
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Machine } from './machine.js';
import type { MemoryRow } from './memory.js';
import type { StepRow } from './steps.js';
import type { TransferRow } from './transfers.js';

export interface Results {
  machine: Machine; date: string; quick: boolean; command: string;
  /** The parts measured in this run. */
  parts: Array<'transfers' | 'steps' | 'memory'>;
  transfers: TransferRow[]; steps: StepRow[]; memory: MemoryRow[];
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const fix = (n: number, d = 1) => n.toFixed(d);
const torchCell = (s: StepRow, mode: 'eager' | 'graph') => (s.torch ? `${fix(s.torch[mode])} (${fix(s.torch[mode] / s.microsPerStep, 2)}×)` : '—');

function section(r: Results): string {
  const m = r.machine;
  const out = [
    `## ${m.name}`,
    '',
    `${m.gpu ? `GPU ${m.gpu} (compute ${m.computeCapability}), driver ${m.driver}, CUDA runtime ${m.cudaRuntime} (driver API ${m.cudaDriverApi}); ` : 'no GPU (CPU backend); '}` +
      `CPU ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB; Node ${m.node}. ${r.date}${r.quick ? ', quick mode' : ''}. \`${r.command}\``,
    '',
    '### Transfers (mean of benny samples, from JS)',
    '',
    '| arena | bytes | direction | method | transfers | µs | GB/s | vs raw |',
    '|---|---:|---|---|---:|---:|---:|---:|',
    ...r.transfers.map((t) => `| ${t.arena} | ${int(t.bytes)} | ${t.direction} | ${t.method} | ${t.transfers} | ${fix(t.micros, 2)} | ${fix(t.gbps, 2)} | ${t.ratioToRaw ? `${fix(t.ratioToRaw * 100)}% (${t.micros - t.micros / t.ratioToRaw >= 0 ? '+' : ''}${fix(t.micros - t.micros / t.ratioToRaw, 2)} µs)` : '—'} |`),
    '',
    '### Training step (Trainer.fit over a resident data set)',
    '',
    '| network | batch | optimizer | backend (path) | steps | µs/step | samples/s | TFLOP/s | PyTorch eager µs (×) | PyTorch CUDA graph µs (×) |',
    '|---|---:|---|---|---:|---:|---:|---:|---:|---:|',
    ...r.steps.map((s) => `| ${s.network} ${s.layers.join('-')} | ${s.batch} | ${s.optimizer} | ${s.backend}${s.path && s.path !== s.backend ? ` (${s.path})` : ''} | ${s.steps} | ${fix(s.microsPerStep)} | ${int(s.samplesPerSecond)} | ${fix(s.tflops, 3)} | ${torchCell(s, 'eager')} | ${torchCell(s, 'graph')} |`),
    ...(r.steps.some((s) => s.torch) ? ['', `PyTorch ${r.steps.find((s) => s.torch)!.torch!.version}: float32, TF32 off, full steps (zero_grad, forward, loss, backward, optimizer step) on GPU-resident tensors, eager and replayed as a CUDA graph (bench/torch_ref.py, same machine, same call). × = PyTorch time / nn-arena time.`] : []),
    '',
    '### Memory (planned = sum by kind = header total; taken = measured)',
    '',
    'Device taken is the drop in cudaMemGetInfo\'s free memory across Arena.create: the driver hands memory out in 2 MiB pages, so a small arena can land in a page it already holds (0 B).',
    '',
    '| network | optimizer | planned bytes | exact | device taken | host RSS growth |',
    '|---|---|---:|---|---:|---:|',
    ...r.memory.map((x) => `| ${x.network} | ${x.optimizer} | ${int(x.plannedBytes)} | ${x.exact ? 'yes' : '**no**'} | ${x.deviceTakenBytes === null ? '—' : int(x.deviceTakenBytes)} | ${int(x.hostRssGrowthBytes)} |`),
    '',
  ];
  return out.join('\n');
}

export function writeResults(dir: string, r: Results): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${r.machine.name}.json`);
  // A run of some parts (--only) keeps the other parts of the machine's earlier results.
  let previous: Partial<Results> = {};
  try { previous = JSON.parse(readFileSync(file, 'utf8')) as Results; } catch { /* first run */ }
  const merged: Results = { ...r };
  for (const part of ['transfers', 'steps', 'memory'] as const) {
    if (!r.parts.includes(part) && previous[part]) (merged as unknown as Record<string, unknown>)[part] = previous[part];
  }
  if (previous.date && previous.date !== r.date && r.parts.length < 3) merged.date = `${r.date} (${r.parts.join(', ')}); earlier parts ${previous.date}`;
  writeFileSync(file, `${JSON.stringify(merged, null, 2)}\n`);
  renderReadme(dir);
  return file;
}

/** Rebuilds README.md from every results file in `dir`. */
export function renderReadme(dir: string): void {
  const all = readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Results);
  writeFileSync(join(dir, 'README.md'), [
    '# Benchmark results',
    '',
    'Made by `npm run bench` (bench/); each machine\'s raw figures are in `<machine>.json` beside this file.',
    'Rows "vs raw" compare with the raw copy of the same bytes measured in the same run (pinned for pinned rows, pageable for pageable rows).',
    '',
    ...all.map(section),
  ].join('\n'));
}
