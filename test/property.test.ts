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
// The calls drawn: test/support/property-ops.ts; the settings, the outcomes and every check but
// the interpreter below (World.op): test/support/property-world.ts.
import { mkdirSync, rmSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, expect, it } from 'vitest';
import { Arena, KINDS, Trainer } from '../src/index.js';
import { dataOf, okOrDiverged, onDisposed, OK, refuse, type Expect, type Sel } from './support/property-model.js';
import { sequence, type Op } from './support/property-ops.js';
import {
  attempt,
  dir,
  expectOutcome,
  mayDiverge,
  PARAM_KINDS,
  RUNS,
  same,
  sameMetrics,
  SEED,
  tally,
  withPrecision,
  WorldBase,
  type M,
} from './support/property-world.js';

afterAll(() => rmSync(dir, { recursive: true, force: true }));

// ---- the interpreter: one op on an arena and its twin, checked against the model ----

class World extends WorldBase {
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
