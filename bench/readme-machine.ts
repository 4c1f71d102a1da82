// readme-machine.ts: the README section of one `npm run bench` results file (<machine>.json):
// transfers, training steps, memory, the device budget and the CPU backend. The headline rows
// only; every row stays in the JSON.
import { fix, mb, provenance, table } from './format.js';
import type { CpuResults } from './cpu.js';
import type { Machine } from './machine.js';
import type { MemoryRow } from './memory.js';
import type { Results } from './results-file.js';
import type { StepRow } from './steps.js';
import type { TransferRow } from './transfers.js';
import type { UmResults } from './um.js';

export function machineSection(file: string, r: Results): string[] {
  const parts = partDates(r);
  return [
    `## \`npm run bench\`: ${r.machine.name}`,
    `${describe(r.machine)} Parts measured: ${parts.map(([p, d]) => `${p} ${d.slice(0, 10)}${r.partCommits?.[p] ? ` (${r.partCommits[p]})` : ''}`).join(', ')}${r.quick ? ' (quick mode)' : ''}.`,
    provenance(file, r, `npm run bench -- --only ${parts.map(([p]) => p).join(',')} --machine ${r.machine.name}`),
    '',
    ...transfersTable(r.transfers),
    ...stepsTable(currentSteps(r), r.steps.length),
    ...memoryTable(r.memory),
    ...umSection(r.um),
    ...cpuSection(r.cpu),
  ];
}

function describe(m: Machine): string {
  const gpu = m.gpu ? `GPU ${m.gpu} (compute ${m.computeCapability}), driver ${m.driver}, CUDA runtime ${m.cudaRuntime}; ` : 'No GPU (CPU backend); ';
  return `${gpu}CPU ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB; Node ${m.node}.`;
}

/** A run of some parts (--only) keeps the others' figures, so each part has its own date. */
function partDates(r: Results): Array<[string, string]> {
  return Object.entries(r.partDates ?? Object.fromEntries(r.parts.map((p) => [p, r.date])));
}

/** The smallest and the largest arena, each method a column: what one transfer of the whole
 *  arena gains over its regions as separate buffers, beside the raw copy of the same bytes. */
function transfersTable(rows: TransferRow[]): string[] {
  if (!rows.length) return [];
  const arenas = [...new Set([rows[0]!.arena, rows[rows.length - 1]!.arena])];
  const methods = [
    ['raw copy, pinned', (m: string) => m === 'raw copy, pinned'],
    ['arena, 1 transfer, pinned', (m: string) => m === 'arena, 1 transfer, pinned'],
    ['fragmented', (m: string) => m.startsWith('fragmented')],
    ['raw copy, pageable', (m: string) => m === 'raw copy, pageable'],
    ['arena, 1 transfer, pageable', (m: string) => m === 'arena, 1 transfer, pageable'],
  ] as const;
  const shown = methods.filter(([, is]) => rows.some((t) => is(t.method)));
  const cell = (t: TransferRow | undefined) => (t ? `${fix(t.gbps, 2)}${t.method.startsWith('fragmented') ? ` (${t.transfers} buffers)` : ''}` : '—');
  const body = arenas.flatMap((arena) =>
    (['toDevice', 'toHost'] as const).map((dir) => {
      const of = rows.filter((t) => t.arena === arena && t.direction === dir);
      return [arena, dir, ...shown.map(([, is]) => cell(of.find((t) => is(t.method))))];
    }),
  );
  return [
    `### Transfers, GB/s (mean of benny samples; ${new Set(rows.map((t) => t.arena)).size} arena sizes in the file)`,
    ...table(['arena', 'direction', ...shown.map(([name]) => name)], body, 2),
    '',
  ];
}

/** The steps part's rows, less its CPU rows where the CPU part (bench/cpu.ts: the same steps,
 *  beside PyTorch CPU) was measured later: those rows are history, and the JSON keeps them. */
function currentSteps(r: Results): StepRow[] {
  const cpuLater = r.cpu && (r.partDates?.cpu ?? '') > (r.partDates?.steps ?? '');
  return cpuLater ? r.steps.filter((s) => s.backend !== 'cpu') : r.steps;
}

/** SGD and Adam side by side: one row per network and backend. */
function stepsTable(steps: StepRow[], inFile: number): string[] {
  if (!steps.length) return inFile ? [`Training steps: the CPU part below, measured later (the steps part's ${inFile} older rows stay in the JSON).`, ''] : [];
  const keys = [...new Set(steps.map((s) => `${s.network}|${s.backend}`))];
  const pair = (of: StepRow[], f: (s: StepRow) => string) =>
    ['sgd', 'adam']
      .map((o) => {
        const s = of.find((x) => x.optimizer === o);
        return s ? f(s) : '—';
      })
      .join(' / ');
  const torch = (mode: 'eager' | 'graph') => (s: StepRow) =>
    s.torch?.[mode] === undefined ? '—' : `${fix(s.torch[mode]!)} (${fix(s.torch[mode]! / s.microsPerStep, 2)}×)`;
  const withTorch = steps.some((s) => s.torch);
  const body = keys.map((k) => {
    const of = steps.filter((s) => `${s.network}|${s.backend}` === k);
    const s = of[0]!;
    const path = s.path && s.path !== s.backend ? ` (${s.path})` : '';
    return [
      `${s.network} ${s.layers.join('-')}`,
      `${s.backend}${path}`,
      String(s.batch),
      pair(of, (x) => fix(x.microsPerStep)),
      pair(of, (x) => fix(x.tflops, 3)),
      ...(withTorch ? [pair(of, torch('eager')), pair(of, torch('graph'))] : []),
    ];
  });
  const version = steps.find((s) => s.torch)?.torch?.version;
  return [
    '### Training step (Trainer.fit over a resident data set), SGD / Adam',
    ...table(
      ['network', 'backend (path)', 'batch', 'µs/step', 'TFLOP/s', ...(withTorch ? ['PyTorch eager µs (×)', 'PyTorch CUDA graph µs (×)'] : [])],
      body,
      2,
    ),
    ...(version
      ? [
          '',
          `PyTorch ${version}: float32, TF32 off, full steps on GPU-resident tensors, eager and replayed as a CUDA graph (bench/torch_ref.py, same call). × = PyTorch time / nn-arena time.`,
        ]
      : []),
    '',
  ];
}

/** Planned against taken, one column per network and optimizer. */
function memoryTable(rows: MemoryRow[]): string[] {
  if (!rows.length) return [];
  const inexact = rows.filter((x) => !x.exact).map((x) => `${x.network} ${x.optimizer}`);
  const line = (name: string, f: (x: MemoryRow) => number | null) => [
    name,
    ...rows.map((x) => {
      const v = f(x);
      return v === null ? '—' : mb(v, 2);
    }),
  ];
  const device = rows.some((x) => x.deviceTakenBytes !== null);
  return [
    `### Memory, MB: planned (sum by kind = the header's total: ${inexact.length ? `**not** in ${inexact.join(', ')}` : 'exact in every column'}) and taken${device ? " (device: the drop in cudaMemGetInfo's free memory, which the driver hands out in 2 MiB pages: a small arena can land in a page it holds)" : ''}`,
    ...table(
      ['', ...rows.map((x) => `${x.network} ${x.optimizer}`)],
      [
        line('planned', (x) => x.plannedBytes),
        ...(device ? [line('device taken', (x) => x.deviceTakenBytes)] : []),
        line('host RSS growth', (x) => x.hostRssGrowthBytes),
      ],
    ),
    '',
  ];
}

function umSection(u: UmResults | null | undefined): string[] {
  if (!u) return [];
  const ms = (us: number) => fix(us / 1000, 2);
  const ok = (ratio: number, target: number) => `${fix(ratio, 3)} ${ratio <= target ? '(met)' : '(**missed**)'}`;
  // The modes as shipped in the table; the scheduler's knob variants (NN_ARENA_UM_*) in one line.
  const main = u.rows.filter((r) => r.variant === '' || r.variant === 'as shipped');
  const variants = u.rows.filter((r) => !main.includes(r));
  const row = (r: UmResults['rows'][number]) =>
    r.error
      ? [r.mode, r.variant || '—', `failed: ${r.error.replace(/\|/g, '/')}`, '', '', '', '', '']
      : [
          r.mode,
          r.variant || '—',
          String(r.steps),
          ms(r.microsPerStep),
          fix(r.microsPerStep / u.bounds.residentMicros, 3),
          mb(r.peakDeviceBytes),
          r.scheduledPeakBytes === null || r.scheduledPeakBytes === undefined ? '—' : mb(r.scheduledPeakBytes),
          r.toDevicePerStep === null ? '—' : `${mb(r.toDevicePerStep)} / ${mb(r.toHostPerStep!)}`,
        ];
  return [
    `### Device budget: ${u.network}, batch ${u.batch}, ${u.optimizer}, budget 25% of the arena`,
    `Arena ${mb(u.arenaBytes)} MB, budget ${mb(u.budget)} MB. Link (256 MiB, this run): pinned copy ${fix(u.link.copyToDevice)} / ${fix(u.link.copyToHost)} GB/s to device / host, ` +
      `prefetch ${fix(u.link.prefetchToDevice)} / ${fix(u.link.prefetchToHost)} GB/s. After a round trip to the device and back, ${mb(u.link.prefetchRetainedBytes ?? 0)} MB of device memory stayed taken for a ${mb(u.link.bytes)} MB range.`,
    '',
    ...table(
      ['mode', 'variant', 'steps', 'ms/step', 'vs resident', 'device peak measured (MB)', 'planned peak (MB)', 'moved in / out per step (MB)'],
      main.map(row),
      2,
    ),
    '',
    `${variants.length ? `Scheduler variants, ms/step: ${variants.map((r) => `${r.variant} ${r.error ? 'failed' : ms(r.microsPerStep)}`).join('; ')}. ` : ''}Bounds: resident ${ms(u.bounds.residentMicros)} ms/step; at least ${mb(u.mustCross.toDevice)} MB in and ${mb(u.mustCross.toHost)} MB out must cross the link per step: ` +
      `${ms(u.bounds.linkMicrosCopy)} ms at the copy rates. ` +
      `Scheduler / larger bound: ${ok(u.ratios.schedulerToLargerBound, u.targets.schedulerToLargerBound)} (target <= ${u.targets.schedulerToLargerBound}); ` +
      `scheduler / staging: ${ok(u.ratios.schedulerToStaged, u.targets.schedulerToStaged)} (target <= ${u.targets.schedulerToStaged}).${evictionFloor(u)}`,
    '',
  ];
}

/** What eviction alone costs managed memory. It keeps no host copy of what it migrated, so in a
 *  steady state every live byte that comes in (all but the data set's rows, read in place) went
 *  out by a prefetch to the host before: weights between steps, activations between the forward
 *  and the backward pass. That many bytes at the best prefetch-to-host rate measured is a floor
 *  for any managed plan; the shipped scheduler's own write-backs, another. */
function evictionFloor(u: UmResults): string {
  const row = u.rows.find((r) => r.mode === 'scheduler' && r.variant === 'as shipped');
  const rate = Math.max(u.link.prefetchToHost, u.link.prefetchToHost4 ?? 0);
  if (!row || row.toHostPerStep === null || !(rate > 0)) return '';
  const L = u.layers.length - 1;
  const rows = u.samples > 0 ? u.batch * (u.layers[0]! + u.layers[L]!) * 4 : 0; // float32 (UM_SPEC)
  const mustLeave = Math.max(0, u.mustCross.toDevice - rows);
  const ms = (bytes: number) => bytes / rate / 1e6;
  const target = (u.targets.schedulerToLargerBound * u.bounds.largerMicros) / 1e3;
  return (
    ' ' +
    `Eviction floor of managed memory: at least ${mb(mustLeave)} MB per step must leave the device by prefetch (what must come in, less the rows read in place); ` +
    `at the best prefetch-to-host rate above (${fix(rate)} GB/s) that is ${fix(ms(mustLeave), 2)} ms/step for any managed plan, against ${fix(target, 2)} ms for the target; ` +
    `the scheduler's ${mb(row.toHostPerStep)} MB take ${fix(ms(row.toHostPerStep), 2)} ms. ` +
    'The device memory the driver keeps for managed ranges after they went back to the host: bench/micro/um_release.cu (`bash scripts/gpu-session.sh release`).'
  );
}

/** The CPU backend against the machine: the FMA peak, the largest network's GEMM shapes, the
 *  steps beside PyTorch CPU, and issue 16's targets (the missed ones named). */
function cpuSection(c: CpuResults | null | undefined): string[] {
  if (!c) return [];
  const g = c.gemm;
  const largest = typeof g === 'string' ? [] : g.rows.filter((r) => r.network === g.rows[g.rows.length - 1]!.network);
  const gemm =
    typeof g === 'string'
      ? g
      : `FMA peak (float32, ${g.isa === 'avx512' ? 'AVX-512' : 'AVX2'} FMA loop, same run): ${fix(g.fmaPeak)} GFLOP/s on ${g.threads} threads. ` +
        `GEMM on ${largest[0]?.network ?? '—'}'s shapes (best of repeats): ${largest.map((r) => `${r.product} ${fix(r.gflops)} GFLOP/s (${fix((100 * r.gflops) / g.fmaPeak, 0)}% of peak; ${g.blas ?? 'system BLAS'} ${r.blasGflops === null ? '—' : fix(r.blasGflops)})`).join(', ')}.`;
  const nets = [...new Set(c.steps.map((s) => s.network))];
  const pair = (net: string, f: (s: StepRow) => string) =>
    ['sgd', 'adam']
      .map((o) => {
        const s = c.steps.find((x) => x.network === net && x.optimizer === o);
        return s ? f(s) : '—';
      })
      .join(' / ');
  const missed = c.targets.filter((t) => !t.met);
  return [
    '### CPU backend against the machine (GEMM, FMA peak, PyTorch CPU), SGD / Adam',
    `${c.threads} threads; ${c.torch}. Load average ${fix(c.load[0], 2)} at the start, ${fix(c.load[1], 2)} at the end (other processes share these cores: figures measured under load are lower bounds). ${gemm}`,
    '',
    ...table(
      ['network', 'ms/step', 'GFLOP/s', 'PyTorch CPU ms/step', '× (PyTorch / nn-arena)'],
      nets.map((net) => {
        const s = c.steps.find((x) => x.network === net)!;
        return [
          `${net} ${s.layers.join('-')}, batch ${s.batch}`,
          pair(net, (x) => fix(x.microsPerStep / 1e3, 3)),
          pair(net, (x) => fix(x.tflops * 1e3)),
          pair(net, (x) => (x.torch ? fix(x.torch.eager / 1e3, 3) : '—')),
          pair(net, (x) => (x.torch ? fix(x.torch.eager / x.microsPerStep, 2) : '—')),
        ];
      }),
    ),
    '',
    `Targets (issue 16): ${c.targets.length - missed.length} of ${c.targets.length} met${missed.length ? `; missed: ${missed.map((t) => `${t.target} (${t.figure})`).join('; ')}` : ''}. ` +
      'Where one is missed, profile the run (perf stat, perf record) and keep the profile outside the repository (bench/.tmp/ is git-ignored).',
    '',
  ];
}
