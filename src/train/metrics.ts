// metrics.ts: what runs report, read from the stats region (32 bytes per model).
import type { View } from '../arena/arena.js';
import { STATS } from '../layout/header.js';

export interface Metrics {
  /** One model: its mean loss and accuracy. K models: the mean of the models' values. */
  loss: number;
  accuracy: number;
  /** K-model arenas only: model m's mean loss and accuracy (NaN loss once it diverged). */
  losses?: number[];
  accuracies?: number[];
  /** K-model arenas only: whether model m diverged (a non-finite loss or weights; its training stopped
   *  at that step, as a run of it alone would). One model throws DIVERGED instead. */
  diverged?: boolean[];
}

/** Mean loss and accuracy from the accumulators of one stats region. */
export const metricsOf = (s: View): Metrics => ({ loss: s[STATS.loss]! / s[STATS.rows]!, accuracy: s[STATS.correct]! / s[STATS.rows]! });

/** One model's metrics as they are; K models' as the mean plus per-model arrays. */
export function combine(per: Metrics[], diverged: boolean[]): Metrics {
  // A diverged model's loss is NaN also when its weights, not its last loss, went non-finite.
  per = per.map((m, i) => (diverged[i] ? { ...m, loss: NaN } : m));
  if (per.length === 1) return per[0]!;
  const mean = (f: (m: Metrics) => number) => per.reduce((a, m) => a + f(m), 0) / per.length;
  return { loss: mean((m) => m.loss), accuracy: mean((m) => m.accuracy), losses: per.map((m) => m.loss), accuracies: per.map((m) => m.accuracy), diverged };
}
