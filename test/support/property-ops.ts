// property-ops.ts: the public calls test/property.test.ts draws (Op) and fast-check's
// arbitraries of them: plans with compact and models, arenas, views, transfers, training,
// save / load, dispose, hostile arguments.
import fc from 'fast-check';
import { KINDS } from '../../src/index.js';
import type { Corruption, SpecChoice } from './property-model.js';

export type BadSel = 'none' | 'kind' | 'layer' | 'layer-negative' | 'layer-string' | 'kinds-not-array' | 'null';
export type Op =
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

export const specArb: fc.Arbitrary<SpecChoice> = fc.record({
  layers: fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 2, maxLength: 4 }),
  batch: fc.integer({ min: 1, max: 6 }),
  dtype: fc.constantFrom('float32', 'float64'),
  optimizer: fc.constantFrom('sgd', 'momentum', 'adam', 'adamw'),
  compact: fc.boolean(),
  models: fc.constantFrom(1, 1, 1, 2, 3),
  samples: fc.constantFrom(0, 4, 12),
});
export const a = fc.nat(7);
export const seed = fc.nat(1000);
export const planOp = (bad: fc.Arbitrary<Corruption>) => fc.record({ t: fc.constant('plan' as const), spec: specArb, bad });
export const corruption = fc.oneof(
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
export const rarely = (n: number) => fc.nat(n - 1).map((v) => v === 0);
export const subset = (n: number) => fc.option(fc.uniqueArray(fc.nat(n), { minLength: 1, maxLength: 4 }), { nil: null });
export const opArb: fc.Arbitrary<Op> = fc.oneof(
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
export const sequence = fc
  .tuple(fc.array(planOp(fc.constant<Corruption>('none')), { minLength: 1, maxLength: 2 }), fc.array(opArb, { minLength: 10, maxLength: 40, size: 'max' }))
  .map(([first, rest]) => [...first, ...rest] as Op[]);
