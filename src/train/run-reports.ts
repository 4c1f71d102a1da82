// run-reports.ts: what a Trainer reads back about its runs (the Runner, runner.ts, extends it):
// the stats region and the metrics in it, each step's gradient norm, the loss scale and the steps
// it skipped, the learning rate of a step, and what a diverged step means.
import { handleOf, type RunTarget, type View } from '../arena/arena.js';
import { scheduledLr } from './optimizer-options.js';
import { combine, metricsOf, type Metrics } from './metrics.js';
import { InputReader } from './inputs.js';
import type { TrainerSettings } from './options.js';
import { STATS } from '../layout/header.js';

export class RunReports extends InputReader {
  readonly settings: TrainerSettings;

  /** precision 'fp16': the loss scale, its growth tracker, and the steps skipped (all runs). */
  readonly scaler = { scale: 0, good: 0, skipped: 0 };

  constructor(target: RunTarget, settings: TrainerSettings) {
    super(target);
    this.settings = settings;
    this.resetScaler();
  }

  /** The loss scale back at its start (a new Trainer, init()). */
  resetScaler(): void {
    Object.assign(this.scaler, { scale: Math.fround(this.settings.lossScale?.init ?? 0), good: 0, skipped: 0 }); // float32, as GradScaler's (loss_scale.h)
  }

  /** The learning rate of 0-based optimizer step `step` (model `model`'s base where models have
   *  their own), under the schedule: the native lrAt. */
  learningRate(step: number, model = 0): number {
    const o = this.settings.opt;
    return scheduledLr(o, o.lrs ? o.lrs[model]! : o.lr, Math.max(0, step));
  }

  /** With clipping: each step's global gradient norm of the last training run (s * K + m). */
  gradNorms(): number[] {
    return this.settings.opt.clipGradNorm > 0 ? Array.from(handleOf(this.arena).gradNorms()) : [];
  }

  /** What a progress report adds to the metrics where the options ask for it: each step's
   *  gradient norm (clipping; `norms` where the run brought them back), the loss scale and the
   *  steps it skipped (precision 'fp16'). */
  progressExtras(norms?: number[]): { gradNorms?: number[]; lossScale?: number; skippedSteps?: number } {
    return {
      ...(this.settings.opt.clipGradNorm > 0 ? { gradNorms: norms ?? this.gradNorms() } : {}),
      ...(this.settings.lossScale ? { lossScale: this.scaler.scale, skippedSteps: this.scaler.skipped } : {}),
    };
  }

  /** Every model's stats region (one transfer: the K copies are one range); `onHost`: as the
   *  host side holds it (a run brought it back: runRows). */
  stats(onHost = false): View[] {
    const L = this.last;
    if (!onHost) this.arena.toHost({ layers: [L], kinds: ['stats'] });
    return Array.from({ length: this.models }, (_, m) => this.arena.view(L, 'stats', m));
  }

  /** What to do about a diverged step: lower the learning rate, or (with an embedding) check x's
   *  category indices, which make a row's outputs NaN where they name no row of a table. */
  get divergedHint(): string {
    const embedding = this.arena.plan.spec.ops?.[0]?.op === 'embedding';
    return embedding ? 'lower the learning rate, or check that every category index of x is an integer in [0, cardinality)' : 'lower the learning rate';
  }

  /** Whether model m's last run marked a bad step: a non-finite loss, or weights or biases left
   *  non-finite (native, after each step or run), as the stats region read last says. */
  diverged(m: number): boolean {
    return this.arena.view(this.last, 'stats', m)[STATS.badStep]! >= 0;
  }

  readStats(onHost = false): Metrics {
    const stats = this.stats(onHost);
    return combine(
      stats.map(metricsOf),
      stats.map((s) => s[STATS.badStep]! >= 0),
    );
  }
}
