// readme-parallel.ts: the bench/results README's sections of data parallelism (bench/readme.ts
// renders them): data-parallel-<gpu>-x<N>.json (bench/data-parallel.mjs, one process for every
// GPU) and data-parallel-processes-*.json (bench/data-parallel-mp.mjs, one process per GPU).
import { fix, provenance, table, type Provenance } from './format.js';

interface DataParallelRow {
  net: string;
  precision?: string;
  gradients?: string;
  layers: number[];
  perGpuBatch: number;
  oneGpu: { usPerStep: number; wallUsPerStep?: number; path: string };
  oneGpuLayers: { usPerStep: number };
  group: { usPerStep: number; wallUsPerStep?: number; replicasIdentical: boolean };
  speedup: number;
  speedupWall?: number;
  allReduceShare: number;
  target: number | null;
  ddp?: { torch: string; oneGpuUsPerStep: number; groupUsPerStep: number; speedup: number };
  floor?: { allReduceUs: number; stepUs: number };
}
export interface DataParallel extends Provenance {
  machine: string;
  host: { nccl?: number };
  rows: DataParallelRow[];
  variants?: Array<{ order: string; rows: DataParallelRow[] }>;
}

export function dataParallelSection(file: string, r: DataParallel): string[] {
  // Files since the wall clock was measured lead with it (and with PyTorch DDP where it ran).
  const wall = r.rows.every((x) => x.speedupWall !== undefined);
  const ddp = r.rows.find((x) => x.ddp)?.ddp;
  // A bf16-wire row is a column of its full-wire row (among the rows of its own table: the
  // file's, or a variant's); the floor, where measured, another.
  const wires = [r.rows, ...(r.variants ?? []).map((v) => v.rows)].some((rows) => rows.some((x) => x.gradients === 'bf16'));
  const floors = r.rows.some((x) => x.floor);
  const withinFloor = (x: DataParallelRow) => (x.floor ? ` (floor +10%: ${x.group.wallUsPerStep! <= 1.1 * x.floor.stepUs ? 'met' : 'missed'})` : '');
  const row = (x: DataParallelRow, among: DataParallelRow[], label = '') => {
    const b = among.find((y) => y.gradients === 'bf16' && y.net === x.net && y.precision === x.precision);
    return [
      `${x.net} ${x.layers.join('-')}${label}`,
      ...(wall ? [`${x.precision ?? 'fp32'}`] : []),
      String(x.perGpuBatch),
      ...(wall
        ? [
            fix(x.oneGpu.wallUsPerStep!),
            fix(x.group.wallUsPerStep!),
            `${fix(x.speedupWall!, 2)}x`,
            ...(wires ? [b ? `${fix(b.group.wallUsPerStep!)} (${fix(b.speedupWall!, 2)}x)` : '—'] : []),
            ...(floors ? [x.floor ? `${fix(x.floor.stepUs)} (${fix(x.floor.allReduceUs)})` : '—'] : []),
            x.ddp ? `${fix(x.ddp.oneGpuUsPerStep)} / ${fix(x.ddp.groupUsPerStep)} (${fix(x.ddp.speedup, 2)}x)` : '—',
          ]
        : []),
      `${fix(x.oneGpu.usPerStep)} (${x.oneGpu.path})`,
      fix(x.oneGpuLayers.usPerStep),
      fix(x.group.usPerStep),
      `${fix(x.speedup, 2)}x`,
      `${fix(100 * x.allReduceShare)}%`,
      String(x.group.replicasIdentical),
      x.target ? `>= ${x.target}x ${(wall ? x.speedupWall! : x.speedup) >= x.target ? 'met' : 'missed'}${withinFloor(x)}` : '—',
    ];
  };
  const full = (rows: DataParallelRow[]) => rows.filter((x) => x.gradients !== 'bf16');
  return [
    `## Data parallelism, one process: ${r.machine}${r.host.nccl ? ` (NCCL ${ncclVersion(r.host.nccl)})` : ''}`,
    provenance(file, r),
    wall
      ? `Per-GPU batch fixed. Wall clock: of the fit() call, a step (the data set a Dataset, uploaded by a warm-up fit). Throughput: samples per second of the group over one GPU.${wires ? " bf16 wire: the group with `gradients: 'bf16'`." : ''}${floors ? " Floor: one GPU's step plus one all-reduce of the gradients (bench/allreduce_floor.py, in brackets), nothing hidden." : ''}${ddp ? ` PyTorch ${ddp.torch} DDP in the same call (one process per GPU, NCCL, gradient_as_bucket_view, fused SGD, eager), a step by the wall clock: one GPU / two.` : ''} Then the Trainer's seconds; all-reduce share: (group step - replicas stepping on their own) / group step.`
      : 'Per-GPU batch fixed. Throughput: samples per second of the group over one GPU. All-reduce share: (group step - replicas stepping on their own) / group step.',
    '',
    ...table(
      [
        'net',
        ...(wall ? ['precision'] : []),
        'per-GPU batch',
        ...(wall
          ? [
              'one GPU wall µs',
              'group wall µs',
              'throughput (wall)',
              ...(wires ? ['bf16 wire: group wall µs'] : []),
              ...(floors ? ['floor µs'] : []),
              'PyTorch DDP µs',
            ]
          : []),
        'one GPU µs (path)',
        'one GPU per-layer µs',
        'group µs',
        'throughput',
        'all-reduce share',
        'replicas identical',
        'target',
      ],
      [...full(r.rows).map((x) => row(x, r.rows)), ...(r.variants ?? []).flatMap((v) => full(v.rows).map((x) => row(x, v.rows, ` (${v.order})`)))],
      1,
    ),
    '',
  ];
}

/** NCCL_VERSION_CODE (major * 10000 + minor * 100 + patch) as the release is named. */
const ncclVersion = (code: number) => `${Math.floor(code / 10000)}.${Math.floor(code / 100) % 100}.${code % 100}`;

export interface Processes extends Provenance {
  machine: string;
  rows: Array<{ net: string; devices: number; oneGpuMicros: number; groupMicros: number; throughput: number }>;
}

export function processesSection(file: string, r: Processes): string[] {
  return [
    `## Data parallelism, one process per GPU: ${r.machine}`,
    provenance(file, r),
    `Rank 0's step, one GPU -> the group (throughput of the group over one GPU): ${r.rows.map((x) => `${x.net} ${fix(x.oneGpuMicros)} -> ${fix(x.groupMicros)} µs (${fix(x.throughput, 2)}x)`).join(', ')}.`,
    '',
  ];
}
