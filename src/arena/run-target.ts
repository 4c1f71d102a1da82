// run-target.ts: what a Trainer trains, an Arena or a DataParallel group of them, as the one
// interface both register (src/arena/arena.ts, src/parallel/data-parallel.ts), so that the Trainer
// never asks which of the two it holds. Generic in the arena type: this file must not import
// the Arena (arena.ts imports it); src/arena/arena.ts names RunTarget<Arena>.
import { ArenaError, OptionError } from '../core/errors.js';
import type { RunParams, RunPath } from '../native/addon.js';

/** What the registry itself reads of an arena. */
export interface TargetArena {
  readonly disposed: boolean;
}

export interface RunTarget<A extends TargetArena = TargetArena> {
  /** 'arena', or 'group' for a DataParallel group (of any size). */
  readonly kind: 'arena' | 'group';
  /** This process's arenas: the arena itself, or the group's replicas here. */
  readonly arenas: readonly A[];
  /** Global rank of arenas[0] (0 for an arena) and the replicas in the whole group (1 for an
   *  arena). */
  readonly rank: number;
  readonly world: number;
  readonly disposed: boolean;
  /** One run of every arena of this process (params[i] for arenas[i]), each on its own thread
   *  for a group; resolves once all have ended. */
  run(params: readonly RunParams[]): Promise<RunPath>;
}

const targets = new WeakMap<object, RunTarget>();

/** Internal: called by the constructors of Arena and DataParallel. */
export function registerRunTarget<A extends TargetArena>(owner: object, target: RunTarget<A>): void {
  targets.set(owner, target);
}

/** Internal: the run target of an Arena or a DataParallel group: OptionError for anything else
 *  (a Proxy of one included: the registry knows only the real objects), ArenaError DISPOSED for
 *  a disposed one. `A` is what the owners registered (both register Arenas). */
export function runTargetOf<A extends TargetArena = TargetArena>(v: unknown, field = 'arena'): RunTarget<A> {
  const t = typeof v === 'object' && v !== null ? targets.get(v) : undefined;
  if (!t) throw new OptionError('BAD_OPTION', field, typeof v === 'object' ? Object.prototype.toString.call(v) : v, 'must be an Arena or a DataParallel group');
  if (t.disposed) throw new ArenaError('DISPOSED', t.kind === 'group' ? 'the data-parallel group was disposed' : 'the arena was disposed');
  for (const a of t.arenas) if (a.disposed) throw new ArenaError('DISPOSED', 'the arena was disposed');
  return t as RunTarget<A>;
}
