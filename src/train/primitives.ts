// primitives.ts: a step as forward(), backward(), update(). Each is one native run (queued like
// step); together they give step()'s weights and optimizer state (bit for bit on the CPU; see
// the README). The arena's state records what the next primitive may use: the rows of the last
// forward() (backward() goes back from them) and whether gradients wait for update().
// Transfers: forward() uploads the rows of x and downloads the output rows it returns,
// backward() uploads its targets or dOutput rows, update() reads the 32-byte stats (DIVERGED when
// the weights went non-finite; the backward's loss and accuracy stay there for metrics()).
// One model per arena: on an arena of K models the native runs would cover every model, but
// forward()'s outputs and backward()'s dOutput are one model's rows, so they are refused rather
// than answer for model 0 only; a data-parallel group too (no reduction between backward() and
// update()).
import type { View } from '../arena/arena.js';
import { ArenaError, DataError } from '../core/errors.js';
import { STATS } from '../layout/header.js';
import { OPS } from '../native/addon.js';
import { snapshotNumbers, type Values } from './data.js';
import type { Runner } from './runner.js';

/** What backward() goes back from: the built-in loss with integer labels or target rows, or the
 *  gradient of your own loss with respect to the outputs forward() returned (rows x outputs
 *  values, dL/dz of the output layer: nn-arena applies the output activation's derivative). */
export type BackwardTarget = { labels: ArrayLike<number> } | { y: ArrayLike<number> } | { dOutput: ArrayLike<number> };

/** The primitives take one arena of one model: ArenaError NOT_SUPPORTED naming the
 *  data-parallel group (its replicas' gradients would need a reduction between backward()
 *  and update(), which the native primitive runs do not do), or `models`. */
function primitiveArena(r: Runner, method: string): void {
  if (r.target.kind === 'group') {
    throw new ArenaError(
      'NOT_SUPPORTED',
      `${method}: forward / backward / update take one arena, not a data-parallel group (use step() or fit() on the group, or a Trainer on one arena)`,
    );
  }
  if (r.models !== 1) {
    throw new ArenaError(
      'NOT_SUPPORTED',
      `${method}: forward / backward / update take an arena of one model; this one holds models: ${r.models} (use step() or fit(), or one arena per model)`,
    );
  }
}

/** The arenas (by their shared state) whose stats region holds the built-in loss of the last
 *  backward() (labels or y; dOutput leaves the region as it was), no run but forward() since. */
const lossInStats = new WeakSet<object>();

export async function forward(r: Runner, x: ArrayLike<number>): Promise<View> {
  primitiveArena(r, 'forward');
  const d = r.readInputs(x, 'forward');
  if (d.count > r.batch) throw new DataError('BAD_DATA', 'forward.x.length', d.x.length, `holds ${d.count} samples, more than the batch of ${r.batch}`);
  return r.queue.enqueue(async () => {
    if (r.state.forwardRows === undefined) lossInStats.delete(r.state); // another run came between
    const rows = d.count;
    await r.runRows(d, 0, rows, { op: OPS.forward, resetStats: false }, ['outputs']);
    r.state.forwardRows = rows;
    return r.arena.view(r.last, 'z').subarray(0, rows * r.outputs);
  });
}

/** backward()'s target, read once: exactly one of labels, y, dOutput, as rows of the
 *  arena's dtype (labels one-hot); the row count is checked when the run is due. */
function snapshotTarget(r: Runner, target: unknown): { field: 'labels' | 'y' | 'dOutput'; values: Values } {
  if (target === null || typeof target !== 'object') throw new DataError('BAD_DATA', 'target', target, 'must be an object { labels }, { y } or { dOutput }');
  const { labels, y, dOutput } = target as { labels?: unknown; y?: unknown; dOutput?: unknown };
  const given = [labels, y, dOutput].filter((v) => v !== undefined).length;
  if (given !== 1) throw new DataError('BAD_DATA', 'target', given ? 'several' : 'none', 'needs exactly one of labels, y or dOutput');
  const rowsOf = (field: string) => (n: number) => {
    if (n === 0 || n % r.outputs !== 0)
      throw new DataError('BAD_DATA_WIDTH', `backward.${field}.length`, n, `is not a positive multiple of the output layer's ${r.outputs} units`);
  };
  if (dOutput !== undefined) return { field: 'dOutput', values: snapshotNumbers(dOutput, 'backward.dOutput', r.dtype, rowsOf('dOutput')) };
  if (y !== undefined) return { field: 'y', values: snapshotNumbers(y, 'backward.y', r.dtype, rowsOf('y')) };
  const ls = snapshotNumbers(labels, 'backward.labels', 'float64');
  const ys = r.dtype === 'float64' ? new Float64Array(ls.length * r.outputs) : new Float32Array(ls.length * r.outputs);
  for (let i = 0; i < ls.length; i++) {
    const v = ls[i]!;
    if (!Number.isInteger(v) || v < 0 || v >= r.outputs)
      throw new DataError('BAD_LABEL', `backward.labels[${i}]`, v, `is not a class in [0, ${r.outputs - 1}]`);
    ys[i * r.outputs + v] = 1;
  }
  return { field: 'labels', values: ys };
}

export async function backward(r: Runner, target: BackwardTarget): Promise<void> {
  primitiveArena(r, 'backward');
  const t = snapshotTarget(r, target);
  return r.queue.enqueue(async () => {
    const rows = r.state.forwardRows;
    if (rows === undefined) {
      throw new ArenaError(
        'NO_FORWARD',
        'backward: no forward(x) to go back from; call forward(x) first (step, fit, evaluate, predict, gradients and update replace its activations)',
      );
    }
    const n = rows * r.outputs;
    if (t.values.length !== n) {
      throw new DataError(
        'BAD_DATA_WIDTH',
        `backward.${t.field}.length`,
        t.field === 'labels' ? t.values.length / r.outputs : t.values.length,
        t.field === 'labels'
          ? `must equal the ${rows} rows of the last forward()`
          : `must be the ${rows} rows of the last forward() x ${r.outputs} outputs = ${n}`,
      );
    }
    const kind = t.field === 'dOutput' ? 'd' : 'y';
    r.arena.view(r.last, kind).set(t.values);
    r.rowsTransfer('toDevice', r.last, kind, t.values.byteLength);
    const own = t.field === 'dOutput';
    await r.run({ op: own ? OPS.backwardFromOutput : OPS.backward, rows, resetStats: !own });
    r.state.gradients = true;
    if (own) lossInStats.delete(r.state);
    else lossInStats.add(r.state);
  });
}

export async function update(r: Runner): Promise<void> {
  primitiveArena(r, 'update');
  return r.queue.enqueue(async () => {
    if (!r.state.gradients) throw new ArenaError('NO_GRADIENTS', 'update: no gradients to apply; call backward() (or gradients()) first, once per update()');
    const stepBase = r.state.steps;
    r.checkSteps(stepBase, 1);
    // The stats stay as they are for metrics() (the backward's loss and accuracy): the run only
    // marks non-finite weights there. Where they hold the backward's (no run but forward() since:
    // every other one clears forwardRows), a bad step there is its non-finite loss, which step()
    // calls diverged too. Otherwise the host holds what the region does (every other run that
    // writes the stats reads them back), and a bad step there is an earlier run's: the update
    // then starts the stats afresh, so that its own verdict is what it reads.
    const fresh = r.state.forwardRows !== undefined && lossInStats.has(r.state);
    lossInStats.delete(r.state);
    const stale = !fresh && r.arena.view(r.last, 'stats')[STATS.badStep]! >= 0;
    await r.run({ op: OPS.update, stepBase, resetStats: stale });
    r.state.steps++;
    r.stats();
    if (r.diverged(0)) {
      throw new ArenaError(
        'DIVERGED',
        `update diverged: the weights${fresh ? ' (or the loss of the backward() it applied)' : ''} became non-finite at step ${stepBase}; ${r.divergedHint}`,
      );
    }
  });
}
