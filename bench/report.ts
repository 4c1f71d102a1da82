// report.ts: bench/results/<machine>.json, the figures of `npm run bench` on one machine; a run of
// some parts (--only) keeps the other parts' figures. bench/results/README.md is rebuilt from
// every results file after each run (bench/readme.ts).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CpuResults } from './cpu.js';
import type { Machine } from './machine.js';
import type { MemoryRow } from './memory.js';
import { renderReadme } from './readme.js';
import type { StepRow } from './steps.js';
import type { TransferRow } from './transfers.js';
import type { UmResults } from './um.js';

export type Part = 'transfers' | 'steps' | 'memory' | 'um' | 'cpu';

export interface Results {
  machine: Machine;
  date: string;
  quick: boolean;
  command: string;
  /** The commit the run measured (null outside a git checkout; absent in files written before it was recorded). */
  commit?: string | null;
  /** When each part's figures were measured (a run of some parts keeps the others'). */
  partDates?: Record<string, string>;
  /** The commit each part's figures were measured on, where it was recorded. */
  partCommits?: Record<string, string>;
  /** The parts measured in this run. */
  parts: Part[];
  transfers: TransferRow[];
  steps: StepRow[];
  memory: MemoryRow[];
  /** Training with a device budget (bench/um.ts); null where there is no CUDA device. */
  um?: UmResults | null;
  /** The CPU backend against the FMA peak, a system BLAS and PyTorch CPU (bench/cpu.ts). */
  cpu?: CpuResults | null;
}

export function writeResults(dir: string, r: Results): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${r.machine.name}.json`);
  let previous: Partial<Results> = {};
  try {
    previous = JSON.parse(readFileSync(file, 'utf8')) as Results;
  } catch {
    /* first run */
  }
  const merged: Results = { ...r };
  for (const part of ['transfers', 'steps', 'memory', 'um', 'cpu'] as const) {
    if (!r.parts.includes(part) && previous[part]) (merged as unknown as Record<string, unknown>)[part] = previous[part];
  }
  const now = (value: string | null | undefined) => Object.fromEntries(value ? r.parts.map((p) => [p, value]) : []);
  merged.partDates = { ...(previous.partDates ?? {}), ...now(r.date) };
  // A part measured now without a known commit must not keep an older run's commit.
  const kept = Object.fromEntries(Object.entries(previous.partCommits ?? {}).filter(([p]) => !r.parts.includes(p as Part)));
  merged.partCommits = { ...kept, ...now(r.commit) };
  writeFileSync(file, `${JSON.stringify(merged, null, 2)}\n`);
  renderReadme(dir);
  return file;
}
