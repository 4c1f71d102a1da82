// run-queue.ts: the order of the work on one arena. Each Arena owns one RunQueue (a promise
// chain): Trainer runs and kernel launches on an arena, from any number of Trainers, run in
// call order, and a run and the reads that follow it (stats, outputs, weights) are never
// interleaved with another run's.
import { ArenaError } from '../core/errors.js';

export class RunQueue {
  /** Settles when the last queued job has; never rejects. */
  #tail: Promise<void> = Promise.resolve();
  /** Jobs queued or running. */
  #pending = 0;

  get pending(): number {
    return this.#pending;
  }

  /** Runs `job` once every job queued before it has settled. */
  enqueue<T>(job: () => Promise<T>): Promise<T> {
    this.#pending++;
    const result = this.#tail.then(job);
    const done = () => {
      this.#pending--;
    };
    this.#tail = result.then(done, done);
    return result;
  }

  /** Resolves once nothing is queued or in flight (jobs queued meanwhile included). */
  async drain(): Promise<void> {
    while (this.#pending > 0) await this.#tail;
  }

  /** Synchronous host edits and reads (init, save, syncToHost) cannot wait for the queue: with
   *  a job queued or in flight they would race it, so they are refused. */
  assertIdle(what: string): void {
    if (this.#pending > 0) throw new ArenaError('BUSY', `${what}: a run is queued or in flight on this arena; await it first`);
  }
}
