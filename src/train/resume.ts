// resume.ts: what a Trainer's checkpoint holds beyond the arena's bytes, so that Trainer.load
// then N steps equals N more steps of the original, bit for bit:
//   - the options the Trainer was made with, as JSON: every key it was given, whatever the key
//     (the optimizer's, the schedule's, the activation's: this module knows none of them), so a
//     new option is carried without a change here; values that are not plain data (functions)
//     are listed by name and must be given again to Trainer.load;
//   - the resolved hyperparameters (defaults included), for inspection;
//   - the position of an interrupted fit(): its seed, shuffle, reports, epochs, the epoch and
//     batch it stopped at, the RNG state after that epoch's order was drawn, the order itself,
//     and the data set's size and checksums (resuming on other data is refused);
//   - whether gradients from backward() / gradients() wait for update();
//   - precision fp16: the loss scale, its growth tracker and the steps it skipped.
// The step count (Adam's t, the schedule's position) is the file header's `steps`.
import { transferRanges, type Arena } from '../arena/arena.js';
import { DATA_KINDS, saveArenaAsync, type IoProgress, type SaveOptions } from '../checkpoint/checkpoint.js';
import { ArenaError, OptionError } from '../core/errors.js';
import { checkKnownKeys } from '../core/known-keys.js';
import type { Plan } from '../layout/plan.js';

/** Where an interrupted fit() stands: fit(data, { resume: true }) continues from here. */
export interface FitPosition {
  seed: number;
  shuffle: boolean;
  reports: number;
  epochs: number;
  /** The epoch under way (1-based) and the first batch of it not yet trained. */
  epoch: number;
  next: number;
  /** The RNG's state after this epoch's order was drawn (hex), and that order. */
  rng: string;
  perm: { a: number; c: number };
  /** The data set: sample count and CRC-32C of its x and y bytes. */
  count: number;
  xCrc: number;
  yCrc: number;
  /** K models: which had diverged. */
  diverged: boolean[];
}

export interface TrainerRecord {
  /** The options the Trainer was given (plain data), and the keys whose values were not. */
  options: Record<string, unknown>;
  unsaved: string[];
  /** Resolved hyperparameters (defaults included): what the runs used. */
  hyper: Record<string, unknown>;
  gradients: boolean;
  fit: FitPosition | undefined;
  /** precision 'fp16': the loss scale, its growth tracker and the steps skipped so far. */
  lossScale?: { scale: number; good: number; skipped: number };
}

/** Plain data (what JSON keeps exactly), or undefined. */
function plain(v: unknown, depth = 0): unknown {
  if (depth > 16) return undefined;
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (Array.isArray(v)) {
    const out = v.map((x) => plain(x, depth + 1));
    return out.includes(undefined) ? undefined : out;
  }
  if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const p = plain(x, depth + 1);
      if (p === undefined) return undefined;
      out[k] = p;
    }
    return out;
  }
  return undefined;
}

/** The options object as the Trainer read it (a snapshot of own keys), split into what a
 *  checkpoint can hold and what it cannot. */
export function settingsOf(options: Record<string, unknown>): { options: Record<string, unknown>; unsaved: string[] } {
  const out: Record<string, unknown> = {};
  const unsaved: string[] = [];
  for (const [k, v] of Object.entries(options)) {
    if (v === undefined) continue;
    const p = plain(v);
    if (p === undefined) unsaved.push(k);
    else out[k] = p;
  }
  return { options: out, unsaved };
}

export const TRAINER_KEY = 'trainer';

const positions = new WeakMap<Arena, FitPosition>();

/** Where the last fit() on `arena` stopped, when it stopped early (undefined once one finished). */
export function positionOf(arena: Arena): FitPosition | undefined {
  return positions.get(arena);
}

export function setPosition(arena: Arena, p: FitPosition | undefined): void {
  if (p) positions.set(arena, p);
  else positions.delete(arena);
}

/** The record as checkpoint metadata. */
export function trainerMetadata(r: TrainerRecord): Record<string, unknown> {
  return {
    [TRAINER_KEY]: {
      options: r.options,
      unsaved: r.unsaved,
      hyper: r.hyper,
      gradients: r.gradients,
      ...(r.fit ? { fit: r.fit } : {}),
      ...(r.lossScale ? { lossScale: r.lossScale } : {}),
    },
  };
}

const bad = (path: string, why: string) => new ArenaError('BAD_CHECKPOINT', `${path}: trainer metadata: ${why}`);
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isInt = (v: unknown, min = 0): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= min;

/** The record a checkpoint holds (an empty one for checkpoints without it: Arena.save, or
 *  written before format version 3), checked field by field. */
export function readTrainerMetadata(path: string, metadata: Record<string, unknown>): TrainerRecord {
  const t = metadata[TRAINER_KEY];
  if (t === undefined) return { options: {}, unsaved: [], hyper: {}, gradients: false, fit: undefined };
  if (!isObject(t)) throw bad(path, 'not an object');
  const { options = {}, unsaved = [], hyper = {}, gradients = false, fit, lossScale } = t;
  if (!isObject(options)) throw bad(path, 'options is not an object');
  if (!Array.isArray(unsaved) || !unsaved.every((k) => typeof k === 'string')) throw bad(path, 'unsaved is not a list of names');
  if (!isObject(hyper)) throw bad(path, 'hyper is not an object');
  if (typeof gradients !== 'boolean') throw bad(path, 'gradients is not a boolean');
  if (
    lossScale !== undefined &&
    !(
      isObject(lossScale) &&
      typeof lossScale.scale === 'number' &&
      lossScale.scale > 0 &&
      Number.isFinite(lossScale.scale) &&
      isInt(lossScale.good) &&
      isInt(lossScale.skipped)
    )
  ) {
    throw bad(path, 'lossScale is not { scale, good, skipped }');
  }
  return {
    options,
    unsaved: unsaved as string[],
    hyper,
    gradients,
    fit: fit === undefined ? undefined : fitPosition(path, fit),
    ...(lossScale ? { lossScale: { scale: lossScale.scale as number, good: lossScale.good as number, skipped: lossScale.skipped as number } } : {}),
  };
}

/** The most epochs a checkpoint's fit position may ask for: a larger count is no fit anyone
 *  stopped, and resuming it would train for ever. */
const MAX_FIT_EPOCHS = 2 ** 31;

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** An epoch order for `count` samples as affinePermutation draws it (src/train/rng.ts). */
const isOrder = (a: number, c: number, count: number) => (count <= 2 ? a === 1 : a < count && gcd(a, count) === 1) && c < count;

/** The position as saved, each field checked on its own and against the others; what depends
 *  on the arena (its models, samples and batch) is checked when the fit resumes (resumeFitPlan). */
function fitPosition(path: string, f: unknown): FitPosition {
  if (!isObject(f)) throw bad(path, 'fit is not an object');
  const { seed, shuffle, reports, epochs, epoch, next, rng, perm, count, xCrc, yCrc, diverged } = f;
  const check = (ok: boolean, field: string, why: string) => {
    if (!ok) throw bad(path, `fit.${field} ${why}`);
  };
  check(isInt(seed, Number.MIN_SAFE_INTEGER), 'seed', 'is not an integer');
  check(typeof shuffle === 'boolean', 'shuffle', 'is not a boolean');
  check(isInt(reports, 1), 'reports', 'is not a positive integer');
  check(isInt(epochs, 1) && epochs <= MAX_FIT_EPOCHS, 'epochs', `is not an integer in [1, 2^31] (got ${String(epochs)})`);
  check(isInt(epoch, 1) && epoch <= (epochs as number), 'epoch', `is not an integer in [1, epochs] (got ${String(epoch)})`);
  check(isInt(count, 1), 'count', 'is not a positive integer');
  // An epoch has at most `count` batches (of one row); the plan's batch narrows it on resume.
  check(isInt(next) && next <= (count as number), 'next', `is not a batch of the ${String(count)}-sample epoch (got ${String(next)})`);
  check(typeof rng === 'string' && /^[0-9a-f]{1,16}$/.test(rng), 'rng', 'is not a generator state (1 to 16 hex digits)');
  check(
    isObject(perm) && isInt(perm.a, 1) && isInt(perm.c) && isOrder(perm.a, perm.c, count as number) && (shuffle === true || (perm.a === 1 && perm.c === 0)),
    'perm',
    `is not an order of ${String(count)} samples ({ a, c }: a coprime to the count and below it, c below it; { a: 1, c: 0 } without shuffle)`,
  );
  check(isInt(xCrc) && xCrc <= 0xffffffff, 'xCrc', 'is not a CRC-32C');
  check(isInt(yCrc) && yCrc <= 0xffffffff, 'yCrc', 'is not a CRC-32C');
  check(
    Array.isArray(diverged) && diverged.length >= 1 && diverged.every((d) => typeof d === 'boolean'),
    'diverged',
    'is not a list of booleans, one per model',
  );
  const p = perm as { a: number; c: number };
  return {
    seed: seed as number,
    shuffle: shuffle as boolean,
    reports: reports as number,
    epochs: epochs as number,
    epoch: epoch as number,
    next: next as number,
    rng: rng as string,
    perm: { a: p.a, c: p.c },
    count: count as number,
    xCrc: xCrc as number,
    yCrc: yCrc as number,
    diverged: diverged as boolean[],
  };
}

/** Trainer.load's options: the saved ones under the caller's; a value that could not be saved
 *  must come from the caller. */
export function loadOptions(record: TrainerRecord, given: Record<string, unknown>): Record<string, unknown> {
  for (const k of record.unsaved) {
    if (given[k] === undefined)
      throw new OptionError(
        'BAD_OPTION',
        `options.${k}`,
        undefined,
        'was not plain data when the checkpoint was saved (a function?): pass it again to Trainer.load',
      );
  }
  return { ...record.options, ...given };
}

export interface TrainerSaveOptions {
  /** Also save the resident data set (default false). */
  data?: boolean;
  /** Your own JSON object, stored beside the Trainer's record (any key but `trainer`). */
  metadata?: Record<string, unknown>;
  /** saveAsync only: called after each chunk written. */
  onProgress?: (p: IoProgress) => void;
}

/** What a Trainer's checkpoint holds: the parameters, the optimizer state, the stats (a
 *  resumed fit's progress goes on accumulating them), gradients waiting for update(), and
 *  every user region. Activations and batch scratch are rewritten before they are read. */
function checkpointKinds(plan: Plan, gradients: boolean): string[] {
  const kinds = ['w', 'b', 'mw', 'mb', 'vw', 'vb', 'stats', ...(gradients ? ['dw', 'db'] : [])].filter((k) =>
    plan.regions.some((r) => r.kind === k && r.bytes > 0),
  );
  return [...kinds, ...plan.spec.extra.map((e) => e.name)];
}

function trainerSave(arena: Arena, options: unknown, record: TrainerRecord, steps: number): SaveOptions & { kinds: string[] } {
  if (options === null || typeof options !== 'object')
    throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { data?, metadata?, onProgress? }');
  checkKnownKeys(options, ['data', 'metadata', 'onProgress'], 'save');
  const { data, metadata = {}, onProgress } = options as TrainerSaveOptions;
  if (metadata === null || typeof metadata !== 'object') throw new OptionError('BAD_OPTION', 'metadata', metadata, 'must be a plain object');
  if (Object.hasOwn(metadata, TRAINER_KEY)) throw new OptionError('BAD_OPTION', `metadata.${TRAINER_KEY}`, metadata[TRAINER_KEY], "is the Trainer's own key");
  return { kinds: checkpointKinds(arena.plan, record.gradients), data, steps, metadata: { ...metadata, ...trainerMetadata(record) }, onProgress };
}

/** Trainer.save: what the device holds of the saved regions comes back first. */
export function saveFile(arena: Arena, path: string, options: unknown, record: TrainerRecord, steps: number): number {
  const o = trainerSave(arena, options, record, steps);
  arena.toHost({ kinds: [...o.kinds, ...(o.data ? DATA_KINDS : [])] });
  return arena.save(path, o);
}

/** Trainer.saveAsync, inside the arena's queue. */
export async function saveFileAsync(arena: Arena, path: string, options: unknown, record: TrainerRecord, steps: number): Promise<number> {
  const o = trainerSave(arena, options, record, steps);
  arena.toHost({ kinds: [...o.kinds, ...(o.data ? DATA_KINDS : [])] });
  return saveArenaAsync(arena, path, o);
}

/** Bytes brought back between two turns of the event loop by syncToHostAsync. */
const SYNC_STEP = 256 * 2 ** 20;

/** The whole arena device -> host in steps of SYNC_STEP bytes, yielding between them. */
export async function syncToHostInSteps(arena: Arena, onProgress: ((p: IoProgress) => void) | undefined): Promise<void> {
  const total = arena.plan.totalBytes;
  for (let at = 0; at < total; at += SYNC_STEP) {
    const n = Math.min(SYNC_STEP, total - at);
    transferRanges(arena, 'toHost', {}, [at, n]);
    onProgress?.({ bytes: at + n, totalBytes: total });
    await new Promise<void>((r) => setImmediate(r));
  }
}

/** What a resumed position must fit: the arena's models and data regions, and the rows of one
 *  step (a data-parallel group's global batch). */
export interface ResumeLimits {
  models: number;
  samples: number;
  globalBatch: number;
}

/** A position that came from a checkpoint may be crafted: each field that depends on the arena
 *  is checked against it before anything runs, so that a resume never skips an epoch's batches,
 *  trains past the saved epochs or reports a model it does not have. */
function checkAgainst(p: FitPosition, limits: ResumeLimits): void {
  const bad = (field: string, why: string) =>
    new ArenaError('BAD_CHECKPOINT', `fit({ resume: true }): the saved fit position's ${field} ${why} (a checkpoint of another arena, or crafted)`);
  if (p.diverged.length !== limits.models)
    throw bad('diverged', `has ${p.diverged.length} flags; this arena holds ${limits.models} model${limits.models === 1 ? '' : 's'}`);
  // One model's fit ends at its divergence (DIVERGED): no position of it is marked diverged.
  if (limits.models === 1 && p.diverged[0]) throw bad('diverged', 'marks the one model diverged; a one-model fit that diverged stopped with DIVERGED');
  if (p.count > limits.samples) throw bad('count', `is ${p.count} samples; this arena's data regions hold ${limits.samples}`);
  const batches = Math.ceil(p.count / limits.globalBatch);
  // next === batches: the epoch's batches were all trained (a stop at its last report).
  if (p.next > batches) throw bad('next', `is batch ${p.next}; an epoch of ${p.count} samples has ${batches} of ${limits.globalBatch} rows`);
}

/** fit(data, { resume: true, ... })'s plan: the interrupted call's, its epochs extendable. */
export function resumeFitPlan(
  p: FitPosition | undefined,
  given: { epochs?: unknown; shuffle?: unknown; seed?: unknown; reportsPerEpoch?: unknown },
  limits: ResumeLimits,
) {
  if (!p) throw new OptionError('BAD_OPTION', 'resume', true, 'no fit() stopped early on this Trainer (nor in the checkpoint it was loaded from)');
  checkAgainst(p, limits);
  const same = (field: string, v: unknown, want: unknown) => {
    if (v !== undefined && v !== want)
      throw new OptionError('BAD_OPTION', field, v, `must be the interrupted fit's ${String(want)} (or left out) to resume it`);
  };
  same('seed', given.seed, p.seed);
  same('shuffle', given.shuffle, p.shuffle);
  same('reportsPerEpoch', given.reportsPerEpoch, p.reports);
  const epochs = given.epochs === undefined ? p.epochs : given.epochs;
  if (typeof epochs !== 'number' || !Number.isSafeInteger(epochs) || epochs < p.epoch) {
    throw new OptionError(
      'BAD_OPTION',
      'epochs',
      epochs,
      `must be an integer >= ${p.epoch}, the epoch the interrupted fit stopped in (epochs count from that call's start)`,
    );
  }
  return { epochs, shuffle: p.shuffle, seed: p.seed, reports: p.reports, resume: p };
}
