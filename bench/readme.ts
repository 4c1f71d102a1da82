// readme.ts: bench/results/README.md, rebuilt from the results files beside it (`npm run bench
// -- --render`, and after every `npm run bench`). One short section per file: its key figures,
// the machine, date and commit, and the command that measures them again; the raw rows stay in
// the JSON. A results file no renderer here knows is an error, so that nothing lands in
// bench/results without being explained.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fix, int, mb, median, provenance, span, table, type Provenance } from './format.js';
import { machineSection } from './readme-machine.js';
import { dataParallelSection, processesSection, type DataParallel, type Processes } from './readme-parallel.js';
import type { Results } from './results-file.js';

/** A kind of results file: which files it is, and its section; or one section for all its
 *  files (`renderAll`: a line a machine under one heading). */
interface Kind {
  is(file: string, json: unknown): boolean;
  render(file: string, json: unknown): string[];
  renderAll?(files: Array<{ f: string; json: unknown }>): string[];
}

// In the README's order. Files are matched by name, except `npm run bench`'s <machine>.json.
const KINDS: Kind[] = [
  { is: (_, j) => Array.isArray((j as Results).parts) && typeof (j as Results).machine?.name === 'string', render: (f, j) => machineSection(f, j as Results) },
  { is: (f) => /^steps-.*\.json$/.test(f), render: (f, j) => stepsSection(f, j as StepsFile) },
  { is: (f) => /^stream-.*\.json$/.test(f), render: (f, j) => streamSection(f, j as StreamFile) },
  { is: (f) => /^userpath-.*\.json$/.test(f), render: (f, j) => userpathSection(f, j as Userpath) },
  {
    is: (f) => /^ops-.*\.json$/.test(f),
    render: (f, j) => opsSection([{ f, json: j }]),
    renderAll: (files) => opsSection(files),
  },
  { is: (f) => /^data-parallel-(?!processes-).*\.json$/.test(f), render: (f, j) => dataParallelSection(f, j as DataParallel) },
  { is: (f) => /^data-parallel-processes-.*\.json$/.test(f), render: (f, j) => processesSection(f, j as Processes) },
  {
    is: (f) => /^torch-memory-.*\.json$/.test(f),
    render: (f, j) => torchMemorySection([{ f, json: j }]),
    renderAll: (files) => torchMemorySection(files),
  },
  { is: (f) => /^optimizer-step-.*\.json$/.test(f), render: (f, j) => optimizerStepSection(f, j as OptimizerStep) },
  { is: (f) => /^export_check\.json$/.test(f), render: (f, j) => exportCheckSection(f, j as ExportCheck) },
];

/** The README's text for the results files in `dir`. */
export function readmeText(dir: string): string {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => {
      const json: unknown = JSON.parse(readFileSync(join(dir, f), 'utf8'));
      const kind = KINDS.findIndex((k) => k.is(f, json));
      if (kind < 0) throw new Error(`bench/readme.ts renders no section for ${f}: add one, or keep the file out of ${dir}`);
      return { f, json, kind };
    });
  files.sort((a, b) => a.kind - b.kind || a.f.localeCompare(b.f));
  return [
    '# Benchmark results',
    '',
    'Rendered by `npm run bench -- --render` (bench/readme.ts) from the JSON files beside it, one per benchmark and machine (raw rows, machine, date, commit, command);',
    'what each measures: [docs/benchmarks.md](../../docs/benchmarks.md). Logs, traces and profiles stay out of the repository (bench/.tmp/ is git-ignored); the round-2 and round-3 diaries: `git show ebfdd15:bench/results/round2-h100/` (and `round3-h100/`).',
    '',
    ...files.flatMap(({ f, json, kind }, i) => {
      const k = KINDS[kind]!;
      if (!k.renderAll) return k.render(f, json);
      return i > 0 && files[i - 1]!.kind === kind ? [] : k.renderAll(files.filter((x) => x.kind === kind));
    }),
  ].join('\n');
}

/** Rebuilds README.md from every results file in `dir`. */
export function renderReadme(dir: string): void {
  writeFileSync(join(dir, 'README.md'), readmeText(dir));
}

// ---- steps-<gpu>.json: one table29 call (bench/collect-steps.mjs) ----

interface StepRecord {
  network: string;
  layers: number[];
  batch: number;
  optimizer: string;
  precision: string;
  path?: string;
  microsPerStep: number;
  mode?: string;
  models?: number;
}
interface TorchFile {
  torch: string;
  rows: StepRecord[];
}
interface StepsFile extends Provenance {
  machine: string;
  peer: string;
  nnArena: StepRecord[];
  spread: StepRecord[];
  models: Array<{ rows: Array<{ precision: string; models: number; microsPerStep: number }> }>;
  pytorch: TorchFile[];
  torchFunc: TorchFile[];
  gemmFloor: StepRecord[];
}

const OPTIMIZERS: Record<string, string> = { sgd: 'SGD', adam: 'Adam', recipe: 'AdamW + GELU + cosine + clip' };

function stepsSection(file: string, r: StepsFile): string[] {
  const torch = r.pytorch.flatMap((t) => t.rows).filter((t) => t.mode === 'graph');
  // PyTorch has no 3xTF32: its fp32 step is the counterpart of tf32x3.
  const peerPrecision = (p: string) => (p === 'tf32x3' ? 'fp32' : p);
  const rows = groupBy(r.nnArena, (s) => `${s.network}|${s.optimizer}|${s.precision}|${s.path}`).map((runs) => {
    const s = runs[0]!;
    const us = runs.map((x) => x.microsPerStep);
    const peer = torch.find((t) => t.network === s.network && t.optimizer === s.optimizer && t.precision === peerPrecision(s.precision));
    const floor = r.gemmFloor.find((g) => g.network === s.network && g.precision === s.precision);
    return [
      `${s.network} ${s.layers.join('-')}, batch ${s.batch}`,
      OPTIMIZERS[s.optimizer] ?? s.optimizer,
      `${s.precision}${s.path === 'fused' ? ' (fused)' : ''}`,
      span(us),
      peer ? `${fix(peer.microsPerStep)}${peer.precision !== s.precision ? ` (${peer.precision})` : ''}` : '—',
      peer ? `${fix(peer.microsPerStep / median(us), 2)}x` : '—',
      floor ? fix(floor.microsPerStep) : '—',
    ];
  });
  const func = r.torchFunc.flatMap((t) => t.rows);
  const models = groupBy(
    r.models.flatMap((m) => m.rows),
    (m) => `${m.precision}|${m.models}`,
  ).map((runs) => {
    const m = runs[0]!;
    const us = runs.map((x) => x.microsPerStep);
    const peer = func.find((t) => t.models === m.models && t.precision === m.precision);
    return [`${m.models} S models`, m.precision, span(us), peer ? fix(peer.microsPerStep) : '—', peer ? `${fix(peer.microsPerStep / median(us), 2)}x` : '—'];
  });
  const spread = r.spread.map((s) => s.microsPerStep);
  const s0 = r.spread[0];
  return [
    `## Training steps beside PyTorch: ${r.machine}`,
    provenance(file, r),
    `Peer: ${r.peer}. µs a step of Trainer.fit over a resident data set; a range where the call ran several rounds.`,
    '',
    ...table(
      ['network', 'optimizer', 'precision', 'nn-arena µs', `PyTorch ${r.pytorch[0]?.torch ?? ''} graphed µs`, 'PyTorch / nn-arena', 'GEMM floor µs'],
      rows,
      3,
    ),
    '',
    ...table(['K models in one arena (SGD)', 'precision', 'nn-arena µs', 'torch.func µs', 'torch.func / nn-arena'], models, 2),
    ...(s0
      ? [
          '',
          `${s0.network} ${OPTIMIZERS[s0.optimizer] ?? s0.optimizer} ${s0.precision} in ${spread.length} separate processes: ${span(spread)} µs a step (spread ${fix((100 * (Math.max(...spread) - Math.min(...spread))) / Math.min(...spread))}%).`,
        ]
      : []),
    '',
  ];
}

// ---- stream-<device>.json: bench/stream.mjs ----

interface StreamRow {
  network: string;
  layers: number[];
  batch: number;
  rows: number;
  window: number;
  epochs: number;
  optimizer?: string;
  trainerOptions?: Record<string, unknown>;
  residentMicrosPerStep: number;
  npyVsResident?: number;
  npySteadyVsResident?: number;
  npyFirstReportMs?: number;
  iterableInOrderVsResident?: number;
  iterableInOrderSteadyVsResident?: number;
  iterableVsResident?: number;
  iterableSteadyVsResident?: number;
}
interface StreamFile extends Provenance {
  machine: { gpu?: { name: string } | null; cpu: string; cores: number };
  peer?: string;
  earlier?: string;
  /** The gather knobs the run was given (NN_ARENA_GATHER*, UV_THREADPOOL_SIZE). */
  env?: Record<string, string>;
  results: StreamRow[];
}

function streamSection(file: string, r: StreamFile): string[] {
  const machine = r.machine.gpu?.name ?? `${r.machine.cores}-core ${r.machine.cpu}`;
  // Whole fit (steady: from the first window's report on), over the rounds of the file.
  const ratio = (runs: StreamRow[], whole: keyof StreamRow, steady: keyof StreamRow) => {
    const w = runs.map((x) => x[whole]).filter((v): v is number => typeof v === 'number');
    const s = runs.map((x) => x[steady]).filter((v): v is number => typeof v === 'number');
    return w.length ? `${span(w, 3)}${s.length ? ` (${span(s, 3)})` : ''}` : '—';
  };
  const rows = groupBy(r.results, (x) => `${x.network}|${x.optimizer ?? 'sgd'}|${JSON.stringify(x.trainerOptions ?? {})}|${x.rows}|${x.window}`).map((runs) => {
    const x = runs[0]!;
    const options = Object.entries(x.trainerOptions ?? {})
      .map(([k, v]) => `${k} ${String(v)}`)
      .join(', ');
    const first = runs.map((y) => y.npyFirstReportMs).filter((v): v is number => typeof v === 'number');
    return [
      `${x.network} ${x.layers.join('-')}, batch ${x.batch}, ${x.optimizer ?? 'sgd'}${options ? ` (${options})` : ''}`,
      `${int(x.rows)} / ${int(x.window)} / ${x.epochs}`,
      span(runs.map((y) => y.residentMicrosPerStep)),
      ratio(runs, 'npyVsResident', 'npySteadyVsResident'),
      ratio(runs, 'iterableInOrderVsResident', 'iterableInOrderSteadyVsResident'),
      ratio(runs, 'iterableVsResident', 'iterableSteadyVsResident'),
      first.length ? span(first) : '—',
    ];
  });
  return [
    `## Streaming against resident training: ${machine}`,
    provenance(file, r),
    `Peer: ${r.peer ?? 'resident fit() on the same data'}. Streamed / resident time per step over the whole fit() (steady, from the first window's report on, in brackets). ` +
      `Environment: ${
        Object.entries(r.env ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(' ') || 'the defaults'
      }.`,
    '',
    ...table(
      [
        'network, optimizer',
        'rows / window / epochs',
        'resident µs',
        'shuffled `.npy`',
        'iterable in order',
        'iterable, shuffle buffer',
        'first report from `.npy`, ms',
      ],
      rows,
      2,
    ),
    ...(r.earlier ? ['', r.earlier] : []),
    '',
  ];
}

// ---- ops-<machine>.json: bench/ops.mjs (and bench/ops_torch.py) ----

interface OpsFile extends Provenance {
  machine: string;
  what: string;
  nnArena: Array<{ precision: string; wallStepUs: number; secondsStepUs: number }>;
  pytorch: { version: string; rows: Array<{ precision: string; mode: string; wallStepUs: number }> };
}

/** The ops network's step by fit's wall clock, one heading and a line a machine (the README keeps
 *  to 200 lines): per precision nn-arena's (its seconds in brackets) against PyTorch graphed and
 *  eager in the same call (a CPU machine: eager alone, the ratio against it); what the network
 *  and the clock are stays in the JSON's `what`. */
function opsSection(files: Array<{ f: string; json: unknown }>): string[] {
  return [
    "## Layers beyond dense (issue 48's tabular network, fit's wall clock a step)",
    ...files.map(({ f, json }) => `- ${(json as OpsFile).machine}: ${opsLine(f, json as OpsFile)}`),
    '',
  ];
}

function opsLine(file: string, r: OpsFile): string {
  const torch = (p: string, mode: string) => r.pytorch.rows.find((q) => q.precision === p && q.mode === mode)?.wallStepUs;
  const parts = r.nnArena.map((q) => {
    const g = torch(q.precision, 'graphed'),
      e = torch(q.precision, 'eager');
    const peer =
      g !== undefined
        ? ` against ${fix(g)} graphed (${(g / q.wallStepUs).toFixed(2)}x)${e === undefined ? '' : `, ${int(e)} eager`}`
        : e !== undefined
          ? ` against ${int(e)} eager (${(e / q.wallStepUs).toFixed(2)}x)`
          : '';
    return `${q.precision} ${fix(q.wallStepUs)} µs (${fix(q.secondsStepUs)})${peer}`;
  });
  return `${provenance(file, r)} nn-arena (Trainer seconds) against PyTorch ${r.pytorch.version}: ${parts.join('; ')}.`;
}

// ---- userpath-<machine>.json: bench/userpath.mjs (and bench/userpath_torch.py) ----

interface UserpathRow {
  net: string;
  call: string;
  wallUs: number[];
  secondsUs?: number[];
  note?: string;
}
interface Userpath extends Provenance {
  machine: string;
  what: string;
  nnArena: UserpathRow[];
  pytorch?: { version: string; rows: UserpathRow[] };
  npmStart?: { wallSeconds: number[]; trainingSeconds: number; processWallMs?: number[] };
}

/** The wall clock of the user's calls, one row per call and two columns per network: nn-arena's
 *  median with the Trainer's seconds in brackets, and PyTorch's of the same call (its eager call
 *  of that name) beside it; PyTorch's calls that nn-arena has no row for below. Each call's
 *  spread over its repeats, and the figures before issue 47, stay in the JSON. */
function userpathSection(file: string, r: Userpath): string[] {
  const torch = r.pytorch?.rows ?? [];
  const nets = [...new Set([...r.nnArena, ...torch].map((q) => q.net))];
  const us = (v: number) => (v < 1000 ? fix(v) : int(v));
  const cell = (q: UserpathRow | undefined) =>
    q ? `${us(median(q.wallUs))}${q.secondsUs ? ` (${us(median(q.secondsUs))})` : ''}${q.note ? `; ${q.note}` : ''}` : '—';
  const eagerOf = (call: string) => torch.filter((q) => q.call === `${call}, eager`);
  const matched = new Set(r.nnArena.flatMap((q) => eagerOf(q.call)));
  const rows = (list: UserpathRow[], who: string, peer: boolean) =>
    groupBy(list, (q) => q.call).map((calls) => [
      who,
      calls[0]!.call,
      ...nets.flatMap((n) => {
        const mine = cell(calls.find((q) => q.net === n));
        if (!r.pytorch) return [mine];
        return peer ? [mine, cell(eagerOf(calls[0]!.call).find((q) => q.net === n))] : ['—', mine];
      }),
    ]);
  return [
    `## User calls, wall clock: ${r.machine}`,
    `${provenance(file, r)} ${r.what}`, // one paragraph either way: a line less of the README's 200
    '',
    ...table(
      ['who', 'call', ...nets.flatMap((n) => [`${n}: wall µs (Trainer seconds)`, ...(r.pytorch ? [`${n}: PyTorch ${r.pytorch.version}`] : [])])],
      [
        ...rows(r.nnArena, 'nn-arena', true),
        ...(r.pytorch
          ? rows(
              torch.filter((q) => !matched.has(q)),
              `PyTorch ${r.pytorch.version}`,
              false,
            )
          : []),
      ],
      2,
    ),
    '',
    ...(r.npmStart
      ? [
          `\`npm start\` (node dist/cli.js train): ${r.npmStart.wallSeconds.map((s) => `${s} s`).join(' / ')} of wall time as the CLI reports it (the first run makes the MNIST cache), ${r.npmStart.trainingSeconds} s of it training${r.npmStart.processWallMs ? `; the whole process timed from outside (Node's start, loading the package, CUDA's start): ${r.npmStart.processWallMs.map((s) => `${s} ms`).join(' / ')}` : ''}.`,
          '',
        ]
      : []),
  ];
}

// ---- data-parallel-*.json: bench/readme-parallel.ts ----

// ---- torch-memory-<gpu>.json: bench/torch_memory.py ----

interface TorchMemory extends Provenance {
  machine: string;
  torch: string;
  rows: Array<{
    network: string;
    layers: number[];
    batch: number;
    optimizer: string;
    dtype: string;
    precision?: string;
    stages: Array<{ stage: string; peak?: number; allocated: number }>;
  }>;
}

/** PyTorch's peak per network and optimizer, one section for every torch-memory file (a line a
 *  file: the README stays short). The comparison with nn-arena's estimate of it needs the built
 *  package (bench/torch-memory-compare.mjs), so the README names it instead. */
function torchMemorySection(files: Array<{ f: string; json: unknown }>): string[] {
  return [
    "## PyTorch's training memory per stage",
    "The highest peak over a step's stages (MB, cuBLAS workspaces subtracted). `node bench/torch-memory-compare.mjs bench/results/<file>` sets every stage beside nn-arena's estimate (nn-arena/tools, estimatePytorchMemory; [memory report](../../docs/memory-report.md)).",
    ...files.map(({ f, json }) => `- ${(json as TorchMemory).machine}: ${torchMemoryLine(f, json as TorchMemory)}`),
    '',
  ];
}

function torchMemoryLine(file: string, r: TorchMemory): string {
  const optimizers = [...new Set(r.rows.map((x) => x.optimizer))];
  const rows = groupBy(r.rows, (x) => `${x.network}|${x.dtype}|${x.precision ?? 'fp32'}`).map((runs) => {
    const x = runs[0]!;
    const peak = (o: string) => {
      const run = runs.find((y) => y.optimizer === o);
      return run ? mb(Math.max(...run.stages.map((s) => s.peak ?? s.allocated)), 3) : '—';
    };
    return [
      `${x.network} ${x.layers.join('-')}, batch ${x.batch}`,
      `${x.dtype}${x.precision && x.precision !== 'fp32' ? ` ${x.precision}` : ''}`,
      ...optimizers.map(peak),
    ];
  });
  return `${provenance(file, r)} PyTorch ${r.torch}, peak MB (${optimizers.join(' / ')}): ${rows.map(([net, dtype, ...peaks]) => `${net}, ${dtype}: ${peaks.join(' / ')}`).join('; ')}.`;
}

// ---- optimizer-step-<machine>.json: bench/optimizer-step.mjs ----

interface OptimizerStep extends Provenance {
  machine: string;
  backend: string;
  network: string;
  batch: number;
  rounds: number;
  load: [number, number];
  rows: Array<{ config: string; path: string; medianMicrosPerStep: number; minMicrosPerStep: number; ratioToAdam: number }>;
}

function optimizerStepSection(file: string, r: OptimizerStep): string[] {
  return [
    `## Optimizer step against Adam: ${r.machine}`,
    provenance(file, r),
    `${r.network}, batch ${r.batch}, ${r.backend} backend, ${r.rounds} interleaved rounds; load average ${r.load.join(' -> ')} (the ratio is the figure: other load hits every config alike). ` +
      `Median µs/step (min; median / Adam's): ${r.rows.map((x) => `${x.config} (${x.path}) ${fix(x.medianMicrosPerStep)} (${fix(x.minMicrosPerStep)}; ${fix(x.ratioToAdam, 3)})`).join(', ')}.`,
    '',
  ];
}

// ---- export_check.json: bench/export_check.py ----

interface ExportCheck extends Provenance {
  machine: string;
  torch: string;
  ok: boolean;
  rows: Array<{ network: string; dtype: string; reader: string; device: string; maxAbsDiff: number; tolerance: number; ok: boolean }>;
}

function exportCheckSection(file: string, r: ExportCheck): string[] {
  const byDtype = groupBy(r.rows, (x) => x.dtype).map(
    (rows) => `${rows[0]!.dtype} max |diff| ${Math.max(...rows.map((x) => x.maxAbsDiff)).toExponential(1)} (tolerance ${rows[0]!.tolerance.toExponential(0)})`,
  );
  const failed = r.rows.filter((x) => !x.ok).length;
  return [
    `## Exported models in PyTorch: ${r.machine}`,
    provenance(file, r),
    `PyTorch ${r.torch} loads nn-arena's safetensors exports into nn.Sequential (or the NnArena module of docs/ops.md) and reproduces its predictions: ${new Set(r.rows.map((x) => x.network)).size} networks, ` +
      `readers ${[...new Set(r.rows.map((x) => x.reader))].join(' and ')}, devices ${[...new Set(r.rows.map((x) => x.device))].join(' and ')}; ` +
      `${failed ? `**${failed} of ${r.rows.length} cases failed**` : `all ${r.rows.length} cases within tolerance`}: ${byDtype.join(', ')}.`,
    '',
  ];
}

/** Items grouped by key, groups in the order their first item came. */
function groupBy<T>(items: T[], key: (item: T) => string): T[][] {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return [...groups.values()];
}
