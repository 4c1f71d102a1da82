// import-graph.test.ts: no file in src/ imports in a circle (type-only imports count too: a
// circle of types is a circle of design), and no folder imports a folder above it in the layers
// of docs/architecture.md.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importCycles, importGraph, importsOf, srcLayers, upwardImports } from './support/import-graph.js';

describe('the import graph of src/', () => {
  it('reads static, type-only, re-export, side-effect and dynamic imports', () => {
    const src =
      `import { a } from './a.js';\nimport type { B } from "./b.js";\nexport { c } from './c.js';\n` +
      `export * from './d.js';\nimport './e.js';\nconst f = await import('./f.js');\n// import { g } from './g.js';\n` +
      `import {\n  h,\n  type H,\n} from './h.js';\n/* import { i } from './i.js'; */`;
    expect(importsOf(src)).toEqual(['./a.js', './b.js', './c.js', './d.js', './e.js', './f.js', './h.js'].sort((x, y) => src.indexOf(x) - src.indexOf(y)));
  });

  it('finds a circle where there is one', () => {
    const g = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(importCycles(g)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
    expect(
      importCycles(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('has no circle', () => {
    const graph = importGraph(join(__dirname, '..', 'src'));
    expect(graph.size).toBeGreaterThan(30);
    expect(graph.get('arena/arena.ts')).toContain('checkpoint/checkpoint.ts'); // the parser sees real edges
    expect(importCycles(graph)).toEqual([]);
  });

  it('has no import from a folder into a folder above it (docs/architecture.md, "The layers of src/")', () => {
    const layers = srcLayers(readFileSync(join(__dirname, '..', 'docs', 'architecture.md'), 'utf8'));
    expect(layers.length).toBeGreaterThan(8);
    expect(upwardImports(importGraph(join(__dirname, '..', 'src')), layers)).toEqual([]);
  });

  it('finds an upward import where there is one', () => {
    const g = new Map([
      ['core/errors.ts', ['train/trainer.ts']],
      ['train/trainer.ts', ['core/errors.ts', 'train/fit.ts']],
      ['index.ts', ['cli/main.ts']],
    ]);
    expect(upwardImports(g, ['cli', 'train', 'core'])).toEqual(['core -> train (core/errors.ts -> train/trainer.ts)']);
  });
});
