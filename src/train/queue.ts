// queue.ts: what the Trainers of one arena share. Runs on one arena are queued in call order
// (a promise chain per arena, so two Trainers on one arena queue too): a run and the reads
// that follow it (stats, outputs, weights) are never interleaved with another run's.
import type { Arena } from '../arena.js';
import { ArenaError } from '../errors.js';

/** The rows of the resident data set as uploaded: the device holds exactly the host bytes of
 *  these rows while the host bytes still have these checksums (see Trainer, residency). */
export interface ResidentRows {
  count: number;
  /** CRC-32C of the host bytes of xdata rows [0, count) at upload. */
  xCrc: number;
  /** CRC-32C of ydata rows [0, count); undefined when those rows were not uploaded with x. */
  yCrc: number | undefined;
}

export interface ArenaState {
  /** Settles when the last queued job has; never rejects. */
  tail: Promise<void>;
  /** Jobs queued or running. */
  pending: number;
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

const states = new WeakMap<Arena, ArenaState>();

export function stateOf(arena: Arena): ArenaState {
  let s = states.get(arena);
  if (!s) states.set(arena, (s = { tail: Promise.resolve(), pending: 0, deviceStale: true, steps: 0, resident: undefined, forwardRows: undefined, gradients: false }));
  return s;
}

/** Runs `job` once every job queued before it on `arena` has settled. */
export function enqueue<T>(arena: Arena, job: () => Promise<T>): Promise<T> {
  const s = stateOf(arena);
  s.pending++;
  const result = s.tail.then(job);
  const done = () => { s.pending--; };
  s.tail = result.then(done, done);
  return result;
}

/** Synchronous host edits and reads (init, save, syncToHost) cannot wait for the queue: with
 *  a run queued or in flight they would race it, so they are refused. */
export function assertIdle(arena: Arena, what: string): void {
  if (stateOf(arena).pending > 0) {
    throw new ArenaError('BUSY', `${what}: a run is queued or in flight on this arena; await it first`);
  }
}
