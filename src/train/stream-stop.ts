// stream-stop.ts: how a streaming fit (src/train/stream-fit.ts) stops waiting on a source that
// may never answer. An iterable's next() is awaited through `source()`, which rejects as soon as
// the fit's signal aborts, the arena is disposed or the fit has ended for another reason (an
// error of a window run ahead of a fill); the source's cleanup (its iterator's return(), where
// the user's finally blocks run) is awaited through `cleanup()`, which only dispose() cuts short.
// Each wait is its own entry, dropped once it settles: a long fit leaves no reactions behind.
import { abortError, ArenaError } from '../core/errors.js';

type Waiter = { reject: (e: unknown) => void; cleanup: boolean };

export class StreamStop {
  readonly #waiters = new Set<Waiter>();
  readonly #signal: AbortSignal | undefined;
  readonly #onAbort = () => this.#stop(abortError('fit', this.#signal!), false);
  #stopped: unknown;
  #disposed: unknown;

  constructor(signal: AbortSignal | undefined) {
    this.#signal = signal;
    if (signal?.aborted)
      this.#onAbort(); // while the fit was queued: its fills ask nothing
    else signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  /** The arena was disposed: every wait, the cleanup's too, rejects with DISPOSED. */
  dispose(): void {
    this.#stop(new ArenaError('DISPOSED', 'the arena was disposed'), true);
  }

  /** The fit has ended (its own error or result stands): waits on the source reject. */
  end(): void {
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#stop(new ArenaError('ABORTED', 'fit: ended'), false);
  }

  /** What `ask` gives (the source's next value), or the reason the fit stopped waiting; once
   *  stopped, the source is not asked. */
  source<T>(ask: () => T | PromiseLike<T>): Promise<Awaited<T>> {
    if (this.#stopped !== undefined) return Promise.reject(this.#stopped);
    let p: T | PromiseLike<T>;
    try {
      p = ask();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#race(p, false);
  }

  /** `p` (the source's cleanup), unless the arena is disposed first. */
  cleanup<T>(p: T | PromiseLike<T>): Promise<Awaited<T>> {
    if (this.#disposed !== undefined) {
      void Promise.resolve(p).catch(() => {}); // its own rejection, if any, is not the fit's
      return Promise.reject(this.#disposed);
    }
    return this.#race(p, true);
  }

  #stop(e: unknown, all: boolean): void {
    this.#stopped ??= e;
    if (all) this.#disposed ??= e;
    for (const w of this.#waiters) {
      if (all || !w.cleanup) {
        this.#waiters.delete(w);
        w.reject(e);
      }
    }
  }

  #race<T>(p: T | PromiseLike<T>, cleanup: boolean): Promise<Awaited<T>> {
    return new Promise<Awaited<T>>((resolve, reject) => {
      const w: Waiter = { reject, cleanup };
      this.#waiters.add(w);
      Promise.resolve(p).then(
        (v) => {
          this.#waiters.delete(w);
          resolve(v as Awaited<T>);
        },
        (e) => {
          this.#waiters.delete(w);
          reject(e);
        },
      );
    });
  }
}
