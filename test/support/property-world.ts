// property-world.ts: the world of test/property.test.ts: its settings (NN_ARENA_PROP_*), the
// outcomes of a call (typed errors as the model expects them), and WorldBase: the live arenas
// with their twins, and every check but the one-op interpreter (World.op, in the test).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Op } from './property-ops.js';
import {
  Arena,
  ArenaError,
  DataError,
  FieldError,
  LayoutError,
  NnArenaError,
  OptionError,
  planLayout,
  Trainer,
  type LayoutSpec,
  type Plan,
} from '../../src/index.js';
import { ArenaModel, close, corruptSpec, expectPlan, OK, refuse, referenceForward, referenceLoss, type ErrorClass, type Expect } from './property-model.js';

export const SEED = Number(process.env.NN_ARENA_PROP_SEED ?? 20270127);
export const RUNS = Number(process.env.NN_ARENA_PROP_RUNS ?? 1000);
export const MAX_LIVE = 4; // live arenas per sequence (each has a twin)
export const cpu = { backend: process.env.NN_ARENA_PROP_BACKEND === 'cuda' ? 'cuda' : 'cpu' } as const;
// NN_ARENA_PROP_PRECISION=tf32 (CUDA): Trainers of one-model float32 arenas train with TF32
// products (the others cannot: a typed refusal the sequences would not expect), and outputs are
// compared with the float64 reference to TF32's rounding.
export const PRECISION = process.env.NN_ARENA_PROP_PRECISION === 'tf32' ? ('tf32' as const) : undefined;
export const withPrecision = (m: ArenaModel, o: Record<string, unknown>) =>
  PRECISION && m.spec.dtype === 'float32' && m.spec.models === 1 ? { ...o, precision: PRECISION } : o;
export const near = (a: number, b: number, m: ArenaModel) =>
  PRECISION && m.spec.dtype === 'float32' ? Math.abs(a - b) <= 2e-2 * Math.max(1, Math.abs(a), Math.abs(b)) : close(a, b, m.spec.dtype);
export const dir = mkdtempSync(join(tmpdir(), 'nn-arena-prop-'));
export const CLASSES: Record<ErrorClass, new (...a: never[]) => NnArenaError> = { LayoutError, OptionError, DataError, ArenaError };
export const PARAM_KINDS = ['w', 'b', 'mw', 'mb', 'vw', 'vb'];

// ---- the ops ------------------------------------------------------------------------------------

// ---- outcomes -----------------------------------------------------------------------------------

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: NnArenaError };

/** Every failure must be one of ours, with a string code (and a field where it is a FieldError). */
export function typed(e: unknown): NnArenaError {
  if (!(e instanceof NnArenaError)) throw new Error(`untyped failure: ${(e as Error)?.stack ?? String(e)}`);
  if (typeof e.code !== 'string' || !e.code) throw new Error(`failure without a code: ${e.message}`);
  if (e instanceof FieldError && (typeof e.field !== 'string' || !e.field)) throw new Error(`FieldError without a field: ${e.message}`);
  return e;
}

export async function attempt<T>(f: () => T | Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await f() };
  } catch (e) {
    return { ok: false, error: typed(e) };
  }
}

export const tally: Record<string, number> = {};
export function expectOutcome(o: Outcome<unknown>, e: Expect, what: string): void {
  const allowed = e.ok ? (e.or ?? []) : e.any;
  if (o.ok) {
    if (!e.ok) throw new Error(`${what}: resolved; expected ${allowed.map(([c, k]) => `${c} ${k}`).join(' or ')}`);
  } else if (!allowed.some(([cls, code]) => o.error instanceof CLASSES[cls] && o.error.code === code)) {
    throw new Error(
      `${what}: threw ${o.error.name} ${o.error.code} (${o.error.message}); expected ${e.ok ? 'success' : ''}${allowed.map(([c, k]) => ` ${c} ${k}`).join(' or')}`,
    );
  }
  const key = `${what} ${o.ok ? 'ok' : o.error.code}`;
  tally[key] = (tally[key] ?? 0) + 1;
}

/** Bit-identical arrays (NaN equal to NaN; 0 and -0 differ). */
export function same(a: ArrayLike<number> | undefined, b: ArrayLike<number> | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i]) && !(Number.isNaN(a[i]) && Number.isNaN(b[i]))) return false;
  return true;
}
export const sameMetrics = (p: { loss: number; accuracy: number; losses?: number[]; diverged?: boolean[] }, q: typeof p) =>
  same([p.loss, p.accuracy], [q.loss, q.accuracy]) && same(p.losses, q.losses) && JSON.stringify(p.diverged) === JSON.stringify(q.diverged);

// ---- the world: arenas, each with a twin -------------------------------------------------------

export interface Side {
  arena: Arena;
  trainer?: Trainer;
}
export interface Entry {
  m: ArenaModel;
  plan: Plan;
  sides: [Side, Side];
}
/** What may make a run diverge: a huge learning rate, values written into parameters, weights already non-finite. */
export const mayDiverge = (m: ArenaModel & { tainted?: boolean; nonFinite?: boolean }) => m.hugeLr || !!m.tainted || !!m.nonFinite;
export type M = ArenaModel & { tainted?: boolean; nonFinite?: boolean };

export class WorldBase {
  entries: Entry[] = [];
  files = 0;
  get live(): number {
    return this.entries.filter((e) => !e.m.disposed).length;
  }
  pick(a: number): Entry | undefined {
    return this.entries.length ? this.entries[a % this.entries.length] : undefined;
  }

  /** f on the arena and on its twin: the same outcome (code, and value by `eq`), checked against `exp`. */
  async both<T>(e: Entry, what: string, exp: Expect, f: (s: Side, k: 0 | 1) => T | Promise<T>, eq?: (p: T, q: T) => boolean): Promise<Outcome<T>> {
    const r = await attempt(() => f(e.sides[0], 0));
    const t = await attempt(() => f(e.sides[1], 1));
    expectOutcome(r, exp, what);
    if (r.ok !== t.ok || (!r.ok && !t.ok && r.error.code !== t.error.code))
      throw new Error(`${what}: the twin arena's outcome differs (${r.ok ? 'ok' : r.error.code} vs ${t.ok ? 'ok' : t.error.code})`);
    if (r.ok && t.ok && eq && !eq(r.value, t.value)) throw new Error(`${what}: the twin arena's result differs (determinism)`);
    return r;
  }

  trainerOf(s: Side, m: ArenaModel): Trainer {
    if (!s.trainer) {
      s.trainer = new Trainer(s.arena, withPrecision(m, { lr: 0.05 }));
      m.lr = 0.05;
    }
    return s.trainer;
  }

  /** Host weights and biases of model `model` (after a toHost of w and b on both sides). */
  weights(s: Side, m: ArenaModel, model: number): { w: Float64Array[]; b: Float64Array[]; finite: boolean } {
    const w: Float64Array[] = [],
      b: Float64Array[] = [];
    let finite = true;
    for (let l = 1; l <= m.L; l++) {
      w.push(Float64Array.from(s.arena.view(l, 'w', model)));
      b.push(Float64Array.from(s.arena.view(l, 'b', model)));
      for (const v of [...w.at(-1)!, ...b.at(-1)!]) if (!Number.isFinite(v)) finite = false;
    }
    return { w, b, finite };
  }

  paramsToHost(e: Entry): void {
    for (const s of e.sides) s.arena.toHost({ kinds: ['w', 'b'] });
    e.m.transfer('toHost', { kinds: ['w', 'b'] });
  }

  /** The run forgot what the regions hold; a run on weights that may diverge: check the DIVERGED contract. */
  ran(e: Entry, o: Outcome<unknown>): void {
    const m = e.m as M;
    m.forget();
    if (m.hugeLr) m.tainted = true; // its weights may be huge under the next Trainer too, until init()
    if (!o.ok && o.error.code === 'DIVERGED') m.nonFinite = true;
  }

  async plan(op: Extract<Op, { t: 'plan' }>): Promise<void> {
    const o = await attempt(() => planLayout(corruptSpec(op.spec, op.bad) as unknown as LayoutSpec));
    expectOutcome(o, expectPlan(op.spec, op.bad), `planLayout ${op.bad}`);
    if (!o.ok || this.live >= MAX_LIVE) return;
    const plan = o.value;
    expect(plan.spec.models).toBe(op.spec.models);
    const sides: [Side, Side] = [{ arena: Arena.create(plan, cpu) }, { arena: Arena.create(plan, cpu) }];
    this.entries.push({ m: new ArenaModel(op.spec, plan), plan, sides });
  }

  async loadBad(op: Extract<Op, { t: 'loadBad' }>): Promise<void> {
    const path = { missing: join(dir, 'missing.nna'), dir, garbage: join(dir, 'garbage.nna'), 'empty-path': '' }[op.how];
    if (op.how === 'garbage') writeFileSync(path, Buffer.from('NNARENA not a checkpoint'.repeat(20)));
    const exp = op.how === 'empty-path' ? refuse('OptionError', 'BAD_PATH') : refuse('ArenaError', 'BAD_CHECKPOINT');
    const o = await attempt(() => Arena.load(path, cpu));
    if (o.ok) o.value.dispose();
    expectOutcome(o, exp, `Arena.load ${op.how}`);
    const t = await attempt(() => Trainer.load(path, cpu));
    if (t.ok) t.value.dispose();
    expectOutcome(t, exp, `Trainer.load ${op.how}`);
  }

  /** Arena.save then Arena.load: the saved regions' bytes, nothing else. */
  async save(e: Entry, kinds: string[] | undefined): Promise<void> {
    const m = e.m as M;
    const n = this.files++;
    const files = [join(dir, `a${n}-0.nna`), join(dir, `a${n}-1.nna`)];
    const saved = (k: string) => (kinds ? kinds.includes(k) : k !== 'xdata' && k !== 'ydata');
    const o = await this.both(
      e,
      'Arena.save',
      m.disposed ? refuse('ArenaError', 'DISPOSED') : OK,
      (side, k) => {
        const bytes = side.arena.save(files[k]!, kinds ? { kinds } : {});
        const loaded = Arena.load(files[k]!, cpu);
        expect(loaded.plan.totalBytes).toBe(e.plan.totalBytes);
        for (const r of e.plan.regions) {
          if (r.bytes === 0) continue;
          const got = loaded.bytes(r.offset, r.bytes);
          if (saved(r.kind)) {
            if (!Buffer.from(got).equals(Buffer.from(side.arena.bytes(r.offset, r.bytes))))
              throw new Error(`Arena.load: ${r.kind}[${r.layer}] differs from what was saved`);
          }
        }
        loaded.dispose();
        return bytes;
      },
      (p, q) => p === q,
    );
    if (!o.ok) return;
    expect(readFileSync(files[0]!).equals(readFileSync(files[1]!))).toBe(true); // same calls, same file
    if (this.live >= MAX_LIVE) return;
    const lm = new ArenaModel(m.spec, e.plan) as M;
    lm.loadedFrom(m, saved);
    lm.tainted = m.tainted || m.nonFinite || m.hugeLr || kinds !== undefined; // parameters left out are zero; non-finite ones stay
    const sides = files.map((f) => ({ arena: Arena.load(f, cpu) })) as [Side, Side];
    this.entries.push({ m: lm, plan: sides[0].arena.plan, sides });
  }

  /** Trainer.save then Trainer.load: the same parameters, optimizer state and step count. */
  async tsave(e: Entry): Promise<void> {
    const m = e.m as M;
    const n = this.files++;
    const files = [join(dir, `t${n}-0.nna`), join(dir, `t${n}-1.nna`)];
    const o = await this.both(
      e,
      'Trainer.save',
      m.disposed ? refuse('ArenaError', 'DISPOSED') : OK,
      (side, k) => {
        const t = this.trainerOf(side, m);
        t.save(files[k]!);
        const loaded = Trainer.load(files[k]!, cpu);
        try {
          expect(loaded.steps).toBe(t.steps);
          for (const r of e.plan.regions) {
            if (!PARAM_KINDS.includes(r.kind) || r.bytes === 0) continue;
            if (!Buffer.from(loaded.arena.bytes(r.offset, r.bytes)).equals(Buffer.from(side.arena.bytes(r.offset, r.bytes))))
              throw new Error(`Trainer.load: ${r.kind}[${r.layer}] differs from what was saved`);
          }
        } finally {
          loaded.dispose();
        }
        return t.steps;
      },
      (p, q) => p === q,
    );
    if (!o.ok) return;
    m.forget(); // save brought the device side back
    if (!Number.isNaN(m.steps)) expect(o.value).toBe(m.steps);
    if (this.live >= MAX_LIVE) return;
    const loaded = files.map((f) => Trainer.load(f, cpu));
    const lm = new ArenaModel(m.spec, e.plan, false) as M;
    Object.assign(lm, { owned: true, lr: m.lr, hugeLr: m.hugeLr, steps: m.steps, gradients: m.gradients, tainted: m.tainted, nonFinite: m.nonFinite });
    this.entries.push({
      m: lm,
      plan: loaded[0]!.arena.plan,
      sides: [
        { arena: loaded[0]!.arena, trainer: loaded[0]! },
        { arena: loaded[1]!.arena, trainer: loaded[1]! },
      ],
    });
  }

  // ---- the TypeScript reference of results --------------------------------------------------------

  /** Outputs of model `model` for x from the host weights (brought to the host first), or undefined where a weight is not finite. */
  reference(e: Entry, x: number[], rows: number, model: number): Float64Array | undefined {
    // Not where the parameters may be huge (a 1e30 learning rate; values written into weights or
    // Adam's moments make biases of 1e6): float32 rounds those logits past any tolerance, or to Inf.
    if (mayDiverge(e.m as M)) return undefined;
    this.paramsToHost(e);
    const { w, b, finite } = this.weights(e.sides[0], e.m, model);
    return finite ? referenceForward(e.m.spec.layers, w, b, x, rows) : undefined;
  }

  referenceLosses(e: Entry, x: number[], labels: number[], rows: number): number[] | undefined {
    const out: number[] = [];
    for (let mi = 0; mi < e.m.spec.models; mi++) {
      const r = this.reference(e, x, rows, mi);
      if (!r) return undefined;
      out.push(referenceLoss(r, labels, e.m.outputs));
    }
    return out.every(Number.isFinite) ? out : undefined;
  }

  compareOutputs(got: ArrayLike<number>, ref: Float64Array, m: ArenaModel, what: string): void {
    tally['reference: outputs compared'] = (tally['reference: outputs compared'] ?? 0) + ref.length;
    expect(got.length, what).toBe(ref.length);
    for (let i = 0; i < ref.length; i++) if (!near(got[i]!, ref[i]!, m)) throw new Error(`${what}: output ${i} is ${got[i]}, the reference ${ref[i]}`);
  }

  compareLosses(got: { loss: number; losses?: number[]; diverged?: boolean[] }, ref: number[], m: ArenaModel, what: string): void {
    const losses = m.spec.models > 1 ? got.losses! : [got.loss];
    tally['reference: losses compared'] = (tally['reference: losses compared'] ?? 0) + ref.length;
    ref.forEach((want, mi) => {
      if (got.diverged?.[mi]) return; // its loss reads NaN
      if (!near(losses[mi]!, want, m)) throw new Error(`${what}: model ${mi} ${losses[mi]}, the reference ${want}`);
    });
  }

  /** A run that resolved left every weight and bias finite, but in the models it marked diverged. */
  checkFinite(e: Entry, diverged: boolean[] | undefined): void {
    if (!mayDiverge(e.m as M)) return;
    this.paramsToHost(e);
    for (let mi = 0; mi < e.m.spec.models; mi++) {
      if (diverged?.[mi]) {
        (e.m as M).nonFinite = true;
        continue;
      }
      if (!this.weights(e.sides[0], e.m, mi).finite) throw new Error(`a run resolved (model ${mi} not marked diverged) with non-finite weights`);
    }
  }

  async close(): Promise<void> {
    for (const e of this.entries)
      for (const s of e.sides) {
        if (s.trainer) s.trainer.dispose();
        s.arena.dispose();
      }
  }
}
