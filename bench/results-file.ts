// results-file.ts: what a bench/results/<machine>.json holds (written by report.ts, read by the
// README renderer).
import type { CpuResults } from './cpu.js';
import type { Machine } from './machine.js';
import type { MemoryRow } from './memory.js';
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
