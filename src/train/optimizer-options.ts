// optimizer-options.ts: a Trainer's optimizer options (the arena's optimizer's hyperparameters,
// the learning-rate schedule, gradient clipping) read once and checked against the native
// tables (src/layout/optimizers.ts), as the arena's dtype will hold each value. The run checks
// (csrc/train/check.cc: schedule consistency, refused combinations) run at construction too, so
// a Trainer is refused before any work.
import { OptionError } from '../core/errors.js';
import type { Dtype } from '../layout/header.js';
import { commonParams, inRange, namesOf, optimizerNamed, optimizers, rangeText, schedules, type ParamInfo } from '../layout/optimizers.js';
import { call, native, OPS, type RunParams, type RunTarget, type ScheduleParams } from '../native/addon.js';

/** A learning-rate schedule (evaluated natively for every step; docs/optimizers.md):
 *  `{ type: 'constant' }`, `{ type: 'step', stepSize, gamma }`, `{ type: 'cosine', total,
 *  warmup, startFactor, minLr }`, `{ type: 'one-cycle', total, pctStart, divFactor,
 *  finalDivFactor }`; parameters left out take the table's defaults. */
export type Schedule = ScheduleParams;

/** The run parameters of the options: every hyperparameter of the arena's optimizer (lr
 *  included), the schedule and clipGradNorm, by their run-parameter names. */
export interface OptimizerSettings {
  readonly params: Readonly<Record<string, number | boolean | ScheduleParams>>;
  /** Base learning rate (model 0's where lrs is given). */
  readonly lr: number;
  /** K models with an lr array: one per model. */
  readonly lrs: readonly number[] | undefined;
  readonly schedule: ScheduleParams | undefined;
  /** 0: no clipping. */
  readonly clipGradNorm: number;
}

const round = (dtype: Dtype, v: number) => (dtype === 'float32' ? Math.fround(v) : v);

/** A value of table entry p: its type, then its range as the dtype holds it (a learning rate of
 *  1e-50 is 0 in float32, a momentum of 0.999999999 is 1). */
function checkParam(p: ParamInfo, v: unknown, dtype: Dtype, field: string): number | boolean {
  if (p.type === 'boolean') {
    if (typeof v !== 'boolean') throw new OptionError('BAD_OPTION', field, v, 'must be a boolean');
    return v;
  }
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new OptionError('BAD_OPTION', field, v, 'must be a finite number');
  const r = p.type === 'integer' ? v : round(dtype, v);
  if (!inRange(p, r) || !Number.isFinite(r)) {
    throw new OptionError('BAD_OPTION', field, v, `must be ${rangeText(p)}${r !== v ? ` as a ${dtype} (it is ${r})` : ''} (${p.doc})`);
  }
  return v;
}

function checkSchedule(v: unknown): ScheduleParams {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new OptionError('BAD_OPTION', 'schedule', v, 'must be an object { type, ... }');
  const o = v as Record<string, unknown>;
  const info = schedules().find((s) => s.name === o.type);
  if (!info) throw new OptionError('BAD_OPTION', 'schedule.type', o.type, `must be one of ${namesOf(schedules())}`);
  const out: ScheduleParams = { type: info.name };
  for (const k of Object.keys(o)) {
    if (k !== 'type' && !info.params.some((p) => p.name === k)) {
      throw new OptionError(
        'BAD_OPTION',
        `schedule.${k}`,
        o[k],
        `is not a parameter of the '${info.name}' schedule (${info.params.map((p) => p.name).join(', ') || 'none'})`,
      );
    }
  }
  // Schedule parameters are steps and factors computed in double: no dtype rounding.
  for (const p of info.params)
    out[p.name] = o[p.name] === undefined ? (p.default as number) : (checkParam(p, o[p.name], 'float64', `schedule.${p.name}`) as number);
  return out;
}

/** Reads the optimizer options of `o` for an arena of `optimizer`, `dtype` and `models`. */
export function readOptimizerOptions(o: Record<string, unknown>, optimizer: string, dtype: Dtype, models: number): OptimizerSettings {
  const info = optimizerNamed(optimizer)!;
  const params: Record<string, number | boolean | ScheduleParams> = {};
  let lrs: number[] | undefined;
  for (const p of info.hypers) {
    const v = o[p.name];
    if (p.name === 'lr' && Array.isArray(v)) {
      const n: unknown = v.length;
      if (n !== models) throw new OptionError('BAD_OPTION', 'lr.length', n, `must equal the arena's ${models} models (one learning rate per model)`);
      lrs = [];
      for (let m = 0; m < models; m++) lrs.push(checkParam(p, v[m], dtype, `lr[${m}]`) as number);
      params.lr = lrs[0]!;
      params.lrs = lrs as unknown as number; // a run parameter of its own (RunParams.lrs)
    } else {
      params[p.name] = v === undefined ? p.default : checkParam(p, v, dtype, p.name);
    }
  }
  // A hyperparameter of another optimizer is refused rather than ignored.
  for (const other of optimizers()) {
    for (const p of other.hypers) {
      if (o[p.name] === undefined || info.hypers.some((h) => h.name === p.name)) continue;
      const has = optimizers()
        .filter((x) => x.hypers.some((h) => h.name === p.name))
        .map((x) => x.name);
      throw new OptionError('BAD_OPTION', p.name, o[p.name], `applies to ${has.join(', ')}; this arena's optimizer is ${info.name}`);
    }
  }
  for (const p of commonParams()) params[p.name] = o[p.name] === undefined ? p.default : checkParam(p, o[p.name], 'float64', p.name);
  const schedule = o.schedule === undefined ? undefined : checkSchedule(o.schedule);
  if (schedule) params.schedule = schedule;
  return { params, lr: params.lr as number, lrs, schedule, clipGradNorm: params.clipGradNorm as number };
}

/** Reads the optimizer options for a plan and runs the native run checks (csrc/train/check.cc:
 *  the schedule's consistency, the refused combinations) on them with `run` (loss, precision)
 *  and, given an arena's `target`, what the run needs of it, so that a Trainer, or the CLI before
 *  it reads any data, refuses them before any work. `values`: the options as given, for errors. */
export function checkOptimizerOptions(
  plan: { header: Uint8Array; spec: { optimizer: string; dtype: Dtype; models: number } },
  o: Record<string, unknown>,
  run: Omit<RunParams, 'op'>,
  target?: RunTarget,
  values?: Record<string, unknown>,
): OptimizerSettings {
  const settings = readOptimizerOptions(o, plan.spec.optimizer, plan.spec.dtype, plan.spec.models);
  call(
    () => native().checkRun(plan.header, { ...settings.params, ...(settings.lrs ? { lrs: [...settings.lrs] } : {}), ...run, op: OPS.train, rows: 1 }, target),
    values,
  );
  return settings;
}

/** The learning rate of 0-based optimizer step `step` from base rate `lr` (the native lrAt). */
export function scheduledLr(s: OptimizerSettings, lr: number, step: number): number {
  return s.schedule ? call(() => native().lrAt(s.schedule!, lr, step)) : lr;
}
