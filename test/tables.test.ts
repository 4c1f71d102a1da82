// tables.test.ts: the TypeScript tables of activations and losses (and the README's tables of
// them) are what scripts/gen-tables.cjs generates from the C headers that own them, and the
// addon built from those headers computes with the same codes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { Arena, planLayout, Trainer } from '../src/index.js';
import { ACTIVATION_TABLE, LOSS_TABLE } from '../src/native/tables.generated.js';

const root = join(__dirname, '..');
const gen = createRequire(import.meta.url)(join(root, 'scripts', 'gen-tables.cjs')) as { outputs(): Record<string, string> };

describe('descriptor tables generated from the C headers', () => {
  it('every generated file is what the generator writes now (run `npm run gen` after changing a C table)', () => {
    for (const [file, text] of Object.entries(gen.outputs())) expect(readFileSync(join(root, file), 'utf8'), file).toBe(text);
  });

  it('the addon reads the same table: an activation planned by its TS code trains with its own f', async () => {
    // gelu's code and keeps-pre rule come from the generated table; the native validator and the
    // run compute them from NNA_ACTIVATIONS. A wrong code or z size would be refused or differ.
    const gelu = ACTIVATION_TABLE.find((a) => a.name === 'gelu')!;
    expect(gelu.keepsPre).toBe(true);
    const plan = planLayout({ layers: [1, 1, 1], batch: 1, dtype: 'float64', activations: ['gelu', 'identity'] });
    expect(plan.region(1, 'z')!.length).toBe(2); // the output, then the pre-activation
    using arena = Arena.create(plan, { backend: 'cpu' });
    const t = new Trainer(arena, { loss: 'mse' });
    arena.view(1, 'w').set([1]);
    arena.view(1, 'b').set([0]);
    arena.view(2, 'w').set([1]);
    arena.view(2, 'b').set([0]);
    t.markHostChanged();
    const out = await t.predict([0.5]);
    const erf = (x: number) => {
      // Abramowitz-Stegun 7.1.26 is too coarse: use the series
      let s = 0,
        term = x;
      for (let n = 0; n < 60; n++) {
        s += term / (2 * n + 1);
        term *= (-x * x) / (n + 1);
      }
      return (2 / Math.sqrt(Math.PI)) * s;
    };
    expect(out[0]).toBeCloseTo(0.5 * 0.5 * (1 + erf(0.5 / Math.SQRT2)), 14);
  });

  it('every loss of the table is accepted by the native loss rules with the output layer its row asks for', () => {
    for (const l of LOSS_TABLE) {
      const output = l.softmax ? 'softmax' : 'identity';
      using arena = Arena.create(planLayout({ layers: [2, 3], batch: 1, activations: [output] }), { backend: 'cpu' });
      expect(new Trainer(arena, { loss: l.name }).loss).toBe(l.name);
    }
  });
});
