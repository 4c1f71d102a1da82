// property.test.ts: issue 27, "Done when", second bullet: random sequences of public calls
// (plan options with compact and models, Arena.create, views, transfers, init, step, fit,
// forward / backward / update, predict, evaluate, save / load, dispose, hostile arguments) on the
// CPU, each checked against the plain reference model of test/support/property-model.ts:
// - no crash, and every failure an NnArenaError of the expected class with the expected code;
// - host and device bytes of every region as the model says after writes and transfers;
// - forward / predict / step / evaluate equal to a float64 forward pass written in TypeScript;
// - save then load gives the same bytes; Trainer.load the same weights and step count;
// - determinism: every arena has a twin made from the same plan that gets the same calls; every
//   result and, at each `sync`, the whole host side agree bit for bit.
// fc.assert prints the failing sequence (plain JSON ops) and the seed; NN_ARENA_PROP_RUNS and
// NN_ARENA_PROP_SEED override the run count and seed; NN_ARENA_PROP_BACKEND=cuda runs the same
// sequences on CUDA arenas (the GPU machine: scripts/gpu-session.sh prop).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, expect, it } from 'vitest';
import {
  Arena,
  ArenaError,
  DataError,
  FieldError,
  KINDS,
  LayoutError,
  NnArenaError,
  OptionError,
  planLayout,
  Trainer,
  type LayoutSpec,
  type Plan,
} from '../src/index.js';
import {
  ArenaModel,
  close,
  corruptSpec,
  dataOf,
  expectPlan,
  okOrDiverged,
  onDisposed,
  OK,
  refuse,
  referenceForward,
  referenceLoss,
  type Corruption,
  type ErrorClass,
  type Expect,
  type Sel,
  type SpecChoice,
} from './support/property-model.js';

const SEED = Number(process.env.NN_ARENA_PROP_SEED ?? 20270127);
const RUNS = Number(process.env.NN_ARENA_PROP_RUNS ?? 1000);
const MAX_LIVE = 4; // live arenas per sequence (each has a twin)
const cpu = { backend: process.env.NN_ARENA_PROP_BACKEND === 'cuda' ? 'cuda' : 'cpu' } as const;
// NN_ARENA_PROP_PRECISION=tf32 (CUDA): Trainers of one-model float32 arenas train with TF32
// products (the others cannot: a typed refusal the sequences would not expect), and outputs are
// compared with the float64 reference to TF32's rounding.
const PRECISION = process.env.NN_ARENA_PROP_PRECISION === 'tf32' ? ('tf32' as const) : undefined;
const withPrecision = (m: ArenaModel, o: Record<string, unknown>) =>
  PRECISION && m.spec.dtype === 'float32' && m.spec.models === 1 ? { ...o, precision: PRECISION } : o;
const near = (a: number, b: number, m: ArenaModel) =>
  PRECISION && m.spec.dtype === 'float32' ? Math.abs(a - b) <= 2e-2 * Math.max(1, Math.abs(a), Math.abs(b)) : close(a, b, m.spec.dtype);
const dir = mkdtempSync(join(tmpdir(), 'nn-arena-prop-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const CLASSES: Record<ErrorClass, new (...a: never[]) => NnArenaError> = { LayoutError, OptionError, DataError, ArenaError };
const PARAM_KINDS = ['w', 'b', 'mw', 'mb', 'vw', 'vb'];

// ---- the ops ------------------------------------------------------------------------------------

type BadSel = 'none' | 'kind' | 'layer' | 'layer-negative' | 'layer-string' | 'kinds-not-array' | 'null';
type Op =
  | { t: 'plan'; spec: SpecChoice; bad: Corruption }
  | { t: 'createBad'; a: number; how: 'backend' | 'memory' | 'device' | 'unknown' | 'null' }
  | { t: 'write'; a: number; slot: number; i: number; model: number; viaModel: boolean; v: number }
  | { t: 'transfer'; a: number; dir: 'toDevice' | 'toHost'; whole: boolean; kinds: number[] | null; header: boolean; layers: number[] | null; bad: BadSel }
  | { t: 'check'; a: number }
  | { t: 'trainer'; a: number; lr: 'small' | 'mid' | 'array' | 'huge' | 'nan' | 'string' | 'array-length' | 'unknown' }
  | { t: 'init'; a: number; seed: number; how: 'number' | 'array' | 'nan' | 'fraction' | 'string' | 'array-length' }
  | { t: 'step'; a: number; rows: number; seed: number; bad: 'none' | 'rows' | 'label' | 'nan' }
  | { t: 'fit'; a: number; count: number; epochs: number; seed: number }
  | { t: 'forward'; a: number; rows: number; seed: number; bad: boolean }
  | { t: 'backward'; a: number; rows: number; own: boolean; wrong: boolean; seed: number }
  | { t: 'update'; a: number }
  | { t: 'parts'; a: number; rows: number; own: boolean; seed: number }
  | { t: 'predict'; a: number; count: number; model: number; seed: number; bad: 'none' | 'model-string' | 'model-range' }
  | { t: 'evaluate'; a: number; count: number; seed: number }
  | { t: 'save'; a: number; kinds: number[] | null }
  | { t: 'tsave'; a: number }
  | { t: 'sync'; a: number }
  | { t: 'dispose'; a: number; via: 'arena' | 'trainer' }
  | { t: 'viewBad'; a: number; how: 'layer-range' | 'layer0-w' | 'kind' | 'model-string' | 'model-range' | 'layer-fraction' }
  | { t: 'loadBad'; how: 'missing' | 'dir' | 'garbage' | 'empty-path' };

const specArb: fc.Arbitrary<SpecChoice> = fc.record({
  layers: fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 2, maxLength: 4 }),
  batch: fc.integer({ min: 1, max: 6 }),
  dtype: fc.constantFrom('float32', 'float64'),
  optimizer: fc.constantFrom('sgd', 'momentum', 'adam', 'adamw'),
  compact: fc.boolean(),
  models: fc.constantFrom(1, 1, 1, 2, 3),
  samples: fc.constantFrom(0, 4, 12),
});
const a = fc.nat(7);
const seed = fc.nat(1000);
const planOp = (bad: fc.Arbitrary<Corruption>) => fc.record({ t: fc.constant('plan' as const), spec: specArb, bad });
const corruption = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Corruption>('none') },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Corruption>(
      'batch-negative',
      'batch-zero',
      'batch-fraction',
      'batch-string',
      'layer-zero',
      'one-layer',
      'dtype',
      'optimizer',
      'models-zero',
      'unknown-key',
      'compact-string',
    ),
  },
);
/** true about once in n. */
const rarely = (n: number) => fc.nat(n - 1).map((v) => v === 0);
const subset = (n: number) => fc.option(fc.uniqueArray(fc.nat(n), { minLength: 1, maxLength: 4 }), { nil: null });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: planOp(corruption) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('createBad' as const), a, how: fc.constantFrom('backend', 'memory', 'device', 'unknown', 'null') }) },
  {
    weight: 8,
    arbitrary: fc.record({
      t: fc.constant('write' as const),
      a,
      slot: fc.nat(200),
      i: fc.nat(10_000),
      model: fc.nat(2),
      viaModel: fc.boolean(),
      v: fc.integer({ min: -64, max: 64 }).map((n) => n / 64),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      t: fc.constant('transfer' as const),
      a,
      dir: fc.constantFrom('toDevice', 'toHost'),
      whole: rarely(7),
      kinds: subset(KINDS.length - 1),
      header: fc.boolean(),
      layers: subset(4),
      bad: fc.oneof(
        { weight: 8, arbitrary: fc.constant<BadSel>('none') },
        { weight: 1, arbitrary: fc.constantFrom<BadSel>('kind', 'layer', 'layer-negative', 'layer-string', 'kinds-not-array', 'null') },
      ),
    }),
  },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('check' as const), a }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('trainer' as const),
      a,
      lr: fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom('small', 'mid', 'array') },
        { weight: 1, arbitrary: fc.constantFrom('huge', 'nan', 'string', 'array-length', 'unknown') },
      ),
    }) as fc.Arbitrary<Op>,
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('init' as const),
      a,
      seed,
      how: fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom('number', 'array') },
        { weight: 1, arbitrary: fc.constantFrom('nan', 'fraction', 'string', 'array-length') },
      ),
    }) as fc.Arbitrary<Op>,
  },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('step' as const),
      a,
      rows: fc.nat(5),
      seed,
      bad: fc.oneof({ weight: 8, arbitrary: fc.constant('none') }, { weight: 1, arbitrary: fc.constantFrom('rows', 'label', 'nan') }),
    }) as fc.Arbitrary<Op>,
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant('fit' as const), a, count: fc.integer({ min: 1, max: 12 }), epochs: fc.integer({ min: 1, max: 2 }), seed }),
  },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('forward' as const), a, rows: fc.nat(5), seed, bad: rarely(10) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('backward' as const), a, rows: fc.nat(5), own: fc.boolean(), wrong: rarely(10), seed }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('update' as const), a }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('parts' as const), a, rows: fc.nat(5), own: fc.boolean(), seed }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('predict' as const),
      a,
      count: fc.integer({ min: 1, max: 12 }),
      model: fc.nat(2),
      seed,
      bad: fc.oneof({ weight: 8, arbitrary: fc.constant('none') }, { weight: 1, arbitrary: fc.constantFrom('model-string', 'model-range') }),
    }) as fc.Arbitrary<Op>,
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('evaluate' as const), a, count: fc.integer({ min: 1, max: 12 }), seed }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('save' as const), a, kinds: subset(KINDS.length - 1) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('tsave' as const), a }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('sync' as const), a }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('dispose' as const), a, via: fc.constantFrom('arena', 'trainer') }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('viewBad' as const),
      a,
      how: fc.constantFrom('layer-range', 'layer0-w', 'kind', 'model-string', 'model-range', 'layer-fraction'),
    }) as fc.Arbitrary<Op>,
  },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant('loadBad' as const), how: fc.constantFrom('missing', 'dir', 'garbage', 'empty-path') }) as fc.Arbitrary<Op>,
  },
);
const sequence = fc
  .tuple(fc.array(planOp(fc.constant<Corruption>('none')), { minLength: 1, maxLength: 2 }), fc.array(opArb, { minLength: 10, maxLength: 40, size: 'max' }))
  .map(([first, rest]) => [...first, ...rest] as Op[]);

// ---- outcomes -----------------------------------------------------------------------------------

type Outcome<T> = { ok: true; value: T } | { ok: false; error: NnArenaError };

/** Every failure must be one of ours, with a string code (and a field where it is a FieldError). */
function typed(e: unknown): NnArenaError {
  if (!(e instanceof NnArenaError)) throw new Error(`untyped failure: ${(e as Error)?.stack ?? String(e)}`);
  if (typeof e.code !== 'string' || !e.code) throw new Error(`failure without a code: ${e.message}`);
  if (e instanceof FieldError && (typeof e.field !== 'string' || !e.field)) throw new Error(`FieldError without a field: ${e.message}`);
  return e;
}

async function attempt<T>(f: () => T | Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await f() };
  } catch (e) {
    return { ok: false, error: typed(e) };
  }
}

const tally: Record<string, number> = {};
function expectOutcome(o: Outcome<unknown>, e: Expect, what: string): void {
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
function same(a: ArrayLike<number> | undefined, b: ArrayLike<number> | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i]) && !(Number.isNaN(a[i]) && Number.isNaN(b[i]))) return false;
  return true;
}
const sameMetrics = (p: { loss: number; accuracy: number; losses?: number[]; diverged?: boolean[] }, q: typeof p) =>
  same([p.loss, p.accuracy], [q.loss, q.accuracy]) && same(p.losses, q.losses) && JSON.stringify(p.diverged) === JSON.stringify(q.diverged);

// ---- the world: arenas, each with a twin -------------------------------------------------------

interface Side {
  arena: Arena;
  trainer?: Trainer;
}
interface Entry {
  m: ArenaModel;
  plan: Plan;
  sides: [Side, Side];
}
/** What may make a run diverge: a huge learning rate, values written into parameters, weights already non-finite. */
const mayDiverge = (m: ArenaModel & { tainted?: boolean; nonFinite?: boolean }) => m.hugeLr || !!m.tainted || !!m.nonFinite;
type M = ArenaModel & { tainted?: boolean; nonFinite?: boolean };

class World {
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

  async op(op: Op): Promise<void> {
    if (op.t === 'plan') return this.plan(op);
    if (op.t === 'loadBad') return this.loadBad(op);
    const e = this.pick(op.a);
    if (!e) return;
    const m = e.m as M;
    const gone = (exp: Expect) => (m.disposed ? onDisposed(exp) : exp);
    const K = m.spec.models,
      B = m.spec.batch;
    switch (op.t) {
      case 'createBad': {
        const opts = {
          backend: { backend: 'gpu' },
          memory: { backend: 'cpu', memory: 'managed' },
          device: { backend: 'cpu', device: 1 },
          unknown: { backnd: 'cpu' },
          null: null,
        }[op.how];
        const exp = {
          backend: refuse('OptionError', 'BAD_OPTION'),
          memory: refuse('ArenaError', 'NOT_SUPPORTED'),
          device: refuse('OptionError', 'BAD_OPTION'),
          unknown: refuse('OptionError', 'UNKNOWN_OPTION'),
          null: refuse('OptionError', 'BAD_OPTION'),
        }[op.how];
        const o = await attempt(() => Arena.create(e.plan, opts as never));
        if (o.ok) o.value.dispose();
        return expectOutcome(o, exp, `Arena.create ${op.how}`);
      }
      case 'write': {
        if (!m.slots.length) return;
        const k = op.slot % m.slots.length,
          s = m.slots[k]!;
        const mi = op.model % K;
        const useModel = op.viaModel && K > 1;
        const i = useModel ? op.i % s.length : op.i % s.total;
        const full = useModel ? (s.models > 1 ? mi * s.strideElems : 0) + i : i;
        await this.both(e, 'write', gone(OK), (side) => {
          const v = useModel ? side.arena.view(s.layer, s.kind, mi) : side.arena.view(s.layer, s.kind);
          expect(v.length).toBe(useModel ? s.length : s.total);
          v[i] = op.v;
        });
        m.write(k, full, op.v);
        if (PARAM_KINDS.includes(s.kind) || s.kind === 'stats') m.tainted = true;
        return;
      }
      case 'transfer': {
        const L = m.L;
        const kinds = op.kinds?.map((j) => KINDS[j % KINDS.length]!);
        const sel: Record<string, unknown> | null | undefined = op.whole
          ? undefined
          : {
              ...(kinds || op.header ? { kinds: [...(kinds ?? []), ...(op.header ? ['header'] : [])] } : {}),
              ...(op.layers ? { layers: op.layers.map((l) => l % (L + 1)) } : {}),
            };
        let given: unknown = sel;
        switch (op.bad) {
          case 'none':
            break;
          case 'kind':
            given = { ...sel, kinds: ['w', 'bogus'] };
            break;
          case 'layer':
            given = { ...sel, layers: [L + 1] };
            break;
          case 'layer-negative':
            given = { ...sel, layers: [-1] };
            break;
          case 'layer-string':
            given = { ...sel, layers: ['1'] };
            break;
          case 'kinds-not-array':
            given = { ...sel, kinds: 'w' };
            break;
          case 'null':
            given = null;
            break;
        }
        const exp = op.bad === 'none' ? OK : refuse('OptionError', 'BAD_SELECTOR');
        const o = await this.both(
          e,
          `${op.dir} ${op.bad}`,
          gone(exp),
          (side) => side.arena[op.dir](given as never),
          (p, q) => p.bytes === q.bytes && p.transfers === q.transfers,
        );
        if (o.ok) m.transfer(op.dir, sel as Sel | undefined);
        return;
      }
      case 'check': {
        await this.both(e, 'check', gone(OK), (side) => {
          m.slots.forEach((s, k) => {
            const v = side.arena.view(s.layer, s.kind);
            const known = m.known(k);
            if (side === e.sides[0]) tally['check: values compared'] = (tally['check: values compared'] ?? 0) + known.length;
            for (const [i, want] of known) {
              if (!Object.is(v[i], want)) throw new Error(`check: ${s.kind}[${s.layer}][${i}] holds ${v[i]}, the model says ${want}`);
            }
          });
        });
        for (const side of e.sides) expect(typeof side.arena.stats.toDeviceTransfers).toBe('number'); // readable, also after dispose
        return;
      }
      case 'trainer': {
        const lrs = Array.from({ length: K }, (_, i) => 0.01 * (i + 1));
        const options = {
          small: { lr: 0.01 },
          mid: { lr: 0.1 },
          array: { lr: lrs },
          huge: { lr: 1e30 },
          nan: { lr: NaN },
          string: { lr: '0.1' },
          'array-length': { lr: [...lrs, 0.5] },
          unknown: { learningRate: 0.1 },
        }[op.lr];
        const exp =
          {
            nan: refuse('OptionError', 'BAD_OPTION'),
            string: refuse('OptionError', 'BAD_OPTION'),
            'array-length': refuse('OptionError', 'BAD_OPTION'),
            unknown: refuse('OptionError', 'UNKNOWN_OPTION'),
          }[op.lr as string] ?? OK;
        const o = await this.both(e, `Trainer ${op.lr}`, gone(exp), (side) => {
          side.trainer = new Trainer(side.arena, (op.lr === 'unknown' ? options : withPrecision(m, options)) as never);
        });
        // The new Trainer replaces the side's: one that Trainer.load made (and that owned the arena) is dropped.
        if (o.ok) {
          m.lr = op.lr === 'huge' ? 1e30 : 0.01;
          m.hugeLr = op.lr === 'huge';
          m.owned = false;
        }
        return;
      }
      case 'init': {
        const seeds = {
          number: op.seed,
          array: Array.from({ length: K }, (_, i) => op.seed + 3 * i),
          nan: NaN,
          fraction: 1.5,
          string: '7',
          'array-length': Array.from({ length: K + 1 }, (_, i) => i),
        }[op.how];
        const exp = ['number', 'array'].includes(op.how) ? OK : refuse('OptionError', 'BAD_SEED');
        const o = await this.both(e, `init ${op.how}`, gone(exp), (side) => this.trainerOf(side, m).init(seeds as never));
        if (o.ok) {
          m.forget();
          m.steps = 0;
          m.forwardRows = undefined;
          m.gradients = false;
          m.tainted = false;
          m.nonFinite = false;
        }
        return;
      }
      case 'step': {
        const rows = op.bad === 'rows' ? B + 1 : 1 + (op.rows % B);
        const d = dataOf(op.seed, rows, m.inputs, m.outputs);
        if (op.bad === 'label') d.labels[0] = m.outputs;
        if (op.bad === 'nan') d.x[0] = NaN;
        const exp = {
          none: okOrDiverged(mayDiverge(m)),
          rows: refuse('DataError', 'BAD_DATA'),
          label: refuse('DataError', 'BAD_LABEL'),
          nan: refuse('DataError', 'BAD_DATA'),
        }[op.bad];
        const ref = !m.disposed && op.bad === 'none' ? this.referenceLosses(e, d.x, d.labels, rows) : undefined;
        const o = await this.both(e, `step ${op.bad}`, gone(exp), (side) => this.trainerOf(side, m).step(d.x, { labels: d.labels }), sameMetrics);
        if (!m.disposed && op.bad !== 'none') m.forgetStaging();
        if (m.disposed || op.bad !== 'none') return;
        this.ran(e, o);
        m.steps++;
        m.forwardRows = undefined;
        m.gradients = false;
        if (o.ok && ref) this.compareLosses(o.value, ref, m, 'step loss');
        if (o.ok) this.checkFinite(e, o.value.diverged);
        return;
      }
      case 'fit': {
        const d = dataOf(op.seed, op.count, m.inputs, m.outputs);
        const exp = op.count > m.spec.samples ? refuse('DataError', 'DATA_TOO_LARGE') : okOrDiverged(mayDiverge(m));
        const o = await this.both(
          e,
          'fit',
          gone(exp),
          (side) => this.trainerOf(side, m).fit(d, { epochs: op.epochs, seed: op.seed }),
          (p, q) => sameMetrics(p, q) && p.steps === q.steps,
        );
        if (m.disposed || op.count > m.spec.samples) return;
        this.ran(e, o);
        m.forwardRows = undefined;
        m.gradients = false;
        if (o.ok) {
          expect(o.value.steps).toBe(m.fitSteps(op.count, op.epochs));
          m.steps += o.value.steps;
          this.checkFinite(e, o.value.diverged);
        } else m.steps = NaN; // stopped at the diverging step
        return;
      }
      case 'forward': {
        const rows = op.bad ? B + 1 : 1 + (op.rows % B);
        const d = dataOf(op.seed, rows, m.inputs, m.outputs);
        const exp = K > 1 ? refuse('ArenaError', 'NOT_SUPPORTED') : op.bad ? refuse('DataError', 'BAD_DATA') : OK;
        const ref = !m.disposed && exp.ok ? this.reference(e, d.x, rows, 0) : undefined;
        const o = await this.both(e, `forward${op.bad ? ' rows' : ''}`, gone(exp), async (side) => (await this.trainerOf(side, m).forward(d.x)).slice(), same);
        if (m.disposed || !exp.ok) return;
        this.ran(e, o);
        m.forwardRows = rows;
        if (o.ok && ref) this.compareOutputs(o.value, ref, m, 'forward');
        return;
      }
      case 'backward': {
        const rows = (m.forwardRows ?? 1 + (op.rows % B)) + (op.wrong ? 1 : 0);
        const d = dataOf(op.seed, rows, m.inputs, m.outputs);
        const target = op.own ? { dOutput: Array.from({ length: rows * m.outputs }, (_, i) => Math.sin(i + op.seed) / rows) } : { labels: d.labels };
        const exp =
          K > 1
            ? refuse('ArenaError', 'NOT_SUPPORTED')
            : m.forwardRows === undefined
              ? refuse('ArenaError', 'NO_FORWARD')
              : op.wrong
                ? refuse('DataError', 'BAD_DATA_WIDTH')
                : m.spec.compact
                  ? refuse('ArenaError', 'NOT_SUPPORTED')
                  : OK;
        const o = await this.both(e, `backward${op.own ? ' dOutput' : ''}`, gone(exp), (side) => this.trainerOf(side, m).backward(target));
        if (o.ok) {
          m.forget();
          m.gradients = true;
        }
        return;
      }
      case 'update': {
        const exp = K > 1 ? refuse('ArenaError', 'NOT_SUPPORTED') : !m.gradients ? refuse('ArenaError', 'NO_GRADIENTS') : okOrDiverged(mayDiverge(m));
        const o = await this.both(e, 'update', gone(exp), (side) => this.trainerOf(side, m).update());
        if (m.disposed || !(o.ok || o.error.code === 'DIVERGED')) return;
        this.ran(e, o);
        m.steps++;
        m.gradients = false;
        m.forwardRows = undefined;
        if (o.ok) this.checkFinite(e, undefined);
        return;
      }
      case 'parts': {
        // a step in parts, so that backward and update meet a forward often
        await this.op({ t: 'forward', a: op.a, rows: op.rows, seed: op.seed, bad: false });
        await this.op({ t: 'backward', a: op.a, rows: op.rows, own: op.own, wrong: false, seed: op.seed });
        return this.op({ t: 'update', a: op.a });
      }
      case 'predict': {
        const d = dataOf(op.seed, op.count, m.inputs, m.outputs);
        const mi = op.model % K;
        const options = { none: { model: mi }, 'model-string': { model: String(mi) }, 'model-range': { model: K } }[op.bad];
        const exp = op.bad === 'none' ? OK : refuse('OptionError', 'BAD_OPTION');
        const ref = !m.disposed && exp.ok ? this.reference(e, d.x, op.count, mi) : undefined;
        const o = await this.both(e, `predict ${op.bad}`, gone(exp), (side) => this.trainerOf(side, m).predict(d.x, options as never), same);
        if (m.disposed || !exp.ok) return;
        this.ran(e, o);
        m.forwardRows = undefined;
        if (o.ok && ref) this.compareOutputs(o.value, ref, m, 'predict');
        return;
      }
      case 'evaluate': {
        const d = dataOf(op.seed, op.count, m.inputs, m.outputs);
        const ref = !m.disposed ? this.referenceLosses(e, d.x, d.labels, op.count) : undefined;
        const o = await this.both(e, 'evaluate', gone(OK), (side) => this.trainerOf(side, m).evaluate(d), sameMetrics);
        if (m.disposed) return;
        this.ran(e, o);
        m.forwardRows = undefined;
        if (o.ok && ref) this.compareLosses(o.value, ref, m, 'evaluate loss');
        return;
      }
      case 'save':
        return this.save(
          e,
          op.kinds?.map((j) => KINDS[j % KINDS.length]!),
        );
      case 'tsave':
        return this.tsave(e);
      case 'sync': {
        const o = await this.both(
          e,
          'sync',
          gone(OK),
          (side) => {
            side.arena.toHost();
            return side.arena.bytes().slice();
          },
          (p, q) => Buffer.from(p).equals(Buffer.from(q)),
        );
        if (o.ok) m.transfer('toHost', undefined);
        return;
      }
      case 'dispose': {
        const frees = op.via === 'arena' || (e.sides[0].trainer !== undefined && m.owned);
        await this.both(e, `dispose ${op.via}`, OK, (side) => {
          const old = side.arena.disposed ? undefined : side.arena.view(m.L, 'b');
          if (op.via === 'arena') {
            side.arena.dispose();
            side.arena.dispose();
          } else side.trainer?.dispose();
          expect(side.arena.disposed).toBe(frees || m.disposed);
          if (old && side.arena.disposed) expect(old.length).toBe(0); // detached
        });
        if (frees) m.disposed = true;
        return;
      }
      case 'viewBad': {
        const L = m.L;
        const call = {
          'layer-range': (x: Arena) => x.view(L + 1, 'w'),
          'layer0-w': (x: Arena) => x.view(0, 'w'),
          kind: (x: Arena) => x.view(1, 'bogus'),
          'model-string': (x: Arena) => x.view(1, 'w', '0' as never),
          'model-range': (x: Arena) => x.view(1, 'w', K),
          'layer-fraction': (x: Arena) => x.view(1.5, 'w'),
        }[op.how];
        // A kind no plan has is a LayoutError BAD_KIND (as in planLayout); a kind this layer lacks, NO_REGION.
        const exp = ['model-string', 'model-range', 'layer-fraction'].includes(op.how)
          ? refuse('OptionError', 'BAD_OPTION')
          : op.how === 'kind'
            ? refuse('LayoutError', 'BAD_KIND')
            : refuse('ArenaError', 'NO_REGION');
        await this.both(e, `view ${op.how}`, gone(exp), (side) => call(side.arena));
        return;
      }
    }
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

it(`random sequences of public calls agree with the reference model (${RUNS} sequences, seed ${SEED})`, async () => {
  mkdirSync(dir, { recursive: true });
  const started = performance.now();
  let ops = 0;
  await fc.assert(
    fc.asyncProperty(sequence, async (seq) => {
      const w = new World();
      try {
        for (const op of seq) {
          await w.op(op);
          ops++;
        }
      } finally {
        await w.close();
      }
    }),
    { numRuns: RUNS, seed: SEED },
  );
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `property: ${RUNS} sequences, ${ops} calls in ${seconds.toFixed(1)} s; outcomes:\n${Object.entries(tally)
      .sort()
      .map(([k, n]) => `  ${k}: ${n}`)
      .join('\n')}`,
  );
  // The sequences reached what they are meant to: each kind of call resolved, and each refusal the
  // model knows was seen (at the default count: a short run, e.g. under compute-sanitizer, may not).
  if (RUNS >= 1000)
    for (const k of [
      'planLayout none ok',
      'write ok',
      'toDevice none ok',
      'toHost none ok',
      'check ok',
      'init number ok',
      'init array ok',
      'step none ok',
      'fit ok',
      'forward ok',
      'backward ok',
      'backward dOutput ok',
      'update ok',
      'predict none ok',
      'evaluate ok',
      'Arena.save ok',
      'Trainer.save ok',
      'sync ok',
      'dispose arena ok',
      'check DISPOSED',
      'step none DISPOSED',
      'backward NOT_SUPPORTED',
      'backward NO_FORWARD',
      'update NO_GRADIENTS',
      'forward NOT_SUPPORTED',
      'planLayout none BAD_SPEC',
      'fit DATA_TOO_LARGE',
      'toHost kind BAD_SELECTOR',
    ]) {
      expect(tally[k] ?? 0, k).toBeGreaterThan(0);
    }
}, 600_000);
