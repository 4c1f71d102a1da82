// state.ts: what the Trainers of one arena share about it (several Trainers may train one
// arena; their runs queue on the arena's own RunQueue, src/run-queue.ts).
import type { Arena } from '../arena.js';

/** The rows of the resident data set as uploaded: the device holds exactly the host bytes of
 *  these rows while the host bytes still have these checksums (src/train/resident.ts). */
export interface ResidentRows {
  count: number;
  /** CRC-32C of the host bytes of xdata rows [0, count) at upload. */
  xCrc: number;
  /** CRC-32C of ydata rows [0, count); undefined when those rows were not uploaded with x. */
  yCrc: number | undefined;
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
