// examples.test.ts: the README's examples run as written (examples/*.mjs, *.cjs, *.ts through
// scripts/run-examples.mjs, as `npm run examples` does), and the README shows the quick start
// exactly as examples/quickstart.mjs holds it.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(__dirname, '..');

describe('examples', () => {
  it('the README shows examples/quickstart.mjs verbatim', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const example = readFileSync(join(root, 'examples', 'quickstart.mjs'), 'utf8');
    expect(readme.includes('```js\n' + example + '```')).toBe(true);
  });

  it('the README shows examples/custom-loss.mjs verbatim', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const example = readFileSync(join(root, 'examples', 'custom-loss.mjs'), 'utf8');
    expect(readme.includes('```js\n' + example + '```')).toBe(true);
  });

  it('the README shows examples/tabular-ops.mjs verbatim', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const example = readFileSync(join(root, 'examples', 'tabular-ops.mjs'), 'utf8');
    expect(readme.includes('```js\n' + example + '```')).toBe(true);
  });

  it('the README shows examples/user-regions.mjs verbatim', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const example = readFileSync(join(root, 'examples', 'user-regions.mjs'), 'utf8');
    expect(readme.includes('```js\n' + example + '```')).toBe(true);
  });

  it('the README shows examples/modern-recipe.mjs verbatim', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const example = readFileSync(join(root, 'examples', 'modern-recipe.mjs'), 'utf8');
    expect(readme.includes('```js\n' + example + '```')).toBe(true);
  });

  it('every example runs (needs dist/: npm install or npx tsup)', () => {
    expect(existsSync(join(root, 'dist', 'index.js')), 'dist/ missing: run npx tsup').toBe(true);
    const r = spawnSync(process.execPath, [join(root, 'scripts', 'run-examples.mjs')], { cwd: root, encoding: 'utf8' });
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    expect(r.stdout).toMatch(/ok {3}examples\/quickstart\.mjs/);
    expect(r.stdout).toMatch(/ok {3}examples\/modern-recipe\.mjs/);
    expect(r.stdout).toMatch(/ok {3}examples\/custom-loss\.mjs/);
    expect(r.stdout).toMatch(/ok {3}examples\/quickstart\.cjs/);
    expect(r.stdout).toMatch(/ok {3}examples\/quickstart\.ts/);
    expect(r.stdout).toMatch(/ok {3}examples\/export-onnx\.mjs[^\n]*\n[^\n]*\n\s+ONNX Runtime vs predict\(\): max \|difference\| < 1e-6/);
    expect(r.stdout).toMatch(/ok {3}examples\/stream-npy\.mjs[^\n]*\n\s+x\.npy: 8000 x 784 float32\n\s+streamed 8000 rows through a 1000-row arena: 480 steps/);
    expect(r.stdout).toMatch(/ok {3}examples\/user-regions\.mjs[^\n]*\n\s+ema of layer 1: 32 values at byte \d+\n\s+ema of layer 2: 24 values/);
  }, 600_000);
});
