// optimizers.ts: the optimizer and schedule tables as the native side defines them (one
// descriptor per optimizer in csrc/descriptors/, the schedules in schedules.h), generated into
// src/native/tables.generated.ts like every other native table. Spec validation, the planner's
// state regions, the phase table, Trainer options, CLI choices and the docs all read these;
// nothing in TypeScript lists them.
import { COMMON_PARAMS, OPTIMIZER_TABLE, SCHEDULE_TABLE } from '../native/tables.generated.js';
import { KINDS, type Kind } from './header.js';

/** One numeric (or boolean) parameter: its default and range (`min` / `max`, open or closed). */
export interface ParamInfo {
  readonly name: string;
  readonly type: 'number' | 'integer' | 'boolean';
  readonly default: number | boolean;
  readonly min: number;
  readonly max: number;
  readonly minOpen: boolean;
  readonly maxOpen: boolean;
  readonly doc: string;
}

export interface OptimizerInfo {
  readonly name: string;
  /** nna_header.optimizer */
  readonly code: number;
  readonly doc: string;
  /** The optimizer-state kinds it keeps per layer (mw, mb, vw, vb). */
  readonly state: readonly Kind[];
  /** No state: the step folds into the weight-gradient product (a compact plan has no dw). */
  readonly folds: boolean;
  /** Its hyperparameters, lr first. */
  readonly hypers: readonly ParamInfo[];
}

export interface ScheduleInfo {
  readonly name: string;
  readonly code: number;
  readonly doc: string;
  readonly params: readonly ParamInfo[];
}

interface Tables {
  optimizers: readonly OptimizerInfo[];
  schedules: readonly ScheduleInfo[];
  /** Run settings of every optimizer (clipGradNorm). */
  common: readonly ParamInfo[];
}

/** Freezes x and everything it holds: the tables are shared by every caller. */
function frozen<T>(x: T): T {
  if (x && typeof x === 'object') {
    for (const v of Object.values(x)) frozen(v);
    Object.freeze(x);
  }
  return x;
}

// The generated rows, frozen in place; an optimizer's state kinds named instead of coded.
const TABLES: Tables = frozen({
  optimizers: OPTIMIZER_TABLE.map((o) => ({ ...o, state: o.state.map((k) => KINDS[k]!) })),
  schedules: SCHEDULE_TABLE,
  common: COMMON_PARAMS,
});

/** Every optimizer, in code order. */
export function optimizers(): readonly OptimizerInfo[] {
  return TABLES.optimizers;
}

export function optimizerNamed(name: unknown): OptimizerInfo | undefined {
  return optimizers().find((o) => o.name === name);
}

export function optimizerCoded(code: number): OptimizerInfo | undefined {
  return optimizers().find((o) => o.code === code);
}

/** Every learning-rate schedule. */
export function schedules(): readonly ScheduleInfo[] {
  return TABLES.schedules;
}

/** clipGradNorm's entry (and any other setting every optimizer reads). */
export function commonParams(): readonly ParamInfo[] {
  return TABLES.common;
}

/** The names, quoted, for messages and CLI help: 'sgd', 'momentum', ... */
export const namesOf = (list: ReadonlyArray<{ name: string }>): string => list.map((x) => `'${x.name}'`).join(', ');

/** Whether x lies in p's range ('integer': a whole number too). */
export function inRange(p: ParamInfo, x: number): boolean {
  return (p.minOpen ? x > p.min : x >= p.min) && (p.maxOpen ? x < p.max : x <= p.max) && (p.type !== 'integer' || Number.isInteger(x));
}

/** p's range in words, for messages: "in (0, 1)", "> 0", ">= 1 (an integer)". */
export function rangeText(p: ParamInfo): string {
  const int = p.type === 'integer' ? ' (an integer)' : '';
  if (p.max === Infinity) return `${p.minOpen ? '>' : '>='} ${p.min}${int}`;
  return `in ${p.minOpen ? '(' : '['}${p.min}, ${p.max}${p.maxOpen ? ')' : ']'}${int}`;
}
