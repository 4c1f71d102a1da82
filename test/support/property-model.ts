// property-model.ts: the plain reference model that test/property.test.ts (issue 27) checks
// random sequences of public calls against. Nothing here calls nn-arena's code paths: it says
// what a call should do (resolve, or throw which class with which code), what the host and
// device sides of each tracked region should hold, and what a forward pass should give, from
// the README's contract alone.
import type { Plan } from '../../src/index.js';

export type Dtype = 'float32' | 'float64';
export type OptimizerName = 'sgd' | 'momentum' | 'adam' | 'adamw';
export type ErrorClass = 'LayoutError' | 'OptionError' | 'DataError' | 'ArenaError';

/** What a call must do: resolve, or throw one of these (class, code) pairs. */
export type Expect = { ok: true; or?: Array<[ErrorClass, string]> } | { ok: false; any: Array<[ErrorClass, string]> };
export const OK: Expect = { ok: true };
export const refuse = (cls: ErrorClass, code: string): Expect => ({ ok: false, any: [[cls, code]] });
/** A run that may diverge (a huge learning rate): resolves, or ArenaError DIVERGED. */
export const okOrDiverged = (maybe: boolean): Expect => (maybe ? { ok: true, or: [['ArenaError', 'DIVERGED']] } : OK);

export interface SpecChoice {
  layers: number[];
  batch: number;
  dtype: Dtype;
  optimizer: OptimizerName;
  compact: boolean;
  models: number;
  samples: number;
}

/** One hostile change to a valid spec, or none. */
export type Corruption =
  | 'none'
  | 'batch-negative'
  | 'batch-zero'
  | 'batch-fraction'
  | 'batch-string'
  | 'layer-zero'
  | 'one-layer'
  | 'dtype'
  | 'optimizer'
  | 'models-zero'
  | 'unknown-key'
  | 'compact-string';

export function corruptSpec(s: SpecChoice, c: Corruption): Record<string, unknown> {
  const spec: Record<string, unknown> = { ...s, layers: [...s.layers] };
  switch (c) {
    case 'none':
      break;
    case 'batch-negative':
      spec.batch = -s.batch;
      break;
    case 'batch-zero':
      spec.batch = 0;
      break;
    case 'batch-fraction':
      spec.batch = s.batch + 0.5;
      break;
    case 'batch-string':
      spec.batch = String(s.batch);
      break;
    case 'layer-zero':
      (spec.layers as number[])[1] = 0;
      break;
    case 'one-layer':
      spec.layers = [s.layers[0]];
      break;
    case 'dtype':
      spec.dtype = 'float16';
      break;
    case 'optimizer':
      spec.optimizer = 'rmsprop';
      break;
    case 'models-zero':
      spec.models = 0;
      break;
    case 'unknown-key':
      spec.optimiser = s.optimizer;
      break;
    case 'compact-string':
      spec.compact = 'yes';
      break;
  }
  return spec;
}

/** planLayout's answer (README, API overview: a bad spec is a LayoutError with a code; a
 *  misspelled option name an OptionError UNKNOWN_OPTION; compact with models > 1 BAD_SPEC). */
export function expectPlan(s: SpecChoice, c: Corruption): Expect {
  switch (c) {
    case 'unknown-key':
      return refuse('OptionError', 'UNKNOWN_OPTION');
    case 'batch-negative':
    case 'batch-zero':
    case 'batch-fraction':
    case 'batch-string':
      return refuse('LayoutError', 'BAD_BATCH');
    case 'layer-zero':
    case 'one-layer':
      return refuse('LayoutError', 'BAD_LAYERS');
    case 'dtype':
      return refuse('LayoutError', 'BAD_DTYPE');
    case 'optimizer':
      return refuse('LayoutError', 'BAD_OPTIMIZER');
    case 'models-zero':
      return refuse('LayoutError', 'BAD_MODELS');
    case 'compact-string':
      return refuse('LayoutError', 'BAD_SPEC');
    case 'none':
      return s.compact && s.models > 1 ? refuse('LayoutError', 'BAD_SPEC') : OK;
  }
}

/** A region whose bytes belong to it alone (a compact plan's shared regions are left out: what
 *  they hold depends on the other regions), with its elements of one model and its copies. */
export interface Slot {
  layer: number;
  kind: string;
  length: number;
  models: number;
  strideElems: number;
  total: number;
}

export function slotsOf(plan: Plan): Slot[] {
  const elem = plan.spec.dtype === 'float64' ? 8 : 4;
  const rs = plan.regions.filter((r) => r.bytes > 0);
  return rs
    .filter((r) => !rs.some((o) => o !== r && o.offset < r.offset + r.bytes && r.offset < o.offset + o.bytes))
    .map((r) => ({ layer: r.layer, kind: r.kind, length: r.length, models: r.models, strideElems: r.stride / elem, total: r.bytes / elem }));
}

/** One side (host or device) of one slot: a baseline for every element (0, or undefined where
 *  the model does not know it) and the elements written since. */
interface Side {
  base: number | undefined;
  set: Map<number, number | undefined>;
}
const copySide = (s: Side): Side => ({ base: s.base, set: new Map(s.set) });

/** Selector as the README describes it: kinds (default every kind) and layers (default every
 *  layer) both select. */
export interface Sel {
  kinds?: string[];
  layers?: number[];
}
export const selects = (sel: Sel | undefined, slot: Slot) =>
  !sel || ((!sel.kinds || sel.kinds.includes(slot.kind)) && (!sel.layers || sel.layers.includes(slot.layer)));

/** The reference model of one arena: lifetime, trainer state, the two sides of every slot. */
export class ArenaModel {
  readonly spec: SpecChoice;
  readonly slots: Slot[];
  readonly inputs: number;
  readonly outputs: number;
  readonly L: number;
  disposed = false;
  /** Made by Trainer.load: the Trainer's dispose() frees the arena. */
  owned = false;
  /** The Trainer's learning rate (first model's), undefined until a Trainer exists. */
  lr: number | undefined;
  hugeLr = false;
  steps = 0;
  /** Rows of the last forward() whose activations the arena still holds. */
  forwardRows: number | undefined;
  /** Gradients waiting for update(). */
  gradients = false;
  #host: Side[];
  #device: Side[];

  constructor(spec: SpecChoice, plan: Plan, zero = true) {
    this.spec = spec;
    this.slots = slotsOf(plan);
    this.inputs = spec.layers[0]!;
    this.outputs = spec.layers[spec.layers.length - 1]!;
    this.L = spec.layers.length - 1;
    const base = zero ? 0 : undefined;
    this.#host = this.slots.map(() => ({ base, set: new Map() }));
    this.#device = this.slots.map(() => ({ base, set: new Map() }));
  }

  /** The value a host element must hold, undefined where unknown. */
  host(slot: number, i: number): number | undefined {
    const s = this.#host[slot]!;
    return s.set.has(i) ? s.set.get(i) : s.base;
  }

  /** Elements the model knows on the host side of `slot` (every element when its baseline is known). */
  known(slot: number): Array<[number, number]> {
    const s = this.#host[slot]!;
    const out: Array<[number, number]> = [];
    const n = this.slots[slot]!.total;
    if (s.base !== undefined)
      for (let i = 0; i < n; i++) {
        const v = this.host(slot, i);
        if (v !== undefined) out.push([i, v]);
      }
    else for (const [i, v] of s.set) if (v !== undefined) out.push([i, v]);
    return out;
  }

  write(slot: number, i: number, v: number): void {
    this.#host[slot]!.set.set(i, this.spec.dtype === 'float32' ? Math.fround(v) : v);
  }

  /** toDevice / toHost: the selected slots take the other side's contents; the others keep theirs. */
  transfer(dir: 'toDevice' | 'toHost', sel: Sel | undefined): void {
    this.slots.forEach((s, k) => {
      if (!selects(sel, s)) return;
      if (dir === 'toDevice') this.#device[k] = copySide(this.#host[k]!);
      else this.#host[k] = copySide(this.#device[k]!);
    });
  }

  /** A Trainer call ran on the arena: it reads and writes regions of both sides (weights,
   *  batch, activations, gradients, data set), so the model forgets what they hold. */
  forget(): void {
    for (const s of [...this.#host, ...this.#device]) {
      s.base = undefined;
      s.set.clear();
    }
  }

  /** A call refused for its data read the rows it had checked into the host side of the
   *  regions it stages them in (z[0], y, xdata, ydata: src/train/data.ts); the device side and
   *  every other region keep what they held. */
  forgetStaging(): void {
    this.slots.forEach((s, k) => {
      if (!['z', 'y', 'xdata', 'ydata'].includes(s.kind)) return;
      const h = this.#host[k]!;
      h.base = undefined;
      h.set.clear();
    });
  }

  /** A loaded arena: the slots of kinds in `saved` hold what `from`'s host side held (on both
   *  sides: the load uploads them), the others zero. */
  loadedFrom(from: ArenaModel, saved: (kind: string) => boolean): void {
    this.slots.forEach((s, k) => {
      const j = from.slots.findIndex((o) => o.layer === s.layer && o.kind === s.kind);
      const side = saved(s.kind) && j >= 0 ? copySide(from.#host[j]!) : { base: 0, set: new Map() };
      this.#host[k] = side;
      this.#device[k] = copySide(side);
    });
  }

  /** Steps of one fit() over `count` samples: every epoch runs ceil(count / batch) batches. */
  fitSteps(count: number, epochs: number): number {
    return Math.ceil(count / this.spec.batch) * epochs;
  }
}

/** The expected code for a call on a disposed arena: DISPOSED, or the refusal the live arena
 *  would give where the arguments are checked first. */
export function onDisposed(live: Expect): Expect {
  const any: Array<[ErrorClass, string]> = [['ArenaError', 'DISPOSED']];
  if (!live.ok) any.push(...live.any);
  return { ok: false, any };
}

// ---- results: a forward pass and a loss, in float64 ------------------------------------------

/** The network's outputs for `rows` rows of x, from the host weights (w: units x fan-in,
 *  row-major; relu on hidden layers, softmax on the output: the default activations). */
export function referenceForward(layers: readonly number[], w: ArrayLike<number>[], b: ArrayLike<number>[], x: ArrayLike<number>, rows: number): Float64Array {
  let a = Float64Array.from({ length: rows * layers[0]! }, (_, i) => x[i]!);
  for (let l = 1; l < layers.length; l++) {
    const n = layers[l]!,
      k = layers[l - 1]!;
    const z = new Float64Array(rows * n);
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < n; j++) {
        let s = b[l - 1]![j]!;
        for (let i = 0; i < k; i++) s += w[l - 1]![j * k + i]! * a[r * k + i]!;
        z[r * n + j] = s;
      }
      if (l < layers.length - 1) for (let j = 0; j < n; j++) z[r * n + j] = Math.max(0, z[r * n + j]!);
      else {
        let m = -Infinity;
        for (let j = 0; j < n; j++) m = Math.max(m, z[r * n + j]!);
        let sum = 0;
        for (let j = 0; j < n; j++) sum += z[r * n + j] = Math.exp(z[r * n + j]! - m);
        for (let j = 0; j < n; j++) z[r * n + j]! /= sum;
      }
    }
    a = z;
  }
  return a;
}

/** Mean cross-entropy of softmax outputs against integer labels. */
export function referenceLoss(out: Float64Array, labels: readonly number[], outputs: number): number {
  let s = 0;
  labels.forEach((c, r) => {
    s -= Math.log(out[r * outputs + c]!);
  });
  return s / labels.length;
}

/** Close enough for the dtype: float64 to 1e-9, float32 to 2e-4 (relative, with an absolute floor). */
export function close(a: number, b: number, dtype: Dtype): boolean {
  const tol = dtype === 'float64' ? 1e-9 : 2e-4;
  return Math.abs(a - b) <= tol * Math.max(1, Math.abs(a), Math.abs(b));
}

/** Deterministic small test data: values exact in float32, labels in [0, outputs). */
export function dataOf(seed: number, rows: number, inputs: number, outputs: number): { x: number[]; labels: number[] } {
  const x = Array.from({ length: rows * inputs }, (_, i) => (((seed * 31 + i * 17) % 13) - 6) / 4);
  const labels = Array.from({ length: rows }, (_, r) => (seed + r * 7) % outputs);
  return { x, labels };
}
