// inputs.ts: what a Trainer's calls read their data with (Runner extends it): the plan's shape
// read once, the target's arenas, and each call's data (a data set, a batch, inputs alone) read
// at the call, straight into the first arena's rows where nothing is queued, else a snapshot.
import { queueOf, type Arena, type RunTarget } from '../arena/arena.js';
import { DataError } from '../core/errors.js';
import type { Dtype } from '../layout/header.js';
import { snapshotData, type Snapshot } from './data.js';
import { Dataset } from './dataset.js';
import { holds, readIntoRegions } from './resident.js';
import { stateOf, type TrainState } from './state.js';

export class InputReader {
  readonly target: RunTarget;
  /** The first arena of this process (a group's first replica here). */
  readonly arena: Arena;
  /** The first arena's shared state (steps, residency, primitives' bookkeeping). */
  readonly state: TrainState;
  // The plan's shape, read once (the plan is frozen, but one read keeps every use consistent).
  readonly dtype: Dtype;
  readonly batch: number;
  readonly samples: number;
  readonly last: number;
  readonly inputs: number;
  readonly outputs: number;
  readonly models: number;

  constructor(target: RunTarget) {
    this.target = target;
    this.arena = target.arenas[0]!;
    const s = this.arena.plan.spec;
    this.dtype = s.dtype;
    this.batch = s.batch;
    this.samples = s.samples;
    this.last = s.layers.length - 1;
    this.inputs = s.layers[0]!;
    this.outputs = s.layers[this.last]!;
    this.models = s.models;
    this.state = stateOf(this.arena);
  }

  /** Rows of one step: the plan's batch, times the replicas of a data-parallel group. */
  get globalBatch(): number {
    return this.batch * this.target.world;
  }

  snapshot(data: unknown, field: string): Snapshot {
    return snapshotData(data, this.inputs, this.outputs, this.dtype, field);
  }

  /** Nothing is queued or in flight on this process's arenas: a call may write their host
   *  regions now (the run it queues is the next to touch them). */
  get idle(): boolean {
    return this.target.arenas.every((a) => queueOf(a).pending === 0);
  }

  /** A data set for the data regions (fit, evaluate): a Dataset the arenas hold is not read;
   *  anything else is read at the call, straight into the first arena's data regions when no run
   *  is queued (else into a snapshot). `fits`: the set fits the regions (resident); else (only
   *  where `tooLarge` does not throw) a snapshot for batch-by-batch use. */
  residentData(
    data: unknown,
    field: string,
    tooLarge?: (count: number, n: number) => void,
  ): { d: Snapshot; fits: boolean; dataset?: { handle: Dataset; version: number } } {
    const handle = data instanceof Dataset ? data : undefined;
    const dataset = handle ? { handle, version: handle.version } : undefined;
    const src = handle ? Dataset.source(handle) : data;
    const idle = this.idle;
    if (handle && idle && this.target.arenas.every((a) => holds(a, handle, dataset!.version))) {
      const rec = this.state.resident!;
      const L = this.last;
      return {
        d: {
          count: rec.count,
          x: this.arena.view(0, 'xdata').subarray(0, rec.count * this.inputs),
          y: this.arena.view(L, 'ydata').subarray(0, rec.count * this.outputs),
          staged: 'data',
        },
        fits: true,
        dataset,
      };
    }
    const cap = this.samples * this.inputs;
    const over = (count: number, n: number) => {
      if (n > cap) {
        tooLarge?.(count, n);
        return true;
      }
      return false;
    };
    if (idle && this.samples > 0) {
      const d = readIntoRegions(this.arena, src, this, field, true, over);
      return { d, fits: d.staged === 'data', dataset };
    }
    const d = snapshotData(src, this.inputs, this.outputs, this.dtype, field);
    return { d, fits: !over(d.count, d.x.length), dataset };
  }

  /** step() / gradients(): x and a target { labels } or { y }, at most the global batch; read at
   *  the call straight into z[0] and y of the arena when it is one arena with no run queued. */
  snapshotBatch(x: unknown, target: unknown, field: string): Snapshot {
    if (target === null || typeof target !== 'object') throw new DataError('BAD_DATA', 'target', target, 'must be an object { labels } or { y }');
    const { labels, y } = target as { labels?: ArrayLike<number>; y?: ArrayLike<number> };
    return this.readBatch({ x, labels, y }, field, true, this.globalBatch);
  }

  /** Inputs alone (predict), any number of rows: read straight into z[0] where they fit one
   *  batch and the call may write there now, else into a new array. */
  readInputs(x: unknown, field: string): Snapshot {
    const direct = this.target.kind === 'arena' && this.idle;
    const V = this.dtype === 'float64' ? Float64Array : Float32Array;
    let staged = false;
    const d = snapshotData({ x }, this.inputs, this.outputs, this.dtype, field, false, {
      x: (n) => {
        staged = direct && n <= this.batch * this.inputs;
        return staged ? this.arena.view(0, 'z').subarray(0, n) : direct ? this.#scratchOf(n) : new V(n);
      },
      y: (n) => new V(n),
      compare: false,
    });
    return staged ? { ...d, staged: 'batch' } : d;
  }

  /** A buffer reused by calls made with nothing queued (their run is the next, so it is free
   *  again when the next such call comes): no allocation, and no fresh pages to fault in, a call. */
  #scratch: Float32Array | Float64Array | undefined;
  #scratchOf(n: number): Float32Array | Float64Array {
    if (!this.#scratch || this.#scratch.length < n) this.#scratch = this.dtype === 'float64' ? new Float64Array(n) : new Float32Array(n);
    return this.#scratch.subarray(0, n);
  }

  /** Rows of a batch (at most `limit`): into the arena's z[0] / y host rows (staged) where the
   *  call may write them now, else a snapshot. */
  readBatch(data: unknown, field: string, targets: boolean, limit: number): Snapshot {
    const tooMany = (n: number) => {
      const count = n / this.inputs;
      if (count > limit)
        throw new DataError(
          'BAD_DATA',
          `${field}.x.length`,
          n,
          `holds ${count} samples, more than the ${this.target.world > 1 ? 'global ' : ''}batch of ${limit}`,
        );
    };
    if (this.target.kind === 'arena' && this.idle) {
      // Views taken as each field is written (the caller's getters may dispose the arena).
      const d = snapshotData(data, this.inputs, this.outputs, this.dtype, field, targets, {
        x: (n) => {
          tooMany(n);
          return this.arena.view(0, 'z').subarray(0, n);
        },
        y: (n) => this.arena.view(this.last, 'y').subarray(0, n),
        compare: false,
      });
      return { ...d, staged: 'batch' };
    }
    const d = snapshotData(data, this.inputs, this.outputs, this.dtype, field, targets);
    tooMany(d.x.length);
    return d;
  }
}
