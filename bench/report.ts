// report.ts: bench/results/<machine>.json, and bench/results/README.md rebuilt from every
// results file so the tables of all machines stand side by side.
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CpuResults } from './cpu.js';
import type { Machine } from './machine.js';
import type { MemoryRow } from './memory.js';
import type { StepRow } from './steps.js';
import type { TransferRow } from './transfers.js';
import type { UmResults } from './um.js';

export interface Results {
  machine: Machine; date: string; quick: boolean; command: string;
  /** When each part's figures were measured (a run of some parts keeps the others'). */
  partDates?: Record<string, string>;
  /** The parts measured in this run. */
  parts: Array<'transfers' | 'steps' | 'memory' | 'um' | 'cpu'>;
  transfers: TransferRow[]; steps: StepRow[]; memory: MemoryRow[];
  /** Training with a device budget (bench/um.ts); null where there is no CUDA device. */
  um?: UmResults | null;
  /** The CPU backend against the FMA peak, a system BLAS and PyTorch CPU (bench/cpu.ts). */
  cpu?: CpuResults | null;
}

function cpuSection(c: CpuResults | null | undefined): string[] {
  if (!c) return [];
  const g = c.gemm;
  const gemm = typeof g === 'string' ? [g] : [
    `FMA peak measured in the same run (float32, ${g.isa === 'avx512' ? 'AVX-512' : 'AVX2'} FMA loop): ${fix(g.fmaPeak)} GFLOP/s on ${g.threads} threads, ${fix(g.fmaPeak1)} on one. GEMM kernels: ${g.isa}. Best of repeats (median in brackets), float32, ${g.threads} threads.`,
    '',
    `| network | product | m x n x k | GFLOP/s | % of FMA peak | ${g.blas ?? 'system BLAS'} GFLOP/s |`,
    '|---|---|---|---:|---:|---:|',
    ...g.rows.map((r) => `| ${r.network} | ${r.product} | ${r.m} x ${r.n} x ${r.k} | ${fix(r.gflops)} (${fix(r.gflopsMedian)}) | ${fix((100 * r.gflops) / g.fmaPeak, 0)}% | ${r.blasGflops === null ? '—' : `${fix(r.blasGflops)} (${fix(r.blasGflopsMedian!)})`} |`),
  ];
  return [
    '### CPU backend against the machine (GEMM, FMA peak, PyTorch CPU)',
    '',
    `${c.threads} threads; ${c.torch}. Load average ${fix(c.load[0], 2)} at the start, ${fix(c.load[1], 2)} at the end (other processes share these cores: figures measured under load are lower bounds). ` +
      'Where a target is missed, bench/results/cpu-profile-*.txt has the profile (perf stat: CPUs the run got; perf record: where its time went).',
    '',
    ...gemm,
    '',
    '| network | batch | optimizer | steps | ms/step | GFLOP/s | PyTorch CPU ms/step | × (PyTorch / nn-arena) |',
    '|---|---:|---|---:|---:|---:|---:|---:|',
    ...c.steps.map((s) => `| ${s.network} ${s.layers.join('-')} | ${s.batch} | ${s.optimizer} | ${s.steps} | ${fix(s.microsPerStep / 1e3, 3)} | ${fix(s.tflops * 1e3)} | ${s.torch ? fix(s.torch.eager / 1e3, 3) : '—'} | ${s.torch ? fix(s.torch.eager / s.microsPerStep, 2) : '—'} |`),
    '',
    '| target (issue 16) | figure | |',
    '|---|---|---|',
    ...c.targets.map((t) => `| ${t.target} | ${t.figure} | ${t.met ? 'met' : '**missed**'} |`),
    '',
  ];
}

function umSection(u: UmResults | null | undefined): string[] {
  if (!u) return [];
  const mb = (n: number) => fix(n / 1e6, 1);
  const ms = (us: number) => fix(us / 1000, 2);
  const ok = (ratio: number, target: number) => `${fix(ratio, 3)} ${ratio <= target ? '(met)' : '(**missed**)'}`;
  return [
    `### Device budget: ${u.network}, batch ${u.batch}, ${u.optimizer}, budget 25% of the arena`,
    '',
    `Arena ${mb(u.arenaBytes)} MB, budget ${mb(u.budget)} MB, one layer's range ${mb(u.layerRangeBytes)} MB. ` +
      `Link (256 MiB, this run): pinned copy ${fix(u.link.copyToDevice)} / ${fix(u.link.copyToHost)} GB/s to device / host, ` +
      `prefetch ${fix(u.link.prefetchToDevice)} / ${fix(u.link.prefetchToHost)} GB/s (to host on 4 threads ${fix(u.link.prefetchToHost4 ?? 0)} GB/s), ` +
      `discard + prefetch ${fix(u.link.discardToDevice)} / ${fix(u.link.discardToHost)} GB/s${u.link.discard ? ` (${u.link.discard})` : ''}. ` +
      `After a round trip to the device and back, ${mb(u.link.prefetchRetainedBytes ?? 0)} MB of device memory stayed taken for a ${mb(u.link.bytes)} MB range; a discard freed ${mb(u.link.discardFreedBytes)} MB.`,
    '',
    '| mode | variant | steps | ms/step | vs resident | device peak measured (MB) | planned peak (MB) | moved in / out per step (MB) |',
    '|---|---|---:|---:|---:|---:|---:|---:|',
    ...u.rows.map((r) => r.error ? `| ${r.mode} | ${r.variant || '—'} | failed: ${r.error.replace(/\|/g, '/')} | | | | | |` : `| ${r.mode} | ${r.variant || '—'} | ${r.steps} | ${ms(r.microsPerStep)} | ${fix(r.microsPerStep / u.bounds.residentMicros, 3)} | ${mb(r.peakDeviceBytes)} | ${r.scheduledPeakBytes === null || r.scheduledPeakBytes === undefined ? '—' : mb(r.scheduledPeakBytes)} | ${r.toDevicePerStep === null ? '—' : `${mb(r.toDevicePerStep)} / ${mb(r.toHostPerStep!)}`} |`),
    '',
    `Bounds: resident ${ms(u.bounds.residentMicros)} ms/step; at least ${mb(u.mustCross.toDevice)} MB in and ${mb(u.mustCross.toHost)} MB out must cross the link per step: ` +
      `${ms(u.bounds.linkMicrosCopy)} ms at the copy rates (${ms(u.bounds.linkMicrosPrefetch)} ms at the prefetch rates). ` +
      `Scheduler / larger bound: ${ok(u.ratios.schedulerToLargerBound, u.targets.schedulerToLargerBound)} (target <= ${u.targets.schedulerToLargerBound}); ` +
      `scheduler / staging: ${ok(u.ratios.schedulerToStaged, u.targets.schedulerToStaged)} (target <= ${u.targets.schedulerToStaged}).`,
    ...evictionFloor(u),
    '',
  ];
}

/** What eviction alone costs managed memory. It keeps no host copy of what it migrated, so in a
 *  steady state every live byte that comes in (all but the data set's rows, read in place) went
 *  out by a prefetch to the host before: weights between steps, activations between the forward
 *  and the backward pass. That many bytes at the best prefetch-to-host rate measured is a floor
 *  for any managed plan; the shipped scheduler's own write-backs, another. */
function evictionFloor(u: UmResults): string[] {
  const row = u.rows.find((r) => r.mode === 'scheduler' && r.variant === 'as shipped');
  const rate = Math.max(u.link.prefetchToHost, u.link.prefetchToHost4 ?? 0);
  if (!row || row.toHostPerStep === null || !(rate > 0)) return [];
  const L = u.layers.length - 1;
  const rows = u.samples > 0 ? u.batch * (u.layers[0]! + u.layers[L]!) * 4 : 0;  // float32 (UM_SPEC)
  const mustLeave = Math.max(0, u.mustCross.toDevice - rows);
  const ms = (bytes: number) => bytes / rate / 1e6;
  const target = u.targets.schedulerToLargerBound * u.bounds.largerMicros / 1e3;
  return [
    '',
    `Eviction floor of managed memory: at least ${fix(mustLeave / 1e6, 1)} MB per step must leave the device by prefetch (what must come in, less the rows read in place); ` +
      `at the best prefetch-to-host rate above (${fix(rate)} GB/s) that is ${fix(ms(mustLeave), 2)} ms/step for any managed plan, against ${fix(target, 2)} ms for the target; ` +
      `the scheduler's ${fix(row.toHostPerStep / 1e6, 1)} MB take ${fix(ms(row.toHostPerStep), 2)} ms. ` +
      'The device memory the driver keeps for managed ranges after they went back to the host: bench/results/um-release-*.txt (bench/micro/um_release.cu).',
  ];
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const fix = (n: number, d = 1) => n.toFixed(d);
const torchCell = (s: StepRow, mode: 'eager' | 'graph') => { const t = s.torch?.[mode]; return t === undefined ? '—' : `${fix(t)} (${fix(t / s.microsPerStep, 2)}×)`; };

function section(r: Results): string {
  const m = r.machine;
  const out = [
    `## ${m.name}`,
    '',
    `${m.gpu ? `GPU ${m.gpu} (compute ${m.computeCapability}), driver ${m.driver}, CUDA runtime ${m.cudaRuntime} (driver API ${m.cudaDriverApi}); ` : 'no GPU (CPU backend); '}` +
      `CPU ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB; Node ${m.node}. ${r.partDates ? Object.entries(r.partDates).map(([p, d]) => `${p} ${d}`).join(', ') : r.date}${r.quick ? ', quick mode' : ''}. Last command: \`${r.command}\``,
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
    ...umSection(r.um),
    ...cpuSection(r.cpu),
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
  for (const part of ['transfers', 'steps', 'memory', 'um', 'cpu'] as const) {
    if (!r.parts.includes(part) && previous[part]) (merged as unknown as Record<string, unknown>)[part] = previous[part];
  }
  merged.partDates = { ...(previous.partDates ?? {}), ...Object.fromEntries(r.parts.map((p) => [p, r.date])) };
  writeFileSync(file, `${JSON.stringify(merged, null, 2)}\n`);
  renderReadme(dir);
  return file;
}

/** Rebuilds README.md from every results file in `dir`. */
export function renderReadme(dir: string): void {
  // Other JSON here (e.g. torch-memory-*.json, the PyTorch per-stage measurement) is not a machine's results.
  const all = readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Results)
    .filter((r) => r !== null && typeof r === 'object' && typeof (r as { machine?: { name?: unknown } }).machine?.name === 'string');
  writeFileSync(join(dir, 'README.md'), [
    '# Benchmark results',
    '',
    'Made by `npm run bench` (bench/); each machine\'s raw figures are in `<machine>.json` beside this file.',
    'Rows "vs raw" compare with the raw copy of the same bytes measured in the same run (pinned for pinned rows, pageable for pageable rows).',
    '',
    ...all.map(section),
    ...userpathSections(dir),
  ].join('\n'));
}

/** A user-path results file (bench/userpath.mjs, PyTorch beside it: scripts/gpu-session.sh userpath). */
interface UserpathRow { net: string; call: string; wallUs: number[]; secondsUs?: number[]; note?: string }
interface Userpath { machine: string; date: string; commit: string; what: string; nnArena: UserpathRow[]; pytorch?: { version: string; rows: UserpathRow[] }; before?: { source: string; rows: Record<string, string> } }

/** The wall clock of the user's calls (userpath-*.json): nn-arena's rows, the Trainer's seconds
 *  beside them, PyTorch's rows of the same call, and the figures before issue 47. */
function userpathSections(dir: string): string[] {
  const files = readdirSync(dir).filter((f) => /^userpath-.*\.json$/.test(f)).sort();
  const us = (v: number[]) => { const s = [...v].sort((a, b) => a - b); const m = s[Math.floor(s.length / 2)]!; return `${m.toFixed(1)}${s.length > 1 ? ` [${s[0]!.toFixed(1)}-${s[s.length - 1]!.toFixed(1)}]` : ''}`; };
  return files.flatMap((f) => {
    const r = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Userpath;
    const table = (rows: UserpathRow[], who: string) => rows.map((q) => `| ${who} | ${q.net} | ${q.call} | ${us(q.wallUs)} | ${q.secondsUs ? us(q.secondsUs) : ''} |${q.note ? ` ${q.note}` : ''}`);
    return [
      `## User calls, wall clock: ${r.machine}`, '',
      `\`${f}\`, ${r.date}, commit ${r.commit}. ${r.what}`, '',
      '| who | net | call | wall clock, us: median [min-max] | Trainer seconds, us |',
      '|---|---|---|---:|---:|',
      ...table(r.nnArena, 'nn-arena'),
      ...(r.pytorch ? table(r.pytorch.rows, `PyTorch ${r.pytorch.version}`) : []),
      '',
      ...(r.before ? [`Before (${r.before.source}): ${Object.entries(r.before.rows).map(([k, v]) => `${k} ${v}`).join('; ')}.`, ''] : []),
    ];
  });
}
