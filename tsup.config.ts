import { defineConfig } from 'tsup';

// The package: the core entry, nn-arena/io and nn-arena/tools, ESM and CJS with types; shared code
// goes into common chunks (splitting, CJS too), so the entries share one Arena class, one error
// family and one addon. The CLI beside them. The bench is built apart, into bench/dist/ (not
// shipped).
export default defineConfig([
  {
    entry: { index: 'src/index.ts', io: 'src/io.ts', tools: 'src/tools.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
    target: 'node20',
    shims: true,
    sourcemap: true,
    splitting: true,
  },
  { entry: { cli: 'src/cli/main.ts' }, format: ['esm'], target: 'node20', banner: { js: '#!/usr/bin/env node' }, sourcemap: true },
  {
    entry: { bench: 'bench/main.ts', gather: 'bench/gather.ts' },
    outDir: 'bench/dist',
    clean: true,
    format: ['esm'],
    target: 'node20',
    sourcemap: true,
    external: ['benny'],
  },
]);
