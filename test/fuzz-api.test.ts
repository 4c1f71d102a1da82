// fuzz-api.test.ts: issue 14, "Done when": a property-based fuzz of the public API (specs,
// options, data, selectors, checkpoint paths) with getters and Proxies that re-enter the API
// (dispose the arena, start a fit, init) in the middle of reading an argument. 10,000 cases in
// all: no crash, and every failure an NnArenaError with a string code (and a field for
// FieldErrors). fc.assert stops at the first counterexample and prints it.
import { mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Arena, FieldError, inspectCheckpoint, NnArenaError, planLayout, Trainer, type LayoutSpec } from '../src/index.js';

const cpu = { backend: 'cpu' } as const;
const SPEC: LayoutSpec = { layers: [3, 4, 2], batch: 4, samples: 16, optimizer: 'adam' };
const SEED = 20261123;

/** The failure must be one of ours, coded, with the field named where it is a FieldError. */
function typed(e: unknown): void {
  if (!(e instanceof NnArenaError)) throw new Error(`untyped failure: ${(e as Error)?.stack ?? String(e)}`);
  if (typeof e.code !== 'string' || e.code.length === 0) throw new Error(`failure without a code: ${e.message}`);
  if (e instanceof FieldError && (typeof e.field !== 'string' || e.field.length === 0)) throw new Error(`FieldError without a field: ${e.message}`);
}

const outcomes: Record<string, number> = {};
async function settle(f: () => unknown): Promise<void> {
  try {
    await f();
    outcomes.ok = (outcomes.ok ?? 0) + 1;
  } catch (e) {
    typed(e);
    const c = (e as NnArenaError).code;
    outcomes[c] = (outcomes[c] ?? 0) + 1;
  }
}

/** One case's world: an arena and a trainer that re-entrant getters act on. */
class World {
  arena = Arena.create(planLayout(SPEC), cpu);
  trainer = new Trainer(this.arena, { lr: 0.01 });
  pending: Promise<unknown>[] = [];
  constructor() {
    this.trainer.init(1);
  }
  reenter(action: Action): void {
    const t = this.trainer;
    const x = new Float32Array(12),
      labels = [0, 1, 0, 1];
    const guard = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        typed(e);
      }
    };
    switch (action) {
      case 'dispose':
        this.arena.dispose();
        break;
      case 'fit':
        this.pending.push(t.fit({ x, labels }, { epochs: 1 }).catch(typed));
        break;
      case 'evaluate':
        this.pending.push(t.evaluate({ x, labels }).catch(typed));
        break;
      case 'predict':
        this.pending.push(t.predict(x).catch(typed));
        break;
      case 'init':
        guard(() => t.init(2));
        break;
      case 'toHost':
        guard(() => this.arena.toHost({ kinds: ['w'] }));
        break;
      case 'none':
        break;
    }
  }
  async done(): Promise<void> {
    await Promise.all(this.pending);
    this.arena.dispose();
  }
}

const ACTIONS = ['dispose', 'fit', 'evaluate', 'predict', 'init', 'toHost', 'none'] as const;
type Action = (typeof ACTIONS)[number];
const action = fc.constantFrom(...ACTIONS);

const junk = fc.constantFrom<unknown>(
  undefined,
  null,
  NaN,
  Infinity,
  -Infinity,
  -1,
  0,
  0.5,
  1e-50,
  1e39,
  2 ** 53,
  2 ** 60,
  '1',
  '',
  'x',
  'relu',
  true,
  1n,
  2n ** 70n,
  Symbol('s'),
  {},
  [],
  () => 1,
  new Date(0),
  new Array(3),
);

/** Wrappers applied to a generated value when it is put in place: as is, behind a getter that
 *  re-enters the API, or in a Proxy whose answers change from read to read. */
type Wrap = { kind: 'plain' } | { kind: 'getter'; action: Action } | { kind: 'flip'; other: unknown; action: Action };
const wrap: fc.Arbitrary<Wrap> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'plain' } as Wrap) },
  { weight: 1, arbitrary: action.map((a) => ({ kind: 'getter', action: a }) as Wrap) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('flip' as const), other: junk, action }) as fc.Arbitrary<Wrap> },
);

/** An object with the given fields, each placed through its own wrapper; sometimes the whole
 *  object is a Proxy that re-enters on every read. */
function build(world: World, fields: Array<[string, unknown, Wrap]>, proxy: Action | undefined): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, v, w] of fields) {
    if (v === OMIT) continue;
    if (w.kind === 'plain') o[k] = v;
    else if (w.kind === 'getter')
      Object.defineProperty(o, k, {
        enumerable: true,
        get: () => {
          world.reenter(w.action);
          return v;
        },
      });
    else {
      let reads = 0;
      Object.defineProperty(o, k, {
        enumerable: true,
        get: () => {
          world.reenter(w.action);
          return reads++ === 0 ? v : w.other;
        },
      });
    }
  }
  if (!proxy) return o;
  return new Proxy(o, {
    get: (t, k, r) => {
      world.reenter(proxy);
      return Reflect.get(t, k, r);
    },
  });
}

const OMIT = Symbol('omit');
const field = (valid: fc.Arbitrary<unknown>, optional = true) =>
  fc.tuple(
    fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: junk }, ...(optional ? [{ weight: 1, arbitrary: fc.constant<unknown>(OMIT) }] : [])),
    wrap,
  );
const maybeProxy = fc.option(action, { nil: undefined, freq: 4 });

/** Number arrays of every shape: plain, sparse, typed, with junk entries, Proxied. */
const numbers = (length: fc.Arbitrary<number>, value: fc.Arbitrary<number>) =>
  fc.oneof(
    length.chain((n) => fc.array(value, { minLength: n, maxLength: n })),
    length.chain((n) => fc.array(value, { minLength: n, maxLength: n })).map((a) => Float32Array.from(a)),
    length.chain((n) => fc.array(value, { minLength: n, maxLength: n })).map((a) => Float64Array.from(a)),
    length.chain((n) => fc.array(value, { minLength: n, maxLength: n })).map((a) => Uint8Array.from(a.map((v) => Math.abs(v) % 256))),
    fc.sparseArray(value, { maxLength: 24 }),
    fc.array(fc.oneof(value, junk), { maxLength: 24 }),
    length.map((n) => new BigInt64Array(n)),
    length
      .chain((n) => fc.array(value, { minLength: n, maxLength: n }))
      .map((a) => new Proxy(a, { get: (t, k, r) => (k === 'length' ? t.length : (Reflect.get(t, k, r) ?? 0.5)) })),
  );

const x = numbers(
  fc.integer({ min: 1, max: 8 }).map((n) => n * 3),
  fc.double({ min: -2, max: 2, noNaN: true }),
);
const labels = numbers(fc.integer({ min: 0, max: 8 }), fc.integer({ min: -1, max: 2 }));
const targets = numbers(
  fc.integer({ min: 0, max: 8 }).map((n) => n * 2),
  fc.double({ min: -1, max: 1, noNaN: true }),
);

const dataFields = fc.tuple(field(x, false), field(labels), field(targets), field(fc.constantFrom(3, 4)));
const dataOf = (w: World, [fx, fl, fy, fi]: [[unknown, Wrap], [unknown, Wrap], [unknown, Wrap], [unknown, Wrap]], p: Action | undefined) =>
  build(
    w,
    [
      ['x', ...fx],
      ['labels', ...fl],
      ['y', ...fy],
      ['inputs', ...fi],
    ],
    p,
  );

describe('fuzz of the public API: no crash, every failure typed', () => {
  it('specs: 3,000 cases', () => {
    const w = new World();
    const units = fc.integer({ min: 1, max: 64 });
    fc.assert(
      fc.property(
        field(numbers(fc.integer({ min: 0, max: 5 }), units), false),
        field(fc.integer({ min: 1, max: 64 }), false),
        field(fc.constantFrom('float32', 'float64')),
        field(fc.array(fc.constantFrom('relu', 'softmax', 'tanh', 'identity', 'sigmoid', 'input'), { maxLength: 5 })),
        field(fc.constantFrom('sgd', 'momentum', 'adam')),
        field(fc.constantFrom('layer-major', 'kind-major')),
        field(fc.constantFrom(8, 16, 256, 4096, 2 ** 30, 2 ** 31, 12)),
        field(fc.integer({ min: 0, max: 100 })),
        maybeProxy,
        (layers, batch, dtype, activations, optimizer, order, align, samples, p) => {
          if (w.arena.disposed) Object.assign(w, new World());
          const spec = build(
            w,
            [
              ['layers', ...layers],
              ['batch', ...batch],
              ['dtype', ...dtype],
              ['activations', ...activations],
              ['optimizer', ...optimizer],
              ['order', ...order],
              ['align', ...align],
              ['samples', ...samples],
            ],
            p,
          );
          let plan;
          try {
            plan = planLayout(spec as unknown as LayoutSpec);
          } catch (e) {
            typed(e);
            return;
          }
          // What was planned is what was checked: a valid, frozen, self-consistent snapshot.
          expect(Object.isFrozen(plan.spec.layers)).toBe(true);
          expect(plan.spec.activations.length).toBe(plan.spec.layers.length - 1);
          expect(plan.spec.activations.slice(0, -1)).not.toContain('softmax');
          if (plan.totalBytes < 2 ** 20) {
            try {
              Arena.create(plan, cpu).dispose();
            } catch (e) {
              typed(e);
            }
          }
        },
      ),
      { numRuns: 3000, seed: SEED },
    );
    w.arena.dispose();
  });

  it('trainer options, fit options, data, steps and predictions: 3,000 cases', async () => {
    const hyper = fc.double({ min: 1e-6, max: 0.5, noNaN: true });
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('ctor', 'fit', 'evaluate', 'predict', 'step', 'gradients', 'init', 'primitives'),
        fc.tuple(field(fc.constantFrom('cross-entropy', 'mse')), field(hyper), field(hyper), field(hyper), field(hyper), field(hyper)),
        fc.tuple(
          field(fc.integer({ min: 1, max: 2 }), false),
          field(fc.boolean()),
          field(fc.integer({ min: -5, max: 5 })),
          field(fc.constant(() => undefined)),
          field(fc.integer({ min: 1, max: 9 })),
        ),
        dataFields,
        maybeProxy,
        maybeProxy,
        async (method, to, fo, df, p1, p2) => {
          const w = new World();
          try {
            const t = w.trainer;
            const data = dataOf(w, df, p1);
            if (method === 'ctor') {
              const opts = build(
                w,
                [
                  ['loss', ...to[0]],
                  ['lr', ...to[1]],
                  ['momentum', ...to[2]],
                  ['beta1', ...to[3]],
                  ['beta2', ...to[4]],
                  ['eps', ...to[5]],
                ],
                p2,
              );
              await settle(() => new Trainer(w.arena, opts));
            } else if (method === 'fit') {
              const opts = build(
                w,
                [
                  ['epochs', ...fo[0]],
                  ['shuffle', ...fo[1]],
                  ['seed', ...fo[2]],
                  ['onProgress', ...fo[3]],
                  ['reportsPerEpoch', ...fo[4]],
                ],
                p2,
              );
              await settle(() => t.fit(data as never, opts as never));
            } else if (method === 'evaluate') {
              await settle(() => t.evaluate(data as never));
            } else if (method === 'predict') {
              await settle(async () => {
                const out = await t.predict(data.x as never);
                for (const v of out) if (!Number.isFinite(v)) throw new Error(`non-finite prediction ${v}`);
              });
            } else if (method === 'step' || method === 'gradients') {
              const target = build(
                w,
                [
                  ['labels', ...df[1]],
                  ['y', ...df[2]],
                ],
                p2,
              );
              await settle(() => t[method](data.x as never, target as never));
            } else if (method === 'primitives') {
              // forward, backward from labels / y / dOutput, update
              const target = build(
                w,
                [
                  ['labels', ...df[1]],
                  ['y', ...df[2]],
                  ['dOutput', ...df[2]],
                ],
                p2,
              );
              await settle(async () => {
                await t.forward(data.x as never);
                await t.backward(target as never);
                await t.update();
              });
            } else {
              await settle(() => t.init(fo[2][0] as number));
            }
          } finally {
            await w.done();
          }
        },
      ),
      { numRuns: 3000, seed: SEED },
    );
    // The cases reach the runs, not only the argument checks.
    if (process.env.FUZZ_VERBOSE) console.log(outcomes);
    expect(outcomes.ok).toBeGreaterThan(300);
  });

  it('selectors: 2,000 cases', () => {
    let w = new World();
    const kinds = fc.array(fc.oneof(fc.constantFrom('header', 'z', 'w', 'b', 'mw', 'vw', 'xdata', 'ydata', 'stats', 'y'), junk), { maxLength: 5 });
    const layers = numbers(fc.integer({ min: 0, max: 4 }), fc.integer({ min: -1, max: 3 }));
    fc.assert(
      fc.property(fc.constantFrom('toDevice', 'toHost'), fc.option(fc.tuple(field(kinds), field(layers)), { nil: undefined }), maybeProxy, (dir, f, p) => {
        if (w.arena.disposed) w = new World();
        const sel =
          f === undefined
            ? undefined
            : build(
                w,
                [
                  ['kinds', ...f[0]],
                  ['layers', ...f[1]],
                ],
                p,
              );
        try {
          const r = w.arena[dir](sel as never);
          if (!(r.bytes >= 0 && r.bytes <= w.arena.plan.totalBytes)) throw new Error(`moved ${r.bytes} bytes`);
        } catch (e) {
          typed(e);
        }
      }),
      { numRuns: 2000, seed: SEED },
    );
    w.arena.dispose();
  });

  it('checkpoint paths and save options: 2,000 cases', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-fuzz-'));
    mkdirSync(join(dir, 'sub'));
    symlinkSync(join(dir, 'sub'), join(dir, 'link-to-dir'));
    symlinkSync(join(dir, 'nowhere'), join(dir, 'dangling'));
    let w = new World();
    w.arena.save(join(dir, 'good.nna'));
    // Names stay inside the temporary directory ('/' is never generated).
    const name = fc.oneof(fc.stringMatching(/^[a-z0-9._-]{0,10}$/), fc.constantFrom('good.nna', 'sub', 'link-to-dir', 'dangling', '..', '.', 'missing/x.nna'));
    // Junk paths are non-strings only: a junk string would be a path relative to the cwd.
    const path = fc.oneof(
      { weight: 5, arbitrary: name.map((n) => join(dir, n)) },
      { weight: 1, arbitrary: junk.filter((v) => typeof v !== 'string') },
      { weight: 1, arbitrary: fc.constantFrom<unknown>('', 'a\0b', { toString: () => join(dir, 'x') }, Buffer.from(join(dir, 'b'))) },
    );
    const kinds = fc.array(fc.oneof(fc.constantFrom('w', 'b', 'mw', 'vw', 'xdata', 'stats'), junk), { maxLength: 4 });
    fc.assert(
      fc.property(
        fc.constantFrom('save', 'save', 'load', 'inspect'),
        path,
        fc.option(fc.tuple(field(kinds), field(fc.integer({ min: 0, max: 1000 }))), { nil: undefined }),
        maybeProxy,
        (op, p, f, px) => {
          if (w.arena.disposed) w = new World();
          const opts =
            f === undefined
              ? undefined
              : build(
                  w,
                  [
                    ['kinds', ...f[0]],
                    ['steps', ...f[1]],
                  ],
                  px,
                );
          try {
            if (op === 'save') w.arena.save(p as string, opts as never);
            else if (op === 'load') Arena.load(p as string, cpu).dispose();
            else inspectCheckpoint(p as string);
          } catch (e) {
            typed(e);
          }
        },
      ),
      { numRuns: 2000, seed: SEED },
    );
    w.arena.dispose();
  });
});
