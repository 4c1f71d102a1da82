// state.ts: what the Trainers of one arena share about it (several Trainers may train one
// arena; their runs queue on the arena's own RunQueue, src/arena/run-queue.ts).
import type { Arena } from '../arena/arena.js';
import type { Dataset } from './dataset.js';

/** The rows of the resident data set as uploaded: the device holds exactly the host bytes of
 *  these rows (src/train/resident.ts); the checksums identify the set to a resumed fit. */
export interface ResidentRows {
  count: number;
  /** CRC-32C of the host bytes of xdata rows [0, count) at upload; undefined once a call read
   *  other rows into the host side (they go up with its run). */
  xCrc: number | undefined;
  /** CRC-32C of ydata rows [0, count); undefined when those rows were not uploaded with x, or
   *  changed on the host side since. */
  yCrc: number | undefined;
  /** The Dataset handle these rows were read from, at its version (src/train/dataset.ts). */
  dataset?: Dataset;
  version?: number;
}

export interface TrainState {
  /** Until a Trainer first uploads the arena, the host side is the current one. */
  deviceStale: boolean;
  /** Optimizer steps taken on this arena's parameters (Adam's t). */
  steps: number;
  resident: ResidentRows | undefined;
  /** Rows of the last forward() whose activations are still in the arena (backward() goes
   *  back from them); undefined once another run replaced them or update() changed the weights. */
  forwardRows: number | undefined;
  /** dw/db on the device hold gradients (backward(), gradients()) that update() has not applied. */
  gradients: boolean;
}

const states = new WeakMap<Arena, TrainState>();

export function stateOf(arena: Arena): TrainState {
  let s = states.get(arena);
  if (!s) states.set(arena, (s = { deviceStale: true, steps: 0, resident: undefined, forwardRows: undefined, gradients: false }));
  return s;
}
