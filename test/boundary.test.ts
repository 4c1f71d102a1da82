// boundary.test.ts: the library's three entries. The core (`nn-arena`, src/index.ts) exports the
// core API and reaches none of the CLI's or the tools' packages; `nn-arena/io` holds the data
// loaders, streaming sources and model export; `nn-arena/tools` holds the reports, the PyTorch
// estimate, MNIST and the CLI's helpers; both share the core's classes.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as core from '../src/index.js';
import * as tools from '../src/tools.js';
import * as io from '../src/io.js';
import { testAddon } from '../src/internal.js';
import { native } from '../src/native/addon.js';
import { importGraph, importsOf } from './support/import-graph.js';
import { readFileSync } from 'node:fs';

const root = join(__dirname, '..');
const TOOL_PACKAGES = ['mnist', 'commander', 'cli-progress'];

/** Files reachable from `entry` (relative to src/) through the import graph. */
function reachable(entry: string): string[] {
  const graph = importGraph(join(root, 'src'));
  const seen = new Set<string>([entry]);
  for (const f of seen) for (const g of graph.get(f) ?? []) seen.add(g);
  return [...seen];
}

describe('the shipped addon', () => {
  it("holds no test- or bench-only function: those are the test addon's, which node-gyp-build never picks", () => {
    const shipped = Object.keys(native());
    const testOnly = Object.keys(testAddon());
    expect(testOnly).toEqual(expect.arrayContaining(['decodeHeader', 'probeBind', 'CopyBench', 'measureLink', 'jitCompileOnly']));
    expect(shipped.filter((k) => testOnly.includes(k) || k === 'internal')).toEqual([]);
    expect(shipped).toContain('ArenaHandle');
    // node-gyp-build loads the first .node in build/Release: the test addon is a .so beside it.
    const release = join(root, 'build', 'Release');
    if (existsSync(release)) expect(readdirSync(release).filter((f) => f.endsWith('.node'))).toEqual(['nn_arena.node']);
  });
});

describe('the core entry', () => {
  it('exports the core API: these 23 values', () => {
    expect(Object.keys(core).sort()).toEqual([
      'Arena',
      'ArenaError',
      'DEFAULT_ALIGN',
      'DataError',
      'DataParallel',
      'Dataset',
      'ERROR_CODES',
      'FieldError',
      'KINDS',
      'Kernel',
      'LayoutError',
      'NnArenaError',
      'OptionError',
      'Trainer',
      'cudaInfo',
      'errorClassOf',
      'inspectCheckpoint',
      'minDeviceBudget',
      'ncclInfo',
      'planLayout',
      'readParallelEnv',
      'rendezvous',
      'selectRanges',
    ]);
  });

  it('nn-arena/io holds the loaders, the streaming sources and model export, none of them in the core', () => {
    expect(Object.keys(io).sort()).toEqual([
      'loadArrow',
      'loadCsv',
      'loadNpy',
      'loadNpz',
      'loadSafetensors',
      'readSafetensors',
      'saveOnnx',
      'saveSafetensors',
      'streamBatches',
      'streamNpy',
      'toData',
      'toNpy',
      'toOnnx',
      'toSafetensors',
    ]);
    expect(Object.keys(io).filter((n) => n in core || n in tools)).toEqual([]);
  });

  it('reaches no file that imports mnist, commander or cli-progress, nor any report', () => {
    const files = reachable('index.ts');
    expect(files).toContain('train/trainer.ts');
    for (const f of files) {
      const bare = importsOf(readFileSync(join(root, 'src', f), 'utf8')).filter((s) => !s.startsWith('.') && !s.startsWith('node:'));
      expect(
        bare.filter((s) => TOOL_PACKAGES.includes(s)),
        f,
      ).toEqual([]);
    }
    expect(files.filter((f) => f.startsWith('report/') || f.startsWith('cli') || f.startsWith('data/'))).toEqual([]);
    // The tools do reach them (the check above can fail).
    expect(reachable('cli/main.ts').some((f) => importsOf(readFileSync(join(root, 'src', f), 'utf8')).includes('commander'))).toBe(true);
  });

  it('nn-arena/tools holds the rest, none of it in the core', () => {
    const names = Object.keys(tools);
    expect(names).toEqual(
      expect.arrayContaining([
        'loadMnist',
        'planToSVG',
        'estimatePytorchMemory',
        'trainingReportHtml',
        'recordTransfers',
        'machineInfo',
        'doctor',
        'TORCH_STAGES',
        'KIND_COLORS',
      ]),
    );
    expect(names.filter((n) => n in core)).toEqual([]);
  });
});

// The built package (dist/, npx tsup), loaded by its own name as a user would, ESM and CJS.
const built = existsSync(join(root, 'dist', 'tools.cjs')) && existsSync(join(root, 'dist', 'tools.js'));
describe.skipIf(!built)('the built entries (dist/)', () => {
  it("load without mnist, commander or cli-progress (CJS and ESM), and tools share the core's Arena", () => {
    const block = `const M = require('node:module'); const r = M._resolveFilename;
      M._resolveFilename = function (s, ...a) { if (${JSON.stringify(TOOL_PACKAGES)}.includes(s)) throw new Error('imported ' + s); return r.call(this, s, ...a); };`;
    const cjs = execFileSync(
      process.execPath,
      [
        '-e',
        `${block}
      const { Arena, planLayout } = require('nn-arena');
      const { recordTransfers } = require('nn-arena/tools');
      const a = Arena.create(planLayout({ layers: [2, 2], batch: 1 }), { backend: 'cpu' });
      const rec = recordTransfers(a); a.toDevice(); a.toHost({ kinds: ['w'] });
      console.log(JSON.stringify(rec.byPurpose())); a.dispose();`,
      ],
      { cwd: root, encoding: 'utf8' },
    );
    // The header's upload (read from the counters) and the two calls observed through the core's
    // Arena: a second copy of the core in the tools bundle would observe none of them.
    const calls = (JSON.parse(cjs) as Array<{ calls: number }>).reduce((n, t) => n + t.calls, 0);
    expect(calls).toBe(3);
    const esm = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      const core = await import('nn-arena');
      const tools = await import('nn-arena/tools');
      console.log(Object.keys(core).length, typeof tools.planToSVG(core.planLayout({ layers: [2, 2], batch: 1 })));`,
      ],
      { cwd: root, encoding: 'utf8' },
    );
    expect(esm.trim()).toBe('23 string');
  });
});
